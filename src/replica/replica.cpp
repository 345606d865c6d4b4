#include "replica/replica.h"

#include <httplib.h>

#include <fmt/format.h>

#include "common/backoff.h"
#include "common/json.h"
#include "snapshot/checksum.h"
#include "snapshot/document.h"

namespace outbox {

namespace {

std::string headerOr(const nats::StoredMessage& m, const char* name) {
  auto it = m.headers.find(name);
  return it == m.headers.end() ? std::string() : it->second;
}

}  // namespace

Replica::Replica(Options options)
    : options_(std::move(options)), verifier_(options_.verifyInterval, options_.verifyHistory) {}

Replica::~Replica() = default;

void Replica::say(const std::string& line) {
  if (options_.report) options_.report(fmt::format("[{}] {}", options_.source, line));
}

Result<Replica::Fetched> Replica::fetch(bool summary) {
  httplib::Client client(options_.baseUrl);
  client.set_connection_timeout(std::chrono::seconds(5));
  client.set_read_timeout(std::chrono::seconds(120));
  std::string path = fmt::format("/v1/sources/{}/control-snapshot{}", options_.source, summary ? "?summary=true" : "");
  auto res = client.Get(path);
  if (!res) {
    return Status::transient(fmt::format("GET {}{}: {}", options_.baseUrl, path, httplib::to_string(res.error())));
  }
  if (res->status != 200) {
    return Status::transient(fmt::format("GET {}{}: HTTP {}: {}", options_.baseUrl, path, res->status, res->body));
  }
  return Fetched{std::move(res->body), res->get_header_value("Outbox-Summary-Read-At"),
                 res->get_header_value("Outbox-Summary-Fresh-For")};
}

Status Replica::bootstrap() {
  sub_.reset();
  auto got = fetch(false);
  if (!got.isOk()) return got.status();
  auto parsed = parseSnapshot(got->body, true);
  if (!parsed.isOk()) {
    counters_.rejectedSnapshots++;
    say("snapshot rejected: " + parsed.status().message() + "; retrying");
    return Status::transient("snapshot rejected: " + parsed.status().message());
  }
  ParsedSnapshot& snap = *parsed;
  size_t keyIndex = snap.columns.size();
  for (size_t i = 0; i < snap.columns.size(); ++i) {
    if (snap.columns[i] == snap.key) keyIndex = i;
  }
  if (!snap.records.empty() && keyIndex == snap.columns.size()) {
    counters_.rejectedSnapshots++;
    return Status::transient(fmt::format("snapshot key '{}' is not a field of its records", snap.key));
  }
  OUTBOX_RETURN_IF_ERROR(connectNats());
  records_.clear();
  for (auto& values : snap.records) {
    const auto& key = values[keyIndex];
    records_[key.value_or("")] = std::move(values);
  }
  installed_ = true;
  streamName_ = snap.streamName;
  streamSeq_ = snap.streamSeq;
  key_ = snap.key;
  columns_ = snap.columns;
  numeric_ = snap.numeric;
  bool changedEpoch = counters_.bootstraps > 0 && snap.epoch != epoch_;
  epoch_ = snap.epoch;
  applied_ = snap.watermark;
  sum_ = snap.checksum;
  lastVerified_ = snap.watermark;
  verifier_.reset(state(), std::chrono::steady_clock::now());
  if (options_.store) {
    auto stored = options_.store->replace(inboxRow(), records_);
    if (!stored.isOk()) return forget(stored.status());
    generation_ = stored->generation;
  }
  counters_.bootstraps++;
  say(fmt::format("{}: epoch {}, watermark {}, {} records, checksum {}; following {} from sequence {}",
                  counters_.bootstraps == 1 ? "bootstrapped"
                                            : (changedEpoch ? "re-bootstrapped in a new epoch" : "re-bootstrapped"),
                  epoch_, applied_, records_.size(), formatChecksum(sum_), streamName_, snap.streamSeq + 1));
  auto problem = follow();
  if (!problem.isOk()) return problem.status();
  if (*problem) {
    // Missing: the bridge creates it at its next publish. Otherwise the snapshot is older than
    // the stream (read before the bridge recreated it, or before messages expired): the next
    // step bootstraps again, after run()'s backoff.
    if ((*problem)->missing) awaiting_ = Awaiting{streamName_, std::chrono::steady_clock::now()};
    return Status::transient("the snapshot's " + (*problem)->why);
  }
  return Status::ok();
}

Result<RecordValues> Replica::valuesOf(std::string_view payload) {
  auto fields = parseRecord(payload);
  if (!fields.isOk()) return Status::permanent("payload is " + fields.status().message());
  if (columns_.empty()) {  // the snapshot was empty: the first delta tells the columns
    for (const auto& f : *fields) {
      columns_.push_back(f.name);
      numeric_.push_back(f.numeric);
    }
  }
  RecordValues values;
  values.reserve(columns_.size());
  for (const auto& c : columns_) {
    // A name given twice: the last one counts, as in a JSON object read into a map.
    auto it = std::find_if(fields->rbegin(), fields->rend(), [&](const RecordField& f) { return f.name == c; });
    values.push_back(it == fields->rend() ? std::nullopt : it->text);
  }
  return values;
}

Status Replica::applyMessage(const nats::StoredMessage& m, bool& needBootstrap) {
  uint64_t epoch = std::strtoull(headerOr(m, "Outbox-Epoch").c_str(), nullptr, 10);
  uint64_t version = std::strtoull(headerOr(m, "Outbox-Version").c_str(), nullptr, 10);
  if (epoch > epoch_) {
    counters_.epochChanges++;
    say(fmt::format("epoch changed from {} to {} at version {}: re-bootstrapping", epoch_, epoch, version));
    needBootstrap = true;
    return Status::ok();
  }
  if (epoch < epoch_ || version <= applied_) {  // already reflected in what we have: inbox dedup
    counters_.skippedDuplicates++;
    streamSeq_ = m.seq;
    return Status::ok();
  }
  if (version != applied_ + 1) {
    counters_.gaps++;
    say(fmt::format("gap: expected version {}, got {} (sequence {}): re-bootstrapping", applied_ + 1, version, m.seq));
    needBootstrap = true;
    return Status::ok();
  }
  const std::string key = headerOr(m, "Outbox-Entity-Key");
  std::optional<RecordValues> values;  // nullopt: a delete
  if (headerOr(m, "Outbox-Op") != "delete") {
    auto read = valuesOf(m.data);
    if (!read.isOk()) {
      say(fmt::format("version {}: {}: re-bootstrapping", version, read.status().message()));
      needBootstrap = true;
      return Status::ok();
    }
    values = std::move(read).value();
  }
  auto existing = records_.find(key);
  uint64_t sum = sum_;
  size_t count = records_.size();
  if (existing != records_.end()) {
    sum -= recordHash(existing->second);
    --count;
  }
  if (values) {
    sum += recordHash(*values);
    ++count;
  }
  if (options_.store) {  // there first: what is in memory never runs ahead of it
    InboxRow from = inboxRow();
    InboxRow to = from;
    to.appliedVersion = version;
    to.streamSeq = m.seq;
    to.sum = sum;
    to.recordCount = count;
    auto done = options_.store->apply(from, to, key, values);
    if (!done.isOk()) return forget(done.status());
    if (!*done) {
      say(fmt::format("the inbox row moved past version {} under this consumer: reading it again", applied_));
      return forget(Status::ok());
    }
  }
  if (values) {
    records_[key] = std::move(*values);
  } else if (existing != records_.end()) {
    records_.erase(existing);
  }
  sum_ = sum;
  applied_ = version;
  streamSeq_ = m.seq;
  counters_.applied++;
  judged(verifier_.applied(state(), std::chrono::steady_clock::now()), needBootstrap);
  return Status::ok();
}

Status Replica::watch(std::chrono::steady_clock::time_point now, bool& needBootstrap) {
  if (now - lastWatch_ < kStall) return Status::ok();
  lastWatch_ = now;
  auto problem = streamProblem(streamName_, streamSeq_ + 1);
  if (!problem.isOk()) return problem.status();
  if (!*problem) return Status::ok();
  counters_.lostStreams++;
  say((*problem)->why + ": re-bootstrapping");
  needBootstrap = true;
  return Status::ok();
}

Status Replica::step(std::chrono::milliseconds wait) {
  if (!installed_) return options_.store && !loaded_ ? resume() : bootstrap();
  if (!sub_) {
    auto problem = follow();
    if (!problem.isOk()) return problem.status();
    if (*problem) return streamLost(**problem);
  }
  auto next = sub_->next(wait);
  if (!next.isOk()) {
    sub_.reset();
    return next.status();
  }
  bool needBootstrap = false;
  auto now = std::chrono::steady_clock::now();
  if (next->has_value()) {
    OUTBOX_RETURN_IF_ERROR(applyMessage(**next, needBootstrap));
    if (!needBootstrap && applied_ != reportedVersion_ && now - lastProgressReport_ >= std::chrono::seconds(1)) {
      say(fmt::format("applied through version {} ({} records)", applied_, records_.size()));
      reportedVersion_ = applied_;
      lastProgressReport_ = now;
    }
  } else {
    // Caught up: a summary the replica has now reached is judged, and the stream asked now and
    // then whether it can still give what comes next (a purge on a quiet source shows no gap).
    judged(verifier_.idle(now), needBootstrap);
    if (!needBootstrap) OUTBOX_RETURN_IF_ERROR(watch(now, needBootstrap));
  }
  if (!needBootstrap && verifier_.due(now)) OUTBOX_RETURN_IF_ERROR(verify(!next->has_value(), needBootstrap));
  if (needBootstrap) return bootstrap();
  return Status::ok();
}

void Replica::run(StopSignal& stop) {
  Backoff backoff(std::chrono::milliseconds(200), std::chrono::milliseconds(10'000));
  while (!stop.stopped()) {
    Status s = step(std::chrono::milliseconds(200));
    if (s.isOk()) {
      backoff.reset();
      continue;
    }
    auto delay = backoff.next();
    say(fmt::format("{}; retrying in {} ms", s.message(), delay.count()));
    stop.waitFor(delay);
  }
}

std::string Replica::dumpJson() const {
  std::string out = "{\"source\":\"";
  appendJsonEscaped(out, options_.source);
  out += fmt::format("\",\"sourceEpoch\":{},\"appliedVersion\":{},\"key\":\"", epoch_, applied_);
  appendJsonEscaped(out, key_);
  out += "\",\"records\":[";
  bool first = true;
  for (const auto& [key, values] : records_) {
    out += first ? "" : ",";
    first = false;
    out += recordJson(columns_, numeric_, values);
  }
  out += fmt::format("],\"recordCount\":{},\"checksum\":\"{}\"}}", records_.size(), formatChecksum(sum_));
  return out;
}

}  // namespace outbox
