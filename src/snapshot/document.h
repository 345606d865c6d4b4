#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace outbox {

// What a snapshot document (docs/consumers.md, "2. Bootstrap: the snapshot") says about itself: all
// of it but the records. SnapshotStream writes it; parseSnapshot reads it back.
struct SnapshotHeader {
  std::string source;
  uint64_t epoch = 0;      // "sourceEpoch"
  uint64_t watermark = 0;
  std::string streamName;  // "stream": {"name", "seq"}
  uint64_t streamSeq = 0;
  std::string key;
  uint64_t recordCount = 0;
  uint64_t checksum = 0;
};

// One record: its values in column order (nullopt for NULL), as text — MySQL's text form, which
// is what the checksum hashes.
using RecordValues = std::vector<std::optional<std::string>>;

// A field of a JSON object in a record's terms: its value in MySQL's text form (numbers by their
// literal, strings unescaped, objects and arrays as their JSON, null as nullopt).
struct RecordField {
  std::string name;
  std::optional<std::string> text;
  bool numeric = false;  // written as a JSON number
};

// The fields of one JSON object, in order: how a message's payload is read as a record. Not an
// object, or malformed: a permanent error.
Result<std::vector<RecordField>> parseRecord(std::string_view json);

// A snapshot document, parsed and checked.
struct ParsedSnapshot : SnapshotHeader {
  std::vector<std::string> columns;  // from the first record; empty when there is none
  std::vector<bool> numeric;         // per column: written as a JSON number
  std::vector<RecordValues> records;
};

// Parses a snapshot (or, with no "records", a summary). A document cut short, malformed, or
// whose records do not match its recordCount or checksum is a permanent error saying which.
Result<ParsedSnapshot> parseSnapshot(std::string_view json, bool expectRecords);

}  // namespace outbox
