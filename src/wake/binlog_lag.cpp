#include "wake/binlog_lag.h"

#include <spdlog/spdlog.h>

namespace outbox {

BinlogLag::Reading BinlogLag::after(const db::BinlogReader& reader) {
  Reading r;
  if (reader.eventTime() == 0) {  // a heartbeat: at the end
    reset();
    return r;
  }
  const auto now = std::chrono::system_clock::now();
  const auto written = std::chrono::system_clock::time_point(std::chrono::seconds(reader.eventTime()));
  r.time = std::max(std::chrono::milliseconds(0), std::chrono::duration_cast<std::chrono::milliseconds>(now - written));
  const auto steady = std::chrono::steady_clock::now();
  if (steady - lastMeasured_ >= kMeasureEvery) {
    lastMeasured_ = steady;
    if (auto bytes = measure(reader)) {
      bytes_ = *bytes;
      r.bytes = bytes;
    }
  }
  r.behind = bytes_ > kMaxBehindBytes || (r.time > kMaxBehindTime && bytes_ >= kMinBehindBytes);
  return r;
}

void BinlogLag::reset() {
  side_.reset();
  lastMeasured_ = {};
  bytes_ = 0;
}

std::optional<uint64_t> BinlogLag::measure(const db::BinlogReader& reader) {
  if (!side_) {
    db::ConnectParams p = params_;
    p.readTimeout = std::chrono::seconds(5);
    auto conn = db::Connection::open(p);
    if (!conn.isOk()) {
      spdlog::debug("binlog doorbell: cannot measure its lag: {}", conn.status().message());
      return std::nullopt;
    }
    side_ = std::move(conn).value();
  }
  auto logs = side_->query("SHOW BINARY LOGS");
  if (!logs.isOk()) {
    spdlog::debug("binlog doorbell: cannot measure its lag: {}", logs.status().message());
    side_.reset();
    return std::nullopt;
  }
  // The files from the dump's on, in order: what is left of its own, and every later one (the
  // columns MariaDB and MySQL name alike; a server that names them otherwise is not measured).
  if (!logs->has("Log_name") || !logs->has("File_size")) {
    spdlog::debug("binlog doorbell: cannot measure its lag: SHOW BINARY LOGS has no Log_name and File_size");
    return std::nullopt;
  }
  bool reached = false;
  uint64_t behind = 0;
  const size_t logName = logs->index("Log_name"), fileSize = logs->index("File_size");
  while (logs->next()) {
    const uint64_t size = logs->u64(fileSize);
    if (!reached && logs->text(logName) == reader.file()) {
      reached = true;
      behind += size > reader.position() ? size - reader.position() : 0;
    } else if (reached) {
      behind += size;
    }
  }
  // Its file purged under it: as far behind as it gets.
  return reached ? behind : UINT64_MAX;
}

}  // namespace outbox
