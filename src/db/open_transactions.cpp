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
  for (const auto& xid : preparedXids) add(fmt::format("XA transaction '{}' left PREPARED (XA COMMIT or XA ROLLBACK it)", xid));
  return out;
}

Result<OpenTransactions> openTransactions(Connection& conn, std::chrono::seconds olderThan, size_t limit) {
  OpenTransactions out;
  auto rows = conn.query(fmt::format(
      "SELECT t.trx_mysql_thread_id, COALESCE(p.USER, ''), COALESCE(p.HOST, ''), COALESCE(p.COMMAND, ''), "
      "GREATEST(TIMESTAMPDIFF(SECOND, t.trx_started, NOW()), 0) FROM information_schema.INNODB_TRX t "
      "LEFT JOIN information_schema.PROCESSLIST p ON p.ID = t.trx_mysql_thread_id "
      "WHERE t.trx_started <= NOW() - INTERVAL {} SECOND AND t.trx_mysql_thread_id <> CONNECTION_ID() "
      "ORDER BY t.trx_started LIMIT {}",
      olderThan.count(), limit));
  if (!rows.isOk()) return rows.status();
  while (rows->next()) {
    out.transactions.push_back(OpenTransaction{rows->u64(0), std::string(rows->text(1)), std::string(rows->text(2)),
                                               std::string(rows->text(3)), rows->u64(4)});
  }
  // formatID, gtrid_length, bqual_length, data (gtrid then bqual).
  auto xids = conn.query("XA RECOVER");
  if (!xids.isOk()) return out;  // a privilege this account need not have: the list above says enough
  while (xids->next() && out.preparedXids.size() < limit) {
    const std::string_view data = xids->text(3);
    const size_t gtrid = std::min<size_t>(xids->u64(1), data.size());
    std::string xid = printable(data.substr(0, gtrid));
    if (data.size() > gtrid) xid += "', '" + printable(data.substr(gtrid));
    out.preparedXids.push_back(std::move(xid));
  }
  return out;
}

}  // namespace outbox::db
