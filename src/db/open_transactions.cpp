#include "db/open_transactions.h"

#include <fmt/format.h>

namespace outbox::db {

namespace {

// Bytes of an xid as text: printable ASCII as is, anything else \xNN.
std::string printable(std::string_view bytes) {
  std::string out;
  for (unsigned char c : bytes) {
    if (c >= 0x20 && c < 0x7f && c != '\\' && c != '\'') {
      out += static_cast<char>(c);
    } else {
      out += fmt::format("\\x{:02x}", c);
    }
  }
  return out;
}

}  // namespace

std::string OpenTransactions::describe() const {
  std::string out;
  auto add = [&](const std::string& part) { out += (out.empty() ? "" : "; ") + part; };
  for (const auto& t : transactions) {
    if (t.connection == 0) {
      add(fmt::format("a transaction with no connection open {} s (an XA transaction left PREPARED?)", t.seconds));
    } else {
      add(fmt::format("connection {} ({}@{}, {}) in a transaction open {} s", t.connection, t.user, t.host, t.command,
                      t.seconds));
    }
  }
  for (const auto& xid : preparedXids) {
    add(fmt::format("XA transaction '{}' left PREPARED (XA COMMIT or XA ROLLBACK it)", xid));
  }
  return out;
}

Result<OpenTransactions> openTransactions(Connection& conn, std::chrono::seconds olderThan, size_t limit) {
  OpenTransactions out;
  auto rows = conn.query(fmt::format(
      "SELECT t.trx_mysql_thread_id AS connection, COALESCE(p.USER, '') AS user, COALESCE(p.HOST, '') AS host, "
      "COALESCE(p.COMMAND, '') AS command, GREATEST(TIMESTAMPDIFF(SECOND, t.trx_started, NOW()), 0) AS seconds "
      "FROM information_schema.INNODB_TRX t "
      "LEFT JOIN information_schema.PROCESSLIST p ON p.ID = t.trx_mysql_thread_id "
      "WHERE t.trx_started <= NOW() - INTERVAL {} SECOND AND t.trx_mysql_thread_id <> CONNECTION_ID() "
      "ORDER BY t.trx_started LIMIT {}",
      olderThan.count(), limit));
  if (!rows.isOk()) return rows.status();
  const size_t connection = rows->index("connection"), user = rows->index("user"), host = rows->index("host");
  const size_t command = rows->index("command"), seconds = rows->index("seconds");
  while (rows->next()) {
    out.transactions.push_back(OpenTransaction{rows->u64(connection), std::string(rows->text(user)),
                                               std::string(rows->text(host)), std::string(rows->text(command)),
                                               rows->u64(seconds)});
  }
  // formatID, gtrid_length, bqual_length, data (gtrid then bqual): MariaDB and MySQL name them alike.
  auto xids = conn.query("XA RECOVER");
  if (!xids.isOk()) return out;  // a privilege this account need not have: the list above says enough
  const size_t dataColumn = xids->index("data"), gtridLength = xids->index("gtrid_length");
  while (xids->next() && out.preparedXids.size() < limit) {
    const std::string_view data = xids->text(dataColumn);
    const size_t gtrid = std::min<size_t>(xids->u64(gtridLength), data.size());
    std::string xid = printable(data.substr(0, gtrid));
    if (data.size() > gtrid) xid += "', '" + printable(data.substr(gtrid));
    out.preparedXids.push_back(std::move(xid));
  }
  return out;
}

}  // namespace outbox::db
