#include "replica/mysql_inbox.h"

#include <algorithm>

#include <fmt/format.h>

#include "common/json.h"
#include "snapshot/checksum.h"

namespace outbox {

namespace {

// Bytes as an SQL hex literal: keys and records are bytes (a key need not be UTF-8).
std::string hexLiteral(std::string_view bytes) {
  std::string out = "X'";
  out.reserve(bytes.size() * 2 + 3);
  for (unsigned char c : bytes) out += fmt::format("{:02x}", c);
  return out + "'";
}

std::string hashText(uint64_t h) { return fmt::format("{:016x}", h); }

// {"columns":[...],"numeric":[...]}, as MysqlInbox (TypeScript) writes it with JSON.stringify.
std::string columnsJson(const InboxRow& row) {
  std::string out = "{\"columns\":[";
  for (size_t i = 0; i < row.columns.size(); ++i) out += (i ? "," : "") + jsonQuoted(row.columns[i]);
  out += "],\"numeric\":[";
  for (size_t i = 0; i < row.numeric.size(); ++i) {
    out += std::string(i ? "," : "") + (row.numeric[i] ? "true" : "false");
  }
  return out + "]}";
}

// A record's values as a JSON array of strings and nulls, in the row's column order: what the
// records table keeps (the row's columns_json says which are numbers).
std::string valuesJson(const RecordValues& values) {
  std::string out = "[";
  for (size_t i = 0; i < values.size(); ++i) {
    if (i > 0) out.push_back(',');
    if (!values[i]) {
      out += "null";
      continue;
    }
    out.push_back('"');
    appendJsonEscaped(out, *values[i]);
    out.push_back('"');
  }
  return out + "]";
}

// The elements of a JSON array of strings, booleans or nulls, each as parseRecord reads a value:
// strings unescaped, `true` as it is, null as nullopt.
Result<RecordValues> arrayElements(std::string_view array) {
  RecordValues out;
  size_t i = array.find('[');
  if (i == std::string_view::npos) return Status::permanent("not an array");
  while (++i < array.size()) {
    while (i < array.size() && (array[i] == ' ' || array[i] == ',')) ++i;
    if (i >= array.size() || array[i] == ']') return out;
    size_t end = i;
    if (array[i] == '"') {
      for (end = i + 1; end < array.size() && array[end] != '"'; ++end) {
        if (array[end] == '\\') ++end;
      }
      ++end;
    } else {
      while (end < array.size() && array[end] != ',' && array[end] != ']' && array[end] != ' ') ++end;
    }
    auto one = parseRecord(fmt::format("{{\"v\":{}}}", array.substr(i, end - i)));
    if (!one.isOk() || one->size() != 1) return Status::permanent("a malformed element");
    out.push_back((*one)[0].text);
    i = end - 1;
  }
  return Status::permanent("an array cut short");
}

}  // namespace

MysqlInbox::MysqlInbox(db::ConnectParams params, std::string source)
    : params_(std::move(params)), source_(std::move(source)) {}

Result<db::Connection*> MysqlInbox::connection() {
  if (!conn_) {
    auto opened = db::Connection::open(params_);
    if (!opened.isOk()) return Status::transient("the inbox's database: " + opened.status().message());
    conn_ = std::move(opened).value();
  }
  if (!tablesCreated_) {
    if (Status s = createTables(*conn_); !s.isOk()) {
      conn_.reset();
      return Status::transient("the inbox's tables: " + s.message());
    }
    tablesCreated_ = true;
  }
  return conn_.get();
}

template <typename T>
Result<T> MysqlInbox::dropOnFailure(Result<T> result) {
  if (!result.isOk() && conn_) {
    conn_->rollback();
    conn_.reset();
  }
  return result;
}

Status MysqlInbox::createTables(db::Connection& conn) {
  for (const char* sql : {
           "CREATE TABLE IF NOT EXISTS outbox_inbox (source VARCHAR(64) NOT NULL PRIMARY KEY, epoch BIGINT UNSIGNED "
           "NOT NULL, applied_version BIGINT UNSIGNED NOT NULL, stream_seq BIGINT UNSIGNED NOT NULL, stream_name "
           "VARCHAR(255) NOT NULL, record_key VARCHAR(255) NOT NULL, columns_json TEXT NOT NULL, checksum CHAR(16) "
           "NOT NULL, record_count BIGINT UNSIGNED NOT NULL, generation BIGINT UNSIGNED NOT NULL) ENGINE = InnoDB",
           "CREATE TABLE IF NOT EXISTS outbox_inbox_record (source VARCHAR(64) NOT NULL, entity_key VARBINARY(2048) "
           "NOT NULL, record_hash CHAR(16) NOT NULL, PRIMARY KEY (source, entity_key)) ENGINE = InnoDB",
           "CREATE TABLE IF NOT EXISTS outbox_replica_record (source VARCHAR(64) NOT NULL, entity_key "
           "VARBINARY(2048) NOT NULL, record_values LONGBLOB NOT NULL, PRIMARY KEY (source, entity_key)) ENGINE = "
           "InnoDB"}) {
    OUTBOX_RETURN_IF_ERROR(conn.exec(sql));
  }
  return Status::ok();
}

Result<std::optional<InboxRow>> MysqlInbox::load(ReplicaRecords& records) {
  auto conn = connection();
  if (!conn.isOk()) return conn.status();
  db::Connection& c = **conn;
  auto body = [&]() -> Result<std::optional<InboxRow>> {
    OUTBOX_RETURN_IF_ERROR(c.begin());  // the row and the records as of one moment
    auto rows = c.query(fmt::format("SELECT epoch, applied_version, stream_seq, stream_name, record_key, columns_json, "
                                    "checksum, record_count, generation FROM outbox_inbox WHERE source = {}",
                                    c.quote(source_)));
    if (!rows.isOk()) return rows.status();
    if (!rows->next()) {
      OUTBOX_RETURN_IF_ERROR(c.commit());
      return std::optional<InboxRow>();
    }
    InboxRow row{rows->u64("epoch"), rows->u64("applied_version"), std::string(rows->text("stream_name")),
                 rows->u64("stream_seq"), std::string(rows->text("record_key"))};
    auto fields = parseRecord(rows->text("columns_json"));
    auto sum = parseChecksum("sha256-sum64:" + std::string(rows->text("checksum")));
    row.recordCount = rows->u64("record_count");
    row.generation = rows->u64("generation");
    if (!fields.isOk() || fields->size() != 2 || !sum) return Status::permanent("outbox_inbox: a malformed row");
    auto columns = arrayElements((*fields)[0].text.value_or(""));
    auto numeric = arrayElements((*fields)[1].text.value_or(""));
    if (!columns.isOk() || !numeric.isOk() || columns->size() != numeric->size()) {
      return Status::permanent("outbox_inbox: malformed columns_json");
    }
    for (const auto& c : *columns) row.columns.push_back(c.value_or(""));
    for (const auto& n : *numeric) row.numeric.push_back(n == "true");
    row.sum = *sum;
    records.clear();
    auto stored = c.query(fmt::format("SELECT entity_key, record_values FROM outbox_replica_record WHERE source = {}",
                                      c.quote(source_)),
                          db::Connection::Fetch::kStreamed);
    if (!stored.isOk()) return stored.status();
    const size_t entityKey = stored->index("entity_key"), recordValues = stored->index("record_values");
    while (stored->next()) {
      auto values = arrayElements(stored->text(recordValues));
      if (!values.isOk() || values->size() != row.columns.size()) {
        return Status::permanent("outbox_replica_record: a record that is not its row's columns");
      }
      records[std::string(stored->text(entityKey))] = std::move(values).value();
    }
    if (c.failed()) return c.lastError("read outbox_replica_record");
    OUTBOX_RETURN_IF_ERROR(c.commit());
    return std::optional<InboxRow>(std::move(row));
  };
  return dropOnFailure(body());
}

Result<InboxRow> MysqlInbox::replace(const InboxRow& row, const ReplicaRecords& records) {
  auto conn = connection();
  if (!conn.isOk()) return conn.status();
  db::Connection& c = **conn;
  auto body = [&]() -> Result<InboxRow> {
    const std::string source = c.quote(source_);
    OUTBOX_RETURN_IF_ERROR(c.begin());
    OUTBOX_RETURN_IF_ERROR(c.exec("DELETE FROM outbox_inbox_record WHERE source = " + source));
    OUTBOX_RETURN_IF_ERROR(c.exec("DELETE FROM outbox_replica_record WHERE source = " + source));
    // Rows by the thousand: one statement a record would take minutes for a million.
    std::string hashes, values;
    size_t batched = 0;
    auto flush = [&]() -> Status {
      if (batched == 0) return Status::ok();
      OUTBOX_RETURN_IF_ERROR(
          c.exec("INSERT INTO outbox_inbox_record (source, entity_key, record_hash) VALUES " + hashes));
      OUTBOX_RETURN_IF_ERROR(
          c.exec("INSERT INTO outbox_replica_record (source, entity_key, record_values) VALUES " + values));
      hashes.clear();
      values.clear();
      batched = 0;
      return Status::ok();
    };
    for (const auto& [key, record] : records) {
      const char* comma = batched ? "," : "";
      hashes += fmt::format("{}({}, {}, '{}')", comma, source, hexLiteral(key), hashText(recordHash(record)));
      values += fmt::format("{}({}, {}, {})", comma, source, hexLiteral(key),
                            hexLiteral(valuesJson(record)));
      if (++batched == 1000) OUTBOX_RETURN_IF_ERROR(flush());
    }
    OUTBOX_RETURN_IF_ERROR(flush());
    OUTBOX_RETURN_IF_ERROR(c.exec(fmt::format(
        "INSERT INTO outbox_inbox (source, epoch, applied_version, stream_seq, stream_name, record_key, columns_json, "
        "checksum, record_count, generation) VALUES ({}, {}, {}, {}, {}, {}, {}, '{}', {}, 1) ON DUPLICATE KEY UPDATE "
        "epoch = VALUES(epoch), applied_version = VALUES(applied_version), stream_seq = VALUES(stream_seq), "
        "stream_name = VALUES(stream_name), record_key = VALUES(record_key), columns_json = VALUES(columns_json), "
        "checksum = VALUES(checksum), record_count = VALUES(record_count), generation = generation + 1",
        source, row.epoch, row.appliedVersion, row.streamSeq, c.quote(row.streamName), c.quote(row.key),
        c.quote(columnsJson(row)), hashText(row.sum), row.recordCount)));
    auto generation = c.queryU64("SELECT generation FROM outbox_inbox WHERE source = " + source);
    if (!generation.isOk()) return generation.status();
    OUTBOX_RETURN_IF_ERROR(c.commit());
    InboxRow stored = row;
    stored.generation = generation->value_or(0);
    return stored;
  };
  return dropOnFailure(body());
}

Result<bool> MysqlInbox::apply(const InboxRow& from, const InboxRow& to, const std::string& key,
                               const std::optional<RecordValues>& values) {
  auto conn = connection();
  if (!conn.isOk()) return conn.status();
  db::Connection& c = **conn;
  auto body = [&]() -> Result<bool> {
    const std::string source = c.quote(source_);
    const std::string entity = hexLiteral(key);
    OUTBOX_RETURN_IF_ERROR(c.begin());
    if (values) {
      OUTBOX_RETURN_IF_ERROR(c.exec(fmt::format(
          "INSERT INTO outbox_inbox_record (source, entity_key, record_hash) VALUES ({}, {}, '{}') ON DUPLICATE KEY "
          "UPDATE record_hash = VALUES(record_hash)",
          source, entity, hashText(recordHash(*values)))));
      OUTBOX_RETURN_IF_ERROR(c.exec(fmt::format(
          "INSERT INTO outbox_replica_record (source, entity_key, record_values) VALUES ({}, {}, {}) ON DUPLICATE KEY "
          "UPDATE record_values = VALUES(record_values)",
          source, entity, hexLiteral(valuesJson(*values)))));
    } else {
      for (const char* table : {"outbox_inbox_record", "outbox_replica_record"}) {
        OUTBOX_RETURN_IF_ERROR(
            c.exec(fmt::format("DELETE FROM {} WHERE source = {} AND entity_key = {}", table, source, entity)));
      }
    }
    // Last, and only from the row this consumer knows: when another moved it, all of this is
    // rolled back (its lock makes the two take turns).
    auto moved = c.execCount(fmt::format(
        "UPDATE outbox_inbox SET applied_version = {}, stream_seq = {}, checksum = '{}', record_count = {}, "
        "columns_json = {} WHERE source = {} AND epoch = {} AND applied_version = {} AND generation = {}",
        to.appliedVersion, to.streamSeq, hashText(to.sum), to.recordCount, c.quote(columnsJson(to)), source,
        from.epoch, from.appliedVersion, from.generation));
    if (!moved.isOk()) return moved.status();
    if (*moved != 1) {
      c.rollback();
      return false;
    }
    OUTBOX_RETURN_IF_ERROR(c.commit());
    return true;
  };
  return dropOnFailure(body());
}

}  // namespace outbox
