#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <memory>
#include <string_view>

#include "common/json.h"
#include "common/status.h"
#include "config/config.h"
#include "snapshot/document.h"

namespace outbox {

// Receives the document piece by piece; returns false when the client has gone away.
using SnapshotSink = std::function<bool(std::string_view)>;

// The snapshot document (docs/design.md, "The snapshot"; README, "Snapshots and replicas") for one
// source: one consistent read (START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY, in a READ
// ONLY session, so the server refuses a write, DDL included, whatever the config check missed) of
// outbox_source_state and the
// source's snapshot_query, rows streamed from the server and the document written in pieces of
// about 64 KiB, so memory stays bounded whatever the size. `summaryOnly` leaves out "records"
// but reads and hashes every row the same way.
//
// open() does everything that can fail cleanly (connect, read the state, start the query), so a
// server can still answer with an error status; writeTo() then streams, and a failure there cuts
// the document short, which a consumer sees as invalid. Each stream owns its connection; use one
// per thread. Destroying a stream whose rows were not all read cuts its connection off the server
// (the server ends the query and its transaction) instead of reading the rest: it does not block.
class SnapshotStream {
 public:
  static Result<std::unique_ptr<SnapshotStream>> open(const SourceConfig& source, bool summaryOnly);
  ~SnapshotStream();
  Status writeTo(const SnapshotSink& sink);
  // The header written (recordCount and checksum once writeTo() is done), for logs and metrics.
  const SnapshotHeader& header() const { return header_; }

 private:
  SnapshotStream() = default;
  struct Impl;
  std::unique_ptr<Impl> impl_;
  SnapshotHeader header_;
};

// A summary (?summary=true) as one read of the whole table, without a document: its header, the
// count and checksum included. `going` is asked between pieces; false gives the read up.
Result<SnapshotHeader> readSummary(const SourceConfig& source, const std::function<bool()>& going);

// The summary document of `header`: byte for byte what a summary's stream writes.
std::string summaryDocument(const SnapshotHeader& header);

}  // namespace outbox
