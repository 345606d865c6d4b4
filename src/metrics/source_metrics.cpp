#include "metrics/source_metrics.h"

#include <fmt/format.h>

namespace outbox {

using Type = PrometheusPage::Type;
using Family = MetricFamily<SourceMetrics>;

namespace {

template <size_t N>
std::array<uint64_t, N> loaded(const std::array<std::atomic<uint64_t>, N>& counters) {
  std::array<uint64_t, N> out{};
  for (size_t i = 0; i < N; ++i) out[i] = counters[i].load();
  return out;
}

// outbox_wakeups_total's help: what each of its labels (common/wakeup.h, kWakeupLabels) means.
const std::string& wakeupsHelp() {
  static const std::string help = [] {
    std::string wokeBy;
    for (const WakeupLabel& woke : kWakeupLabels) {
      wokeBy += fmt::format("{}{} ({})", wokeBy.empty() ? "" : ", ", woke.label, woke.meaning);
    }
    return "Polls of the outbox table by what woke them: " + wokeBy + ".";
  }();
  return help;
}

// The families in page order; a reader adds the source's samples (labelled `source`).
const Family kSourceFamilies[] = {
    {"outbox_published_rows_total", Type::kCounter, "Rows this process published and the stream acknowledged.",
     readField<&SourceMetrics::publishedRows>},
    {"outbox_scans_total", Type::kCounter,
     "Scans of the outbox table (new rows and open holes) this process's relay completed: few on a quiet source "
     "that a doorbell or idle check watches, more while rows flow; flat on a standby, or while halted, paused or "
     "stuck.",
     readField<&SourceMetrics::scans>},
    {"outbox_wakeups_total", Type::kCounter, wakeupsHelp(),
     [](MetricSamples& out, const SourceMetrics& m) {
       for (const WakeupLabel& woke : kWakeupLabels) {
         out.labelled("by", woke.label, m.wakeups[static_cast<size_t>(woke.by)]);
       }
     }},
    {"outbox_doorbell_up", Type::kGauge,
     "1 while a binlog doorbell watched the source's table at its last poll; 0: the source polls (see the log for "
     "what is missing).",
     readField<&SourceMetrics::doorbell>},
    {"outbox_publish_errors_total", Type::kCounter,
     "Failures by kind: fenced (the stream refused a publish out of turn), publish (NATS), database, poison (a row "
     "that cannot be published as is).",
     [](MetricSamples& out, const SourceMetrics& m) {
       out.labelled("kind", "fenced", m.errorsFenced);
       out.labelled("kind", "publish", m.errorsPublish);
       out.labelled("kind", "database", m.errorsDatabase);
       out.labelled("kind", "poison", m.poisonRows);
     }},
    {"outbox_published_version", Type::kGauge,
     "Highest version acknowledged by the stream with every version below it (published_through), as this process "
     "last knew it.",
     readField<&SourceMetrics::publishedVersion>},
    {"outbox_assigned_version", Type::kGauge,
     "Highest version assigned to a row (assigned_through), as this process last knew it.",
     readField<&SourceMetrics::assignedVersion>},
    {"outbox_epoch", Type::kGauge, "The source's epoch; consumers re-bootstrap when it changes.",
     readField<&SourceMetrics::epoch>},
    {"outbox_halted", Type::kGauge, "1 while the source is halted until an operator acts (halted_reason).",
     readField<&SourceMetrics::halted>},
    {"outbox_paused", Type::kGauge, "1 while an operator has paused the source.", readField<&SourceMetrics::paused>},
    {"outbox_relay_running", Type::kGauge, "1 while this process runs the source's relay thread.",
     readField<&SourceMetrics::running>},
    {"outbox_leader", Type::kGauge, "1 while this process holds the source's leader lease.",
     readField<&SourceMetrics::leader>},
    {"outbox_open_holes", Type::kGauge,
     "Outbox ids the scan read past that were not visible: rows still being committed, rolled back or never used, "
     "until resolved (docs/design.md, \"Contract v2\"). Leader only.",
     readField<&SourceMetrics::openHoles>},
    {"outbox_open_hole_ranges", Type::kGauge,
     "The entries the scan keeps for its open holes: ranges of ids, and spans that fold holes a long statement "
     "elsewhere may still hold with the published rows between them (docs/design.md, \"Holes that cannot be proven "
     "closed\"). Bounded: a few hundred at most.",
     readField<&SourceMetrics::openHoleRanges>},
    {"outbox_quiet_hole_ranges", Type::kGauge,
     "Of outbox_open_hole_ranges, the quiet spans: their suspects each still execute the statement they ran when a "
     "probe found the span clear, so it is not read until one ends (MariaDB; docs/design.md, \"Quiet spans\").",
     readField<&SourceMetrics::quietHoleRanges>},
    {"outbox_hole_reads_total", Type::kCounter,
     "Statements that read the open holes for rows committed late: one a scan with holes open, however many they "
     "are.",
     readField<&SourceMetrics::holeReads>},
    {"outbox_oldest_open_hole_seconds", Type::kGauge,
     "How long the oldest open hole has been open: a producer transaction open that long may still commit its row.",
     readMillisAsSeconds<&SourceMetrics::oldestOpenHoleMillis>},
    {"outbox_commit_to_ack_seconds", Type::kHistogram,
     "From a row's created_at to the stream's acknowledgement of its message.",
     [](MetricSamples& out, const SourceMetrics& m) {
       out.histogram(SourceMetrics::kLatencyBuckets, loaded(m.latencyBuckets),
                     static_cast<double>(m.latencySumMicros.load()) / 1e6);
     }},
};

// The settled stream's (docs/design.md, "The settled stream (issue 36)"): sources with `settle` only.
constexpr Family kSettleFamilies[] = {
    {"outbox_settle_pending_keys", Type::kGauge,
     "Keys changed and not yet settled, on the leader (at most settle_max_keys).",
     readField<&SourceMetrics::settlePendingKeys>},
    {"outbox_settled_messages_total", Type::kCounter,
     "Messages the settled stream acknowledged: one per key each time it settles.",
     readField<&SourceMetrics::settledMessages>},
    {"outbox_settle_squashed_total", Type::kCounter,
     "Changes a later change of the same key stood for on the settled stream (Outbox-Settled-Count less one, "
     "summed).",
     readField<&SourceMetrics::settleSquashed>},
    {"outbox_settled_early_total", Type::kCounter,
     "Keys settled before they were quiet because settle_max_keys keys were pending.",
     readField<&SourceMetrics::settledEarly>},
    {"outbox_settle_missing_versions_total", Type::kCounter,
     "Versions the settle thread found missing from the main stream (purged or expired) where no epoch bump "
     "explains the gap: those not yet settled are lost to the settled stream until their keys change again.",
     readField<&SourceMetrics::settleMissing>},
    {"outbox_settle_too_large_total", Type::kCounter,
     "Keys not settled at a change because their settled message was over the server's max_payload (the settled "
     "headers are added to a main message that fit); each settles again at its next change.",
     readField<&SourceMetrics::settleTooLarge>},
    {"outbox_settle_errors_total", Type::kCounter,
     "Settle sessions ended by a failure (a settled publish refused or unanswered, a read of either stream); the "
     "next one recovers from the streams.",
     readField<&SourceMetrics::settleErrors>},
    {"outbox_settle_stuck", Type::kGauge,
     "1 while the settled stream is stopped by a failure no retry mends (the streams not as the bridge wrote them; "
     "the log says what): keys are not settled, whatever outbox_settle_pending_keys says.",
     readField<&SourceMetrics::settleStuck>},
    {"outbox_settle_delay_seconds", Type::kHistogram,
     "From a key's last change (its ack by the main stream) to the settled stream's ack of its message.",
     [](MetricSamples& out, const SourceMetrics& m) {
       out.histogram(SourceMetrics::kSettleDelayBuckets, loaded(m.settleDelayBuckets),
                     static_cast<double>(m.settleDelaySumMicros.load()) / 1e6);
     }},
};

}  // namespace

void SourceMetrics::observeLatency(double seconds) {
  size_t i = 0;
  while (i < kLatencyBuckets.size() && seconds > kLatencyBuckets[i]) ++i;
  latencyBuckets[i].fetch_add(1, std::memory_order_relaxed);
  latencySumMicros.fetch_add(static_cast<uint64_t>(seconds * 1e6), std::memory_order_relaxed);
}

void SourceMetrics::observeSettleDelay(double seconds) {
  size_t i = 0;
  while (i < kSettleDelayBuckets.size() && seconds > kSettleDelayBuckets[i]) ++i;
  settleDelayBuckets[i].fetch_add(1, std::memory_order_relaxed);
  settleDelaySumMicros.fetch_add(static_cast<uint64_t>(seconds * 1e6), std::memory_order_relaxed);
}

std::span<const Family> sourceFamilies() { return kSourceFamilies; }
std::span<const Family> settleFamilies() { return kSettleFamilies; }

void declareSourceFamilies(PrometheusPage& page) {
  declareFamilies(page, sourceFamilies());
  declareFamilies(page, settleFamilies());
}

void addSourceMetrics(PrometheusPage& page, const std::string& name, const SourceMetrics& m) {
  const PrometheusPage::Labels source{{"source", name}};
  addSamples(page, sourceFamilies(), source, m);
  if (m.settles) addSamples(page, settleFamilies(), source, m);
}

}  // namespace outbox
