#include "relay/batch.h"

#include <spdlog/spdlog.h>

namespace outbox {

Batch prepareBatch(Scanner& scanner, OutboxStore& store, Publisher& publisher, SourceMetrics& metrics, int limit,
                   uint64_t assignedThrough, PublishedMark published) {
  Batch batch;
  auto t0 = std::chrono::steady_clock::now();
  auto scan = scanner.next(limit);
  if (!scan.isOk()) {
    scanner.invalidate();
    batch.status = scan.status();
    return batch;
  }
  batch.read = scan->newRead;
  for (auto& row : scan->rows) {
    if (auto reason = publisher.poisonReason(row)) {
      batch.poison.emplace(row.id, *reason);
      scanner.cutAt(*scan, row.id);
      break;
    }
  }
  auto t1 = std::chrono::steady_clock::now();
  scan->mark.published = published;
  if (!scan->rows.empty()) {
    batch.status = store.assign(scan->rows, assignedThrough, scan->mark);
    batch.marked = published;
  } else if (scan->mark.differsFrom(scanner.recorded())) {
    batch.status = store.saveScan(scan->mark);
    batch.marked = published;
  }
  if (!batch.status.isOk()) batch.marked = {};
  if (batch.status.isOk()) {
    scanner.committed(*scan);
    batch.rows = std::move(scan->rows);
  } else {
    scanner.invalidate();
  }
  batch.holesOpen = scanner.holeRanges() > 0 || !scanner.valid();
  batch.cursor = scanner.recorded().cursor;
  metrics.openHoles = scanner.openHoles();
  metrics.oldestOpenHoleMillis = static_cast<uint64_t>(scanner.oldestHoleAge().count());
  metrics.openHoleRanges = scanner.holeRanges();
  metrics.quietHoleRanges = scanner.quietRanges();
  metrics.holeReads = scanner.holeReads();
  auto t2 = std::chrono::steady_clock::now();
  auto ms = [](auto d) { return std::chrono::duration<double, std::milli>(d).count(); };
  spdlog::trace("batch: {} rows: scan {:.1f} ms, assign {:.1f} ms; {} open holes", batch.rows.size(), ms(t1 - t0),
                ms(t2 - t1), scanner.openHoles());
  return batch;
}

}  // namespace outbox
