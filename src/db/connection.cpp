// db::Connection: one connection's setup (TLS, the session's settings) and its calls. The error
// numbers' meaning is in mysql_errors.cpp, result sets (db::Rows) in rows.cpp.
#include "db/connection.h"

#include <cstdlib>

#include <fmt/format.h>
#include <mysql.h>
#include <errmsg.h>
#include <mysqld_error.h>
#include <sys/socket.h>

#include "config/config.h"
#include "db/auth_guard.h"

namespace outbox::db {

void initLibrary() {
  mysql_library_init(0, nullptr, nullptr);
  registerAuthGuards();
}

ConnectParams paramsFrom(const Dsn& dsn) {
  ConnectParams p;
  p.host = dsn.host;
  p.port = dsn.port;
  p.user = dsn.user;
  p.password = dsn.password;
  p.database = dsn.database;
  p.socket = dsn.socket;
  p.sslMode = dsn.sslMode;
  p.sslCa = dsn.sslCa;
  p.sslCert = dsn.sslCert;
  p.sslKey = dsn.sslKey;
  return p;
}

void MysqlDeleter::operator()(MYSQL* mysql) const { mysql_close(mysql); }

void MysqlDeleter::operator()(MYSQL_RES* res) const { mysql_free_result(res); }

namespace {

// The TLS options of `p` on a handle not yet connected (ConnectParams, Dsn).
void setTls(MYSQL* mysql, const ConnectParams& p) {
  if (p.sslMode == SslMode::kDisabled) return;
  my_bool on = 1;
  mysql_options(mysql, MYSQL_OPT_SSL_ENFORCE, &on);  // TLS when the server offers it
  if (!p.sslCert.empty()) {
    mysql_options(mysql, MYSQL_OPT_SSL_CERT, p.sslCert.c_str());
    mysql_options(mysql, MYSQL_OPT_SSL_KEY, p.sslKey.c_str());
  }
  // With a CA the library checks the server's certificate chain against it (VERIFY_CA; with
  // REQUIRED too, as MySQL's clients do when given a CA).
  if (!p.sslCa.empty()) mysql_options(mysql, MYSQL_OPT_SSL_CA, p.sslCa.c_str());
  // ... and the host name (or IP address) in it, against the system's CAs when none is given.
  if (p.sslMode == SslMode::kVerifyIdentity) mysql_options(mysql, MYSQL_OPT_SSL_VERIFY_SERVER_CERT, &on);
}

// " (ssl-mode=..., ssl-ca=...)" for an error message: the settings that decided the connection.
std::string tlsSettings(const ConnectParams& p) {
  std::string out = fmt::format(" (ssl-mode={}", sslModeName(p.sslMode));
  if (!p.sslCa.empty()) out += ", ssl-ca=" + p.sslCa;
  if (!p.sslCert.empty()) out += ", ssl-cert=" + p.sslCert;
  return out + ")";
}

}  // namespace

Result<std::unique_ptr<Connection>> Connection::open(const ConnectParams& p) {
  mysql_thread_init();
  MYSQL* mysql = mysql_init(nullptr);
  if (mysql == nullptr) return Status::fatal("mysql_init: out of memory");
  std::unique_ptr<Connection> conn(new Connection(mysql));
  unsigned connectTimeout = static_cast<unsigned>(p.connectTimeout.count());
  unsigned readTimeout = static_cast<unsigned>(p.readTimeout.count());
  mysql_options(mysql, MYSQL_OPT_CONNECT_TIMEOUT, &connectTimeout);
  mysql_options(mysql, MYSQL_OPT_READ_TIMEOUT, &readTimeout);
  mysql_options(mysql, MYSQL_OPT_WRITE_TIMEOUT, &readTimeout);
  mysql_options(mysql, MYSQL_SET_CHARSET_NAME, "utf8mb4");
  unsigned protocol = p.socket.empty() ? MYSQL_PROTOCOL_TCP : MYSQL_PROTOCOL_SOCKET;
  mysql_options(mysql, MYSQL_OPT_PROTOCOL, &protocol);
  if (p.maxAllowedPacket != 0) {
    unsigned long packet = p.maxAllowedPacket;
    mysql_optionsv(mysql, MYSQL_OPT_MAX_ALLOWED_PACKET, &packet);
  }
  setTls(mysql, p);
  setAuthPolicy(mysql, p.sslMode);
  // No database: an account that may only read the binary log (a doorbell's) could use none.
  const char* database = p.database.empty() ? nullptr : p.database.c_str();
  if (mysql_real_connect(mysql, p.host.c_str(), p.user.c_str(), p.password.c_str(), database, p.port,
                         p.socket.empty() ? nullptr : p.socket.c_str(), CLIENT_FOUND_ROWS) == nullptr) {
    const std::string what = fmt::format("connect to {}:{}/{}{}", p.host, p.port, p.database, tlsSettings(p));
    Status s = fromMysql(mysql, what);
    std::string hint;
    if (mysql_errno(mysql) == ER_ACCESS_DENIED_ERROR && p.sslMode == SslMode::kDisabled) {
      hint = "; if the account requires TLS (REQUIRE SSL), set ssl-mode=REQUIRED or stronger in the DSN";
    } else if (mysql_errno(mysql) == CR_PLUGIN_NOT_ALLOWED) {
      // auth_guard.h; the library's own text names the plugin wrongly after a switch.
      s = fromMysql(CR_PLUGIN_NOT_ALLOWED,
                    "the server asked for an authentication plugin that sends the password as it is "
                    "(mysql_clear_password or dialog) over a connection without TLS: refused",
                    what);
      hint = "; such a login needs ssl-mode=REQUIRED or stronger";
    }
    // A refused login or an unknown database will not fix itself quickly, but the operator may
    // fix it while we wait: the caller retries with backoff either way.
    return Status::transient(s.message() + hint).because(s.cause());
  }
  // The guard (auth_guard.h) refused a server without TLS before the login; a second look after
  // it, should the library ever take another path.
  if (p.sslMode >= SslMode::kRequired && mysql_get_ssl_cipher(mysql) == nullptr) {
    return Status::transient(fmt::format("connect to {}:{}/{}{}: the server offers no TLS (its ssl_cert and ssl_key "
                                         "are not set)",
                                         p.host, p.port, p.database, tlsSettings(p)));
  }
  // The reads are the bridge's, not the server's defaults (docs/design.md, "Contract v2: finding
  // late commits"): a global READ-UNCOMMITTED must not let a scan or a snapshot see a row that is then rolled back.
  // Statements that need another level set it for their own transaction.
  OUTBOX_RETURN_IF_ERROR(conn->exec("SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ"));
  // And autocommit on, whatever the server's default: a statement outside START TRANSACTION is
  // its own transaction (a global autocommit = 0 would leave every such write uncommitted).
  OUTBOX_RETURN_IF_ERROR(conn->exec("SET SESSION autocommit = 1"));
  conn->database_ = p.database;
  return conn;
}

Status Connection::setAutocommit(bool on) {
  if (on == autocommit_) return Status::ok();
  // Turned on, it would commit a transaction left open: only a caller's bug gets here so.
  if (on && inTransaction()) return Status::permanent("internal error: autocommit turned on inside a transaction");
  OUTBOX_RETURN_IF_ERROR(exec(on ? "SET SESSION autocommit = 1" : "SET SESSION autocommit = 0"));
  autocommit_ = on;
  return Status::ok();
}

Status Connection::useDatabase(const std::string& database) {
  if (database == database_) return Status::ok();
  if (mysql_select_db(mysql_.get(), database.c_str()) != 0) return fromMysql(mysql_.get(), "use database " + database);
  database_ = database;
  return Status::ok();
}

bool Connection::inTransaction() const {
  unsigned status = 0;
  if (mariadb_get_infov(mysql_.get(), MARIADB_CONNECTION_SERVER_STATUS, &status) != 0) return true;
  return (status & SERVER_STATUS_IN_TRANS) != 0;
}

Status Connection::lastError(std::string_view what) { return fromMysql(mysql_.get(), what); }

bool Connection::failed() const { return mysql_errno(mysql_.get()) != 0; }

void Connection::abandon() {
  my_socket fd = mysql_get_socket(mysql_.get());
  if (fd != MARIADB_INVALID_SOCKET) ::shutdown(fd, SHUT_RDWR);
}

Status Connection::exec(std::string_view sql) {
  if (mysql_real_query(mysql_.get(), sql.data(), sql.size()) != 0) return fromMysql(mysql_.get(), "query");
  // Statements that return rows by surprise: drain them so the connection stays usable.
  if (MYSQL_RES* res = mysql_store_result(mysql_.get())) mysql_free_result(res);
  return Status::ok();
}

Result<uint64_t> Connection::execCount(std::string_view sql) {
  if (mysql_real_query(mysql_.get(), sql.data(), sql.size()) != 0) return fromMysql(mysql_.get(), "query");
  return static_cast<uint64_t>(mysql_affected_rows(mysql_.get()));
}

Connection::Counts Connection::execCounts(std::string_view sql) {
  Counts out;
  // OUTBOX_TEST_SINGLE_STATEMENTS (tests only): never ask for several statements in one, so the
  // server refuses them, as a proxy set to (ProxySQL can be) would.
  static const bool single = std::getenv("OUTBOX_TEST_SINGLE_STATEMENTS") != nullptr;
  if (!multiStatements_ && !single) {
    if (mysql_set_server_option(mysql_.get(), MYSQL_OPTION_MULTI_STATEMENTS_ON) != 0) {
      out.status = fromMysql(mysql_.get(), "enable multi-statements");
      return out;
    }
    multiStatements_ = true;
  }
  if (mysql_real_query(mysql_.get(), sql.data(), sql.size()) != 0) {
    out.status = fromMysql(mysql_.get(), "query");
    return out;
  }
  // Every result is read, whatever it holds, so the connection stays usable; the server stops at
  // the first statement that fails, and mysql_next_result reports it.
  for (;;) {
    if (MYSQL_RES* res = mysql_store_result(mysql_.get())) {
      mysql_free_result(res);
      if (out.status.isOk()) out.status = Status::permanent("a statement of execCounts returned rows");
      out.matched.push_back(0);
    } else {
      out.matched.push_back(static_cast<uint64_t>(mysql_affected_rows(mysql_.get())));
    }
    const int next = mysql_next_result(mysql_.get());
    if (next == -1) return out;
    if (next > 0) {
      out.status = fromMysql(mysql_.get(), fmt::format("statement {} of the query", out.matched.size() + 1));
      return out;
    }
  }
}

Result<Rows> Connection::query(std::string_view sql, Fetch fetch) {
  if (mysql_real_query(mysql_.get(), sql.data(), sql.size()) != 0) return fromMysql(mysql_.get(), "query");
  MYSQL_RES* res = fetch == Fetch::kStreamed ? mysql_use_result(mysql_.get()) : mysql_store_result(mysql_.get());
  if (res == nullptr) {
    if (mysql_errno(mysql_.get()) != 0) return fromMysql(mysql_.get(), "read result");
    return Status::permanent("query returned no result set");
  }
  return Rows(res);
}

Result<std::optional<uint64_t>> Connection::queryU64(std::string_view sql) {
  auto rows = query(sql);
  if (!rows.isOk()) return rows.status();
  // By position, as its contract says: the first column, whatever the caller named it.
  if (!rows->next() || rows->isNull(0)) return std::optional<uint64_t>();
  return std::optional<uint64_t>(rows->u64(0));
}

void Connection::rollback() { mysql_real_query(mysql_.get(), "ROLLBACK", 8); }

std::string Connection::quote(std::string_view text) {
  std::string out(text.size() * 2 + 3, '\0');
  out[0] = '\'';
  unsigned long n = mysql_real_escape_string(mysql_.get(), out.data() + 1, text.data(), text.size());
  out.resize(n + 1);
  out.push_back('\'');
  return out;
}

}  // namespace outbox::db
