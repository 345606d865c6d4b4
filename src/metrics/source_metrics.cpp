#include "metrics/source_metrics.h"

#include <fmt/format.h>

namespace outbox {

using Type = PrometheusPage::Type;

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

void declareSourceFamilies(PrometheusPage& page) {
  page.family("outbox_published_rows_total", Type::kCounter,
              "Rows this process published and the stream acknowledged.");
  page.family("outbox_scans_total", Type::kCounter,
              "Scans of the outbox table (new rows and open holes) this process's relay completed: few on a "
              "quiet source that a doorbell or idle check watches, more while rows flow; flat on a standby, or "
              "while halted, paused or stuck.");
  std::string wokeBy;
  for (const WakeupLabel& woke : kWakeupLabels) {
    wokeBy += fmt::format("{}{} ({})", wokeBy.empty() ? "" : ", ", woke.label, woke.meaning);
  }
  page.family("outbox_wakeups_total", Type::kCounter, "Polls of the outbox table by what woke them: " + wokeBy + ".");
  page.family("outbox_doorbell_up", Type::kGauge,
              "1 while a binlog doorbell watched the source's table at its last poll; 0: the source polls "
              "(see the log for what is missing).");
  page.family("outbox_publish_errors_total", Type::kCounter,
              "Failures by kind: fenced (the stream refused a publish out of turn), publish (NATS), database, "
              "poison (a row that cannot be published as is).");
  page.family("outbox_published_version", Type::kGauge,
              "Highest version acknowledged by the stream with every version below it (published_through), as "
              "this process last knew it.");
  page.family("outbox_assigned_version", Type::kGauge,
              "Highest version assigned to a row (assigned_through), as this process last knew it.");
  page.family("outbox_epoch", Type::kGauge, "The source's epoch; consumers re-bootstrap when it changes.");
  page.family("outbox_halted", Type::kGauge, "1 while the source is halted until an operator acts (halted_reason).");
  page.family("outbox_paused", Type::kGauge, "1 while an operator has paused the source.");
  page.family("outbox_relay_running", Type::kGauge, "1 while this process runs the source's relay thread.");
  page.family("outbox_leader", Type::kGauge, "1 while this process holds the source's leader lease.");
  page.family("outbox_open_holes", Type::kGauge,
              "Outbox ids the scan read past that were not visible: rows still being committed, rolled back or "
              "never used, until resolved (docs/design.md, \"Contract v2\"). Leader only.");
  page.family("outbox_open_hole_ranges", Type::kGauge,
              "The entries the scan keeps for its open holes: ranges of ids, and spans that fold holes a long "
              "statement elsewhere may still hold with the published rows between them (docs/design.md, \"Holes "
              "that cannot be proven closed\"). Bounded: a few hundred at most.");
  page.family("outbox_quiet_hole_ranges", Type::kGauge,
              "Of outbox_open_hole_ranges, the quiet spans: their suspects each still execute the statement they "
              "ran when a probe found the span clear, so it is not read until one ends (MariaDB; docs/design.md, "
              "\"Quiet spans\").");
  page.family("outbox_hole_reads_total", Type::kCounter,
              "Statements that read the open holes for rows committed late: one a scan with holes open, however "
              "many they are.");
  page.family("outbox_oldest_open_hole_seconds", Type::kGauge,
              "How long the oldest open hole has been open: a producer transaction open that long may still "
              "commit its row.");
  page.family("outbox_commit_to_ack_seconds", Type::kHistogram,
              "From a row's created_at to the stream's acknowledgement of its message.");
  // The settled stream's (sources with `settle` only).
  page.family("outbox_settle_pending_keys", Type::kGauge,
              "Keys changed and not yet settled, on the leader (at most settle_max_keys).");
  page.family("outbox_settled_messages_total", Type::kCounter,
              "Messages the settled stream acknowledged: one per key each time it settles.");
  page.family("outbox_settle_squashed_total", Type::kCounter,
              "Changes a later change of the same key stood for on the settled stream (Outbox-Settled-Count "
              "less one, summed).");
  page.family("outbox_settled_early_total", Type::kCounter,
              "Keys settled before they were quiet because settle_max_keys keys were pending.");
  page.family("outbox_settle_missing_versions_total", Type::kCounter,
              "Versions the settle thread found missing from the main stream (purged or expired) where no epoch "
              "bump explains the gap: those not yet settled are lost to the settled stream until their keys change "
              "again.");
  page.family("outbox_settle_too_large_total", Type::kCounter,
              "Keys not settled at a change because their settled message was over the server's max_payload (the "
              "settled headers are added to a main message that fit); each settles again at its next change.");
  page.family("outbox_settle_errors_total", Type::kCounter,
              "Settle sessions ended by a failure (a settled publish refused or unanswered, a read of either "
              "stream); the next one recovers from the streams.");
  page.family("outbox_settle_stuck", Type::kGauge,
              "1 while the settled stream is stopped by a failure no retry mends (the streams not as the bridge "
              "wrote them; the log says what): keys are not settled, whatever outbox_settle_pending_keys says.");
  page.family("outbox_settle_delay_seconds", Type::kHistogram,
              "From a key's last change (its ack by the main stream) to the settled stream's ack of its message.");
}

void addSourceMetrics(PrometheusPage& page, const std::string& name, const SourceMetrics& m) {
  const PrometheusPage::Labels source{{"source", name}};
  page.sample("outbox_published_rows_total", source, m.publishedRows.load());
  page.sample("outbox_scans_total", source, m.scans.load());
  const std::pair<const char*, const std::atomic<uint64_t>*> errors[] = {
      {"fenced", &m.errorsFenced}, {"publish", &m.errorsPublish}, {"database", &m.errorsDatabase},
      {"poison", &m.poisonRows}};
  for (const auto& [kind, counter] : errors) {
    page.sample("outbox_publish_errors_total", {{"source", name}, {"kind", kind}}, counter->load());
  }
  for (const WakeupLabel& woke : kWakeupLabels) {
    page.sample("outbox_wakeups_total", {{"source", name}, {"by", woke.label}},
                m.wakeups[static_cast<size_t>(woke.by)].load());
  }
  page.sample("outbox_doorbell_up", source, uint64_t{m.doorbell.load() ? 1u : 0u});
  page.sample("outbox_published_version", source, m.publishedVersion.load());
  page.sample("outbox_assigned_version", source, m.assignedVersion.load());
  page.sample("outbox_epoch", source, m.epoch.load());
  page.sample("outbox_halted", source, uint64_t{m.halted.load() ? 1u : 0u});
  page.sample("outbox_paused", source, uint64_t{m.paused.load() ? 1u : 0u});
  page.sample("outbox_relay_running", source, uint64_t{m.running.load() ? 1u : 0u});
  page.sample("outbox_leader", source, uint64_t{m.leader.load() ? 1u : 0u});
  page.sample("outbox_open_holes", source, m.openHoles.load());
  page.sample("outbox_oldest_open_hole_seconds", source, static_cast<double>(m.oldestOpenHoleMillis.load()) / 1e3);
  page.sample("outbox_open_hole_ranges", source, m.openHoleRanges.load());
  page.sample("outbox_quiet_hole_ranges", source, m.quietHoleRanges.load());
  page.sample("outbox_hole_reads_total", source, m.holeReads.load());
  std::array<uint64_t, SourceMetrics::kLatencyBuckets.size() + 1> counts{};
  for (size_t i = 0; i < counts.size(); ++i) counts[i] = m.latencyBuckets[i].load();
  page.histogram("outbox_commit_to_ack_seconds", source, SourceMetrics::kLatencyBuckets, counts,
                 static_cast<double>(m.latencySumMicros.load()) / 1e6);
  if (!m.settles) return;
  page.sample("outbox_settle_pending_keys", source, m.settlePendingKeys.load());
  page.sample("outbox_settled_messages_total", source, m.settledMessages.load());
  page.sample("outbox_settle_squashed_total", source, m.settleSquashed.load());
  page.sample("outbox_settled_early_total", source, m.settledEarly.load());
  page.sample("outbox_settle_missing_versions_total", source, m.settleMissing.load());
  page.sample("outbox_settle_too_large_total", source, m.settleTooLarge.load());
  page.sample("outbox_settle_errors_total", source, m.settleErrors.load());
  page.sample("outbox_settle_stuck", source, m.settleStuck.load());
  std::array<uint64_t, SourceMetrics::kSettleDelayBuckets.size() + 1> delays{};
  for (size_t i = 0; i < delays.size(); ++i) delays[i] = m.settleDelayBuckets[i].load();
  page.histogram("outbox_settle_delay_seconds", source, SourceMetrics::kSettleDelayBuckets, delays,
                 static_cast<double>(m.settleDelaySumMicros.load()) / 1e6);
}

}  // namespace outbox
