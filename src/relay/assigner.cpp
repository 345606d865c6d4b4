#include "relay/assigner.h"

#include <spdlog/spdlog.h>

namespace outbox {

Assigner::Assigner(OutboxStore& store, Publisher& publisher, SourceMetrics& metrics)
    : store_(store), publisher_(publisher), metrics_(metrics), scanner_(store, clock_), thread_([this] { loop(); }) {}

void Assigner::restart(const SourceState& state) {
  std::lock_guard lock(mu_);
  resetFrom_ = state;
}

Assigner::~Assigner() {
  {
    std::lock_guard lock(mu_);
    quit_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void Assigner::start(int limit, uint64_t assignedThrough) {
  {
    std::lock_guard lock(mu_);
    requested_ = true;
    limit_ = limit;
    assignedThrough_ = assignedThrough;
    result_.reset();
  }
  busy_ = true;
  cv_.notify_all();
}

std::optional<Assigner::Batch> Assigner::take(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  if (!cv_.wait_for(lock, timeout, [&] { return result_.has_value(); })) return std::nullopt;
  std::optional<Batch> out = std::move(result_);
  result_.reset();
  busy_ = false;
  return out;
}

void Assigner::drain() {
  if (!busy_) return;
  std::unique_lock lock(mu_);
  cv_.wait(lock, [&] { return result_.has_value(); });
  result_.reset();
  busy_ = false;
}

void Assigner::loop() {
  std::unique_lock lock(mu_);
  while (true) {
    cv_.wait(lock, [&] { return quit_ || requested_; });
    if (quit_) return;
    requested_ = false;
    int limit = limit_;
    uint64_t assignedThrough = assignedThrough_;
    std::optional<SourceState> resetFrom = std::move(resetFrom_);
    resetFrom_.reset();
    lock.unlock();
    if (resetFrom) {
      resetState_ = std::move(resetFrom);
      scanner_.invalidate();
    }
    Batch batch = work(limit, assignedThrough);
    lock.lock();
    result_ = std::move(batch);
    cv_.notify_all();
  }
}

Assigner::Batch Assigner::work(int limit, uint64_t assignedThrough) {
  Batch batch;
  auto t0 = std::chrono::steady_clock::now();
  if (!scanner_.valid()) {
    if (!resetState_) {
      batch.status = Status::transient("the scan has no state to start from (restart() was not called)");
      return batch;
    }
    if (batch.status = scanner_.reset(*resetState_); !batch.status.isOk()) return batch;
    resetState_.reset();  // a later reset needs the state as the database has it then
  }
  auto scan = scanner_.next(limit);
  auto t1 = std::chrono::steady_clock::now();
  if (!scan.isOk()) {
    scanner_.invalidate();
    batch.status = scan.status();
    return batch;
  }
  batch.read = scan->newRead;
  for (const auto& row : scan->rows) {
    if (auto reason = publisher_.poisonReason(row)) {
      batch.poison.emplace(row.id, *reason);
      scanner_.cutAt(*scan, row.id);
      break;
    }
  }
  auto t2 = std::chrono::steady_clock::now();
  if (!scan->rows.empty()) {
    batch.status = store_.assign(scan->rows, assignedThrough, scan->mark);
  } else if (scan->mark.cursor != scanner_.recorded().cursor || scan->mark.floor != scanner_.recorded().floor) {
    batch.status = store_.saveScan(scan->mark);
  }
  if (batch.status.isOk()) {
    scanner_.committed(*scan);
    batch.rows = std::move(scan->rows);
  } else {
    scanner_.invalidate();  // reset from the database before the next poll
  }
  metrics_.openHoles = scanner_.openHoles();
  metrics_.oldestOpenHoleMillis = static_cast<uint64_t>(scanner_.oldestHoleAge().count());
  auto t3 = std::chrono::steady_clock::now();
  auto ms = [](auto d) { return std::chrono::duration<double, std::milli>(d).count(); };
  spdlog::trace("assigner: {} rows: scan {:.1f} ms, check {:.1f} ms, assign {:.1f} ms; {} open holes", batch.rows.size(),
                ms(t1 - t0), ms(t2 - t1), ms(t3 - t2), scanner_.openHoles());
  return batch;
}

}  // namespace outbox
