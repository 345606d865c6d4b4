#include "snapshot/snapshot.h"

#include <fmt/format.h>

#include "db/connection.h"
#include "snapshot/checksum.h"

namespace outbox {

namespace {
constexpr size_t kChunkBytes = 64 * 1024;

// The document up to "records" (from its first byte to the key's closing quote), and after them.
void appendHead(std::string& out, const SnapshotHeader& s) {
  out += R"({"schemaVersion":1,"source":")";
  appendJsonEscaped(out, s.source);
  out += fmt::format(R"(","sourceEpoch":{},"watermark":{},"stream":{{"name":")", s.epoch, s.watermark);
  appendJsonEscaped(out, s.streamName);
  out += fmt::format(R"(","seq":{}}},"key":")", s.streamSeq);
  appendJsonEscaped(out, s.key);
  out.push_back('"');
}

void appendTail(std::string& out, const SnapshotHeader& s) {
  out += fmt::format(R"(,"recordCount":{},"checksum":"{}"}})", s.recordCount, formatChecksum(s.checksum));
}
}  // namespace

std::string summaryDocument(const SnapshotHeader& header) {
  std::string out;
  appendHead(out, header);
  appendTail(out, header);
  return out;
}

Result<SnapshotHeader> readSummary(const SourceConfig& source, const std::function<bool()>& going) {
  auto opened = SnapshotStream::open(source, true);
  if (!opened.isOk()) return opened.status();
  SnapshotStream& stream = **opened;
  // The summary's document is its header alone: what the read writes is dropped here and written
  // again from the header (summaryDocument) for each request it serves.
  OUTBOX_RETURN_IF_ERROR(stream.writeTo([&going](std::string_view) { return going(); }));
  return stream.header();
}

struct SnapshotStream::Impl {
  bool summaryOnly = false;
  db::ConnectParams params;
  uint64_t connectionId = 0;  // the server's id of `conn`, to kill it when given up
  std::unique_ptr<db::Connection> conn;
  db::Rows rows;
  std::vector<std::string> names;  // each column as "\"name\":", ready to write
  bool streaming = false;           // the query's rows are on their way
  bool readInFull = false;          // every row read: nothing left for the server to send
};

SnapshotStream::~SnapshotStream() {
  // A stream given up before its end (a client gone) is cut off the server rather than read to its
  // end: freeing a streamed result reads every row left. The server notices a closed connection
  // only when it next writes to it, and was seen to keep the query for seconds: it is killed too.
  if (!impl_ || !impl_->conn || !impl_->streaming || impl_->readInFull) return;
  impl_->conn->abandon();
  impl_->rows = db::Rows();
  impl_->conn.reset();
  if (impl_->connectionId == 0) return;
  db::ConnectParams params = impl_->params;
  params.connectTimeout = std::chrono::seconds(2);
  params.readTimeout = std::chrono::seconds(2);
  if (auto killer = db::Connection::open(params); killer.isOk()) {
    (void)(*killer)->exec(fmt::format("KILL {}", impl_->connectionId));  // gone already: an error
  }
}

Result<std::unique_ptr<SnapshotStream>> SnapshotStream::open(const SourceConfig& source, bool summaryOnly) {
  if (source.snapshotQuery.empty()) {
    return Status::permanent(fmt::format("source {} has no snapshot_query configured", source.name));
  }
  std::unique_ptr<SnapshotStream> stream(new SnapshotStream());
  stream->impl_ = std::make_unique<Impl>();
  Impl& d = *stream->impl_;
  d.summaryOnly = summaryOnly;
  d.params = db::paramsFrom(source.dsn);
  auto opened = db::Connection::open(d.params);
  if (!opened.isOk()) return opened.status();
  d.conn = std::move(opened).value();
  if (auto id = d.conn->queryU64("SELECT CONNECTION_ID()"); id.isOk() && *id) d.connectionId = **id;
  // Read only for the session, not only the transaction: a statement that commits implicitly
  // (DDL, TRUNCATE) ends a READ ONLY transaction and would then run; in a read-only session the
  // server refuses it too (error 1792). The connection is this stream's alone.
  OUTBOX_RETURN_IF_ERROR(d.conn->exec("SET SESSION TRANSACTION READ ONLY"));
  OUTBOX_RETURN_IF_ERROR(d.conn->exec("START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY"));
  {
    auto state = d.conn->query(fmt::format(
        "SELECT epoch, published_through, published_stream_seq FROM outbox_source_state WHERE source = {}",
        d.conn->quote(source.name)));
    if (!state.isOk()) return state.status();
    if (!state->next()) {
      return Status::permanent(fmt::format("source {} has no state row yet (run migrate)", source.name));
    }
    stream->header_.source = source.name;
    stream->header_.streamName = source.stream;
    stream->header_.epoch = state->u64("epoch");
    stream->header_.watermark = state->u64("published_through");
    stream->header_.streamSeq = state->u64("published_stream_seq");
  }
  auto rows = d.conn->query(source.snapshotQuery, db::Connection::Fetch::kStreamed);
  if (!rows.isOk()) {
    if (rows.status().isTransient()) return rows.status();
    return Status::permanent(fmt::format("snapshot_query of source {} failed", source.name));
  }
  d.rows = std::move(rows).value();
  d.streaming = true;
  const auto& columns = d.rows.columns();
  const std::string& key = stream->header_.key =
      source.snapshotKey.empty() && !columns.empty() ? columns.front().name : source.snapshotKey;
  bool keyFound = false;
  for (const auto& c : columns) {
    keyFound = keyFound || c.name == key;
    std::string n = "\"";
    appendJsonEscaped(n, c.name);
    d.names.push_back(n + "\":");
  }
  if (!keyFound) {
    return Status::permanent(fmt::format("snapshot_key '{}' of source {} is not a column of snapshot_query", key,
                                         source.name));
  }
  return stream;
}

Status SnapshotStream::writeTo(const SnapshotSink& sink) {
  Impl& d = *impl_;
  SnapshotHeader& s = header_;
  const auto& columns = d.rows.columns();
  std::string buffer;
  buffer.reserve(kChunkBytes + 4096);
  appendHead(buffer, s);
  if (!d.summaryOnly) buffer += ",\"records\":[";

  auto flush = [&]() {
    bool ok = sink(buffer);
    buffer.clear();
    return ok;
  };
  RecordHasher hasher;
  uint64_t sum = 0;
  s.recordCount = 0;
  while (d.rows.next()) {
    if (!d.summaryOnly) buffer += s.recordCount == 0 ? "{" : ",{";
    for (size_t i = 0; i < columns.size(); ++i) {
      auto value = d.rows.optText(i);
      if (value) {
        hasher.addValue(*value);
      } else {
        hasher.addNull();
      }
      if (d.summaryOnly) continue;
      if (i > 0) buffer.push_back(',');
      buffer += d.names[i];
      if (!value) {
        buffer += "null";
      } else if (columns[i].kind == db::ColumnKind::kNumber) {
        buffer += *value;
      } else {
        buffer.push_back('"');
        appendJsonEscaped(buffer, *value);
        buffer.push_back('"');
      }
    }
    if (!d.summaryOnly) buffer.push_back('}');
    sum += hasher.finish();
    ++s.recordCount;
    if (buffer.size() >= kChunkBytes && !flush()) return Status::transient("the client went away");
  }
  // A streamed result also ends on a read error: never present that as the whole set.
  if (d.conn->failed()) return d.conn->lastError("read snapshot rows");
  d.readInFull = true;
  s.checksum = sum;
  if (!d.summaryOnly) buffer.push_back(']');
  appendTail(buffer, s);
  if (!flush()) return Status::transient("the client went away");
  return Status::ok();
}

}  // namespace outbox
