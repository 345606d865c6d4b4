// The replica's verifying (docs/consumers.md section 4): a summary asked now and then, handed to
// the Verifier (verifier.h), and what it says in lines, counters and re-bootstraps.
#include <algorithm>
#include <charconv>

#include <fmt/format.h>

#include "replica/replica.h"
#include "snapshot/checksum.h"
#include "snapshot/document.h"

namespace outbox {

Result<ServedSummary> Replica::fetchSummary() {
  auto got = fetch(true);
  if (!got.isOk()) return got.status();
  auto parsed = parseSnapshot(got->body, false);
  if (!parsed.isOk()) return Status::transient("summary rejected: " + parsed.status().message());
  ServedSummary served;
  served.header = *parsed;
  served.readAt = std::move(got->readAt);
  int64_t freshFor = 0;
  std::from_chars(got->freshFor.data(), got->freshFor.data() + got->freshFor.size(), freshFor);
  served.freshFor = std::chrono::milliseconds(std::max<int64_t>(0, freshFor));
  return served;
}

// Asks ?summary=true and hands it to the verifier. `idle`: nothing arrived in this step.
Status Replica::verify(bool idle, bool& needBootstrap) {
  verifier_.asking(std::chrono::steady_clock::now());  // a bridge that does not answer: an interval later
  auto summary = fetchSummary();
  if (!summary.isOk()) return summary.status();
  const SnapshotHeader& h = summary->header;
  if (h.epoch != epoch_) {
    if (h.epoch > epoch_) {
      counters_.epochChanges++;
      say(fmt::format("epoch changed from {} to {}: re-bootstrapping", epoch_, h.epoch));
      needBootstrap = true;
    }
    return Status::ok();
  }
  if (h.streamName != streamName_) {
    counters_.lostStreams++;
    say(fmt::format("the source now publishes to stream {}, not {}: re-bootstrapping", h.streamName, streamName_));
    needBootstrap = true;
    return Status::ok();
  }
  if (idle && h.watermark > applied_) {
    // The source is ahead and nothing arrived: a stream that no longer holds the next sequence
    // will not send it (a purge or max_age on a quiet source shows no gap, and nats.c recreates
    // an ordered consumer on a missing or shorter stream for ever).
    auto problem = streamProblem(streamName_, streamSeq_ + 1);
    if (!problem.isOk()) return problem.status();
    if (*problem) {
      counters_.lostStreams++;
      say((*problem)->why + ": re-bootstrapping");
      needBootstrap = true;
      return Status::ok();
    }
  }
  judged(verifier_.offer(*summary, std::chrono::steady_clock::now(), idle), needBootstrap);
  return Status::ok();
}

void Replica::judged(const Verifier::Verdict& verdict, bool& needBootstrap) {
  using Kind = Verifier::Verdict::Kind;
  if (verdict.kind == Kind::kVerified) {
    counters_.verifications++;
    if (lastVerified_ != verdict.version || counters_.verifications == 1) {
      auto at = verifier_.at(verdict.version).value_or(state());
      lastVerified_ = verdict.version;  // before the line: the CLI dumps on it
      say(fmt::format("verified at version {}: {} records, checksum {}", verdict.version, at.recordCount,
                      formatChecksum(at.sum)));
    }
    return;
  }
  if (verdict.kind != Kind::kMismatch) return;
  counters_.verifications++;
  counters_.mismatches++;
  // A summary may reflect changes committed but not yet published (invariant 6): only a
  // difference that stays over distinct reads of the table means the replica is wrong.
  if (verdict.inARow < 2) return;
  const bool rebootstrap = verdict.inARow >= options_.mismatchesBeforeRebootstrap;
  say(fmt::format("checksum differs at version {}: replica {} ({} records), source {} ({} records, watermark {}){}",
                  verdict.state.version, formatChecksum(verdict.state.sum), verdict.state.recordCount,
                  formatChecksum(verdict.summary.checksum), verdict.summary.recordCount, verdict.summary.watermark,
                  rebootstrap ? ": re-bootstrapping" : "; checking again"));
  if (rebootstrap) needBootstrap = true;
}

}  // namespace outbox
