#include "relay/batch.h"

#include <spdlog/spdlog.h>

namespace outbox {

ScannedBatch readBatch(Scanner& scanner, Publisher& publisher, int limit) {
  ScannedBatch out;
  auto scan = scanner.next(limit);
  if (!scan.isOk()) {
    scanner.invalidate();
    out.status = scan.status();
    return out;
  }
  auto& rows = scan->rows;
  for (auto row = rows.begin(); row != rows.end();) {
    auto reason = publisher.poisonReason(*row);
    if (!reason) {
      ++row;
      continue;
    }
    if (scan->quarantineUnreadAbove && row->id > *scan->quarantineUnreadAbove) {
      // Read without the quarantine (above every id quarantined when the session began): an
      // operator may have quarantined it ahead of the scan since. Then it is passed over, as a
      // read with the quarantine would have, rather than halt the source or be quarantined again
      // (its operator's reason overwritten).
      auto quarantined = scanner.quarantined(row->id);
      if (!quarantined.isOk()) {
        scanner.invalidate();
        out.status = quarantined.status();
        return out;
      }
      if (*quarantined) {
        row = rows.erase(row);
        continue;
      }
    }
    out.poison.emplace(row->id, *reason);
    scanner.cutAt(*scan, row->id);
    break;
  }
  out.saveScan = scan->rows.empty() && scan->mark.differsFrom(scanner.recorded());
  scanner.committed(*scan);
  out.holesOpen = scanner.holeRanges() > 0;
  out.openHoles = scanner.openHoles();
  out.oldestHoleAge = scanner.oldestHoleAge();
  out.holeRanges = scanner.holeRanges();
  out.quietRanges = scanner.quietRanges();
  out.holeReads = scanner.holeReads();
  out.scan = std::move(*scan);
  return out;
}

Batch assignBatch(ScannedBatch scanned, OutboxStore& store, SourceMetrics& metrics, uint64_t assignedThrough,
                  PublishedMark published) {
  Batch batch;
  batch.status = scanned.status;
  if (!batch.status.isOk()) return batch;
  auto t0 = std::chrono::steady_clock::now();
  Scanner::Batch& scan = scanned.scan;
  batch.read = scan.newRead;
  batch.poison = std::move(scanned.poison);
  scan.mark.published = published;
  if (!scan.rows.empty()) {
    batch.status = store.assign(scan.rows, assignedThrough, scan.mark);
    batch.marked = published;
  } else if (scanned.saveScan) {
    batch.status = store.saveScan(scan.mark);
    batch.marked = published;
  }
  if (batch.status.isOk()) {
    batch.rows = std::move(scan.rows);
    batch.holesOpen = scanned.holesOpen;
    batch.cursor = scan.mark.cursor;
  } else {
    batch.marked = {};
    batch.holesOpen = true;  // the session ends, and the next one scans again
  }
  metrics.openHoles = scanned.openHoles;
  metrics.oldestOpenHoleMillis = static_cast<uint64_t>(scanned.oldestHoleAge.count());
  metrics.openHoleRanges = scanned.holeRanges;
  metrics.quietHoleRanges = scanned.quietRanges;
  metrics.holeReads = scanned.holeReads;
  auto ms = [](auto d) { return std::chrono::duration<double, std::milli>(d).count(); };
  spdlog::trace("batch: {} rows: assign {:.1f} ms; {} open holes", batch.rows.size(),
                ms(std::chrono::steady_clock::now() - t0), scanned.openHoles);
  return batch;
}

Batch prepareBatch(Scanner& scanner, OutboxStore& store, Publisher& publisher, SourceMetrics& metrics, int limit,
                   uint64_t assignedThrough, PublishedMark published) {
  Batch batch = assignBatch(readBatch(scanner, publisher, limit), store, metrics, assignedThrough, published);
  if (!batch.status.isOk()) scanner.invalidate();
  return batch;
}

}  // namespace outbox
