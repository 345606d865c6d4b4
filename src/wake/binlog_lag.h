#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>

#include "db/binlog.h"
#include "db/connection.h"

namespace outbox {

// How far a doorbell's dump reads behind the server's end (docs/design.md, "Waking up"): a dump
// reading old files keeps the server from purging them, and rings late. The time from each
// event's timestamp; the bytes from SHOW BINARY LOGS on a second connection of the doorbell's
// account, asked at most every kMeasureEvery while events flow and closed once a heartbeat says
// the dump read all there is (a quiet server costs no statement).
class BinlogLag {
 public:
  static constexpr std::chrono::seconds kMeasureEvery{5};
  // Past these the dump starts again at the end: bytes, or time with at least kMinBehindBytes
  // behind (a long transaction's events carry the time of its statements, not of its commit).
  static constexpr uint64_t kMaxBehindBytes = 64ull << 20;
  static constexpr std::chrono::seconds kMaxBehindTime{30};
  static constexpr uint64_t kMinBehindBytes = 1ull << 20;

  explicit BinlogLag(db::ConnectParams params) : params_(std::move(params)) {}

  struct Reading {
    std::chrono::milliseconds time{0};
    std::optional<uint64_t> bytes;  // when measured this time
    bool behind = false;            // past a bound: start again at the end
  };
  // After each event `reader` read.
  Reading after(const db::BinlogReader& reader);
  // The dump ended: the next one starts afresh.
  void reset();

 private:
  // Bytes from the reader's position to the server's end; nullopt when it cannot be asked.
  std::optional<uint64_t> measure(const db::BinlogReader& reader);

  db::ConnectParams params_;
  std::unique_ptr<db::Connection> side_;
  std::chrono::steady_clock::time_point lastMeasured_{};
  uint64_t bytes_ = 0;  // the last measure
};

}  // namespace outbox
