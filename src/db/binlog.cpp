#include "db/binlog.h"
#include "db/binlog_statement.h"

#include <algorithm>
#include <cctype>
#include <string_view>

#include <fmt/format.h>
#include <errmsg.h>
#include <mysql.h>
#include <mysqld_error.h>
#include <mariadb_rpl.h>

namespace outbox::db {

namespace {

// The account as the server matched it ('user'@'host'), for a GRANT to paste.
std::string accountOf(std::string_view currentUser) {
  auto at = currentUser.rfind('@');
  if (at == std::string_view::npos) return fmt::format("'{}'", currentUser);
  return fmt::format("'{}'@'{}'", currentUser.substr(0, at), currentUser.substr(at + 1));
}

std::string grantFor(const std::string& account) {
  return fmt::format("GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO {}", account);
}

// The first word(s) of a statement, upper-cased, at most `n` characters.
std::string headOf(std::string_view statement, size_t n) {
  size_t i = 0;
  while (i < statement.size() && std::isspace(static_cast<unsigned char>(statement[i]))) ++i;
  std::string out;
  for (; i < statement.size() && out.size() < n; ++i) {
    out += static_cast<char>(std::toupper(static_cast<unsigned char>(statement[i])));
  }
  return out;
}

template <typename T>
void addOnce(std::vector<T>& list, T value) {
  if (std::find(list.begin(), list.end(), value) == list.end()) list.push_back(std::move(value));
}

bool startsWith(const std::string& s, std::string_view prefix) {
  return s.compare(0, prefix.size(), prefix) == 0 &&
         (s.size() == prefix.size() || !std::isalnum(static_cast<unsigned char>(s[prefix.size()])));
}

}  // namespace

BinlogReader::~BinlogReader() {
  if (event_ != nullptr) mariadb_free_rpl_event(event_);
  if (rpl_ != nullptr) mariadb_rpl_close(rpl_);
}

Result<std::unique_ptr<BinlogReader>> BinlogReader::open(const ConnectParams& params, uint32_t serverId,
                                                         std::chrono::milliseconds heartbeat) {
  ConnectParams p = params;
  // Heartbeats keep a quiet dump's reads short of the timeout; a server that stops sending them
  // is gone.
  p.readTimeout = std::max(std::chrono::seconds(5),
                           std::chrono::duration_cast<std::chrono::seconds>(heartbeat * 4));
  p.maxAllowedPacket = kMaxEventBytes;
  auto conn = Connection::open(p);
  if (!conn.isOk()) return conn.status();
  std::unique_ptr<BinlogReader> reader(new BinlogReader(std::move(conn).value()));
  Connection& c = *reader->conn_;

  auto settings = c.query("SELECT @@global.log_bin AS log_bin, @@global.binlog_format AS binlog_format, "
                          "CURRENT_USER() AS account, @@server_id AS server_id, @@hostname AS hostname, "
                          "@@global.binlog_checksum AS binlog_checksum");
  if (!settings.isOk()) return settings.status();
  if (!settings->next()) return Status::transient("the server did not say whether it keeps a binary log");
  const std::string account = accountOf(settings->text("account"));
  reader->identity_ = fmt::format("server_id {}, hostname {}", settings->u64("server_id"), settings->text("hostname"));
  reader->checksum_ = settings->text("binlog_checksum") != "NONE";
  if (settings->u64("log_bin") == 0) {
    return Status::permanent("the server keeps no binary log (log_bin is OFF); start it with log_bin = ON (in any "
                             "binlog_format)");
  }
  reader->format_ = std::string(settings->text("binlog_format"));

  auto status = c.query("SHOW MASTER STATUS");
  if (!status.isOk()) {
    if (status.status().cause() == Cause::kAccessDenied) {
      return Status::permanent(fmt::format("{} may not read the binary log's position; run {}", account,
                                           grantFor(account)));
    }
    return status.status();
  }
  if (!status->next()) {
    return Status::permanent("the server shows no binary log position (SHOW MASTER STATUS is empty): is log_bin on?");
  }
  // The columns SHOW MASTER STATUS names alike on MariaDB and MySQL (MySQL 8.4 renamed the
  // statement SHOW BINARY LOG STATUS, which is not sent: README, "Supported databases"); the
  // filters only where the server shows them. A server that names them otherwise is refused, not
  // read by guess.
  if (!status->has("File") || !status->has("Position")) {
    return Status::permanent("the server's SHOW MASTER STATUS has no File and Position columns");
  }
  const std::string file(status->text("File"));
  const uint64_t position = status->u64("Position");
  reader->file_ = file;
  reader->position_ = position;
  auto names = [&](std::string_view column) {
    return status->has(column) ? std::string(status->optText(column).value_or("")) : std::string();
  };
  reader->doDb_ = names("Binlog_Do_DB");
  reader->ignoreDb_ = names("Binlog_Ignore_DB");

  // What a replica tells the server before a dump: it understands the log's checksums and
  // MariaDB's events (GTIDs, annotate), and wants a heartbeat when the log is quiet.
  const auto nanos = std::chrono::duration_cast<std::chrono::nanoseconds>(heartbeat).count();
  OUTBOX_RETURN_IF_ERROR(c.exec(fmt::format("SET @master_binlog_checksum = @@global.binlog_checksum, "
                                            "@mariadb_slave_capability = 4, @master_heartbeat_period = {}",
                                            nanos)));
  MYSQL* mysql = c.mysql_.get();
  reader->rpl_ = mariadb_rpl_init(mysql);
  if (reader->rpl_ == nullptr) return fromMysql(mysql, "start reading the binary log");
  mariadb_rpl_optionsv(reader->rpl_, MARIADB_RPL_FILENAME, file.c_str(), file.size());
  mariadb_rpl_optionsv(reader->rpl_, MARIADB_RPL_START, static_cast<unsigned long>(position));
  mariadb_rpl_optionsv(reader->rpl_, MARIADB_RPL_SERVER_ID, static_cast<unsigned int>(serverId));
  mariadb_rpl_optionsv(reader->rpl_, MARIADB_RPL_FLAGS, 0u);
  const std::string what = fmt::format("read the binary log from {}:{}", file, position);
  if (mariadb_rpl_open(reader->rpl_) != 0) return fromMysql(mysql, what);
  // The server answers a dump with its first events (a rotate to the file, its format), or an
  // error: a grant it lacks shows here, not at open.
  reader->event_ = mariadb_rpl_fetch(reader->rpl_, reader->event_);
  if (reader->event_ == nullptr) {
    if (mysql_errno(mysql) == ER_SPECIFIC_ACCESS_DENIED_ERROR || mysql_errno(mysql) == ER_ACCESS_DENIED_ERROR) {
      return Status::permanent(fmt::format("{} may not read the binary log; run {}", account, grantFor(account)));
    }
    return Status::transient(fromMysql(mysql, what).message());
  }
  return reader;
}

Result<BinlogCommit> BinlogReader::next() {
  MYSQL* mysql = conn_->mysql_.get();
  while (true) {
    event_ = mariadb_rpl_fetch(rpl_, event_);  // frees the event it is given when it fails
    if (event_ == nullptr) {
      // Whatever ended the dump (the connection killed, the server restarted, a log purged under
      // it, an event too large to read), a new dump from the end of the log is the way on.
      // Connector/C reports a packet over max_allowed_packet as 2013 (lost connection) from the
      // dump; its NET says which: error 1 when it would not grow the buffer, 2 when the socket
      // failed.
      tooLarge_ = mysql_errno(mysql) == CR_NET_PACKET_TOO_LARGE || mysql->net.error == 1;
      if (tooLarge_) {
        return Status::transient(fmt::format("an event of the binary log after {}:{} is larger than the {} MiB the "
                                             "doorbell reads (a large row or statement)",
                                             file_, position_, kMaxEventBytes >> 20));
      }
      Status s = fromMysql(mysql, "read the binary log");
      return Status::transient(s.message()).because(s.cause());
    }
    // The rotate a dump starts with (and one at each new file) says where it reads.
    if (event_->event_type == ROTATE_EVENT) {
      // Read from the event itself: Connector/C 3.3 cuts the name it parses (the first 8
      // characters, and a checksum's worth more of an artificial rotate). After the header (19
      // bytes) come the position (8) and the name, then the checksum when the log has one.
      constexpr size_t kHeader = 19, kPosition = 8;
      const size_t trailer = checksum_ ? 4 : 0;
      const size_t at = event_->raw_data_ofs + kHeader + kPosition;
      if (event_->event_length > kHeader + kPosition + trailer &&
          at + (event_->event_length - kHeader - kPosition - trailer) <= event_->raw_data_size) {
        file_.assign(reinterpret_cast<const char*>(event_->raw_data) + at,
                     event_->event_length - kHeader - kPosition - trailer);
      }
      position_ = event_->event.rotate.position;
    } else if (event_->next_event_pos != 0 && event_->event_type != HEARTBEAT_LOG_EVENT) {
      position_ = event_->next_event_pos;
    }
    // The format event a dump starts with carries its file's time, not an event's.
    if (event_->timestamp != 0 && event_->event_type != FORMAT_DESCRIPTION_EVENT) eventTime_ = event_->timestamp;
    switch (event_->event_type) {
      case HEARTBEAT_LOG_EVENT:
        eventTime_ = 0;
        return BinlogCommit{};
      case GTID_EVENT:  // MariaDB's: a group's start, BEGIN implied unless it stands alone (DDL)
        group_ = {};
        mapped_.clear();
        insertId_ = false;
        inGroup_ = (event_->event.gtid.flags & FL_STANDALONE) == 0;
        break;
      case TABLE_MAP_EVENT:
        mapped_[event_->event.table_map.table_id] =
            fmt::format("{}.{}",
                        std::string_view(event_->event.table_map.database.str, event_->event.table_map.database.length),
                        std::string_view(event_->event.table_map.table.str, event_->event.table_map.table.length));
        break;
      case WRITE_ROWS_EVENT_V1:
      case WRITE_ROWS_EVENT:
      case WRITE_ROWS_COMPRESSED_EVENT_V1:
      case WRITE_ROWS_COMPRESSED_EVENT:
      case UPDATE_ROWS_EVENT_V1:
      case UPDATE_ROWS_EVENT:
      case UPDATE_ROWS_COMPRESSED_EVENT_V1:
      case UPDATE_ROWS_COMPRESSED_EVENT:
      case PARTIAL_UPDATE_ROWS_EVENT: {
        // Rows written or changed: a table's new rows. (Deleted rows — prune — need no look.)
        auto map = mapped_.find(event_->event.rows.table_id);
        if (map == mapped_.end()) {
          group_.unknown = true;
        } else {
          addOnce(group_.tables, map->second);
        }
        break;
      }
      case XID_EVENT:  // a transactional group committed (reported even when it names nothing,
                       // so that the caller measures its lag and sees stop between commits)
        inGroup_ = false;
        mapped_.clear();
        return std::exchange(group_, {});
      case XA_PREPARE_LOG_EVENT:  // prepared, not committed: its XA COMMIT comes later, alone
        inGroup_ = false;
        group_ = {};
        break;
      case QUERY_EVENT: {
        const std::string head = headOf(std::string_view(event_->event.query.statement.str,
                                                         event_->event.query.statement.length),
                                        16);
        if (startsWith(head, "BEGIN") || startsWith(head, "XA START")) {
          group_ = {};
          mapped_.clear();
          inGroup_ = true;
          break;
        }
        if (startsWith(head, "XA END") || startsWith(head, "SAVEPOINT") || startsWith(head, "ROLLBACK TO")) break;
        if (startsWith(head, "ROLLBACK") || startsWith(head, "XA ROLLBACK")) {
          inGroup_ = false;
          group_ = {};
          break;
        }
        if (startsWith(head, "COMMIT")) {
          inGroup_ = false;
          return std::exchange(group_, {});
        }
        // An XA COMMIT, logged alone: what its transaction wrote came with its PREPARE.
        if (startsWith(head, "XA COMMIT")) {
          inGroup_ = false;
          group_ = {};
          group_.unknown = true;
          return std::exchange(group_, {});
        }
        // A statement logged as such (STATEMENT, or MIXED for most INSERTs), or DDL.
        noteStatement(std::string_view(event_->event.query.statement.str, event_->event.query.statement.length),
                      std::string_view(event_->event.query.database.str, event_->event.query.database.length));
        if (!inGroup_ && !group_.empty()) return std::exchange(group_, {});
        break;
      }
      case INTVAR_EVENT:  // before a statement logged as text: the values its auto-increments took
        // 2: INSERT_ID (1 is LAST_INSERT_ID, which a statement may read without inserting).
        if (event_->event.intvar.type == 2) insertId_ = true;
        break;
      case EXECUTE_LOAD_QUERY_EVENT:  // LOAD DATA logged as a statement, its file sent before it
        noteStatement(std::string_view(event_->event.execute_load_query.statement.str,
                                       event_->event.execute_load_query.statement.length),
                      std::string_view(event_->event.execute_load_query.schema.str,
                                       event_->event.execute_load_query.schema.length));
        if (!inGroup_ && !group_.empty()) return std::exchange(group_, {});
        break;
      case QUERY_COMPRESSED_EVENT:  // a statement (log_bin_compress): which, not worth unpacking
        group_.unknown = true;
        if (!inGroup_) return std::exchange(group_, {});
        break;
      default:
        break;
    }
  }
}

void BinlogReader::noteStatement(std::string_view statement, std::string_view database) {
  const LoggedStatement read = readLoggedStatement(statement, database, std::exchange(insertId_, false));
  switch (read.kind) {
    case LoggedStatement::Kind::kNewRows:
      addOnce(group_.tables, read.table);
      break;
    case LoggedStatement::Kind::kNoNewRows:
      break;
    case LoggedStatement::Kind::kSchema:
      if (database.empty()) {
        group_.unknown = true;
      } else {
        addOnce(group_.databases, std::string(database));
      }
      break;
    case LoggedStatement::Kind::kUnreadable:  // it may have added rows to any database's tables
      group_.unknown = true;
      break;
  }
}

bool binlogCarries(std::string_view doDb, std::string_view ignoreDb, std::string_view database) {
  auto named = [&](std::string_view list) {
    for (size_t at = 0; at <= list.size();) {
      const size_t comma = std::min(list.find(',', at), list.size());
      if (list.substr(at, comma - at) == database) return true;
      at = comma + 1;
    }
    return false;
  };
  return doDb.empty() ? !named(ignoreDb) : named(doDb);
}

bool BinlogReader::logs(const std::string& database) const { return binlogCarries(doDb_, ignoreDb_, database); }

}  // namespace outbox::db
