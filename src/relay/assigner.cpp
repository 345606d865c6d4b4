#include "relay/assigner.h"

#include <spdlog/spdlog.h>

namespace outbox {

Assigner::Assigner(OutboxStore& store, Publisher& publisher)
    : store_(store), publisher_(publisher), thread_([this] { loop(); }) {}

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
    lock.unlock();
    Batch batch = work(limit, assignedThrough);
    lock.lock();
    result_ = std::move(batch);
    cv_.notify_all();
  }
}

Assigner::Batch Assigner::work(int limit, uint64_t assignedThrough) {
  Batch batch;
  auto t0 = std::chrono::steady_clock::now();
  auto pending = store_.readPending(limit);
  auto t1 = std::chrono::steady_clock::now();
  if (!pending.isOk()) {
    batch.status = pending.status();
    return batch;
  }
  batch.rows = std::move(pending).value();
  batch.read = batch.rows.size();
  for (size_t i = 0; i < batch.rows.size(); ++i) {
    if (auto reason = publisher_.poisonReason(batch.rows[i])) {
      batch.poison.emplace(batch.rows[i].id, *reason);
      batch.rows.resize(i);
      break;
    }
  }
  auto t2 = std::chrono::steady_clock::now();
  if (!batch.rows.empty()) batch.status = store_.assign(batch.rows, assignedThrough);
  auto t3 = std::chrono::steady_clock::now();
  auto ms = [](auto d) { return std::chrono::duration<double, std::milli>(d).count(); };
  spdlog::trace("assigner: {} rows: read {:.1f} ms, check {:.1f} ms, assign {:.1f} ms", batch.rows.size(), ms(t1 - t0),
                ms(t2 - t1), ms(t3 - t2));
  return batch;
}

}  // namespace outbox
