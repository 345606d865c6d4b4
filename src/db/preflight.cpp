#include "db/preflight.h"

#include <fmt/format.h>

namespace outbox::db {

namespace {

// 'user'@'host' of CURRENT_USER(), as a GRANT names it.
std::string grantee(Connection& conn) {
  auto rows = conn.query("SELECT CURRENT_USER() AS account");
  if (!rows.isOk() || !rows->next()) return "'USER'@'HOST'";
  std::string user(rows->text("account"));
  auto at = user.rfind('@');
  if (at == std::string::npos) return conn.quote(user);
  return conn.quote(user.substr(0, at)) + "@" + conn.quote(user.substr(at + 1));
}

}  // namespace

Status checkServer(Connection& conn, std::vector<std::string>& notes) {
  // Without PROCESS, PROCESSLIST quietly shows only this user's connections; INNODB_TRX refuses
  // outright, so it tells whether the privilege is there.
  auto trx = conn.query("SELECT COUNT(*) FROM information_schema.INNODB_TRX");
  if (!trx.isOk()) {
    if (trx.status().cause() == Cause::kAccessDenied) {
      return Status::permanent(fmt::format(
          "the database user lacks the PROCESS privilege, which the bridge needs to see every connection in "
          "information_schema.PROCESSLIST (which open transactions may still commit an outbox row; README, "
          "\"Which server a source reads\"); run: GRANT PROCESS ON *.* TO {};",
          grantee(conn)));
    }
    return trx.status();
  }
  auto server = conn.query("SELECT @@read_only AS read_only, @@global.wsrep_on AS wsrep_on");
  if (!server.isOk()) {
    // MySQL has no wsrep_on.
    server = conn.query("SELECT @@read_only AS read_only, 0 AS wsrep_on");
    if (!server.isOk()) return server.status();
  }
  if (!server->next()) return Status::transient("SELECT @@read_only returned no row");
  if (server->u64("read_only") != 0) {
    return Status::permanent(
        "the server has read_only on: it is a replica. The bridge must read the primary, where the producers' "
        "transactions run: on a replica a row still being committed on the primary could be taken for a "
        "rolled-back one and lost (README, \"Which server a source reads\"). Point the source's dsn at the "
        "primary");
  }
  if (server->u64("wsrep_on") != 0) {
    notes.push_back(
        "this server is a Galera node (wsrep_on): every producer of this source must write through this node, or a "
        "row committed on another node could be lost (README, \"Which server a source reads\")");
  }
  // A replication applier with work left may hold any open hole (docs/design.md, "Contract v2: finding late
  // commits"): the scan asks each time a hole could die, from the replication status when the account may
  // read it.
  auto replication = conn.query("SHOW ALL SLAVES STATUS");
  if (!replication.isOk() && replication.status().cause() == Cause::kServer) {
    replication = conn.query("SHOW REPLICA STATUS");  // MySQL: the MariaDB statement is a syntax error
  }
  if (!replication.isOk() && replication.status().cause() == Cause::kAccessDenied) {
    notes.push_back(fmt::format(
        "the database user cannot read the replication status (SHOW ALL SLAVES STATUS): if this server is a promoted "
        "replica whose applier is stopped with transactions left in its relay log, the bridge cannot see them, and "
        "an outbox row they hold could be lost (README, \"Which server a source reads\"); a running applier is "
        "still seen. Run: GRANT SLAVE MONITOR ON *.* TO {}; (MySQL: GRANT REPLICATION CLIENT)",
        grantee(conn)));
  }
  // MariaDB: without metadata_lock_info an open hole stays open while any statement runs on the
  // server, one that cannot write the outbox table too (docs/design.md, "Holes that cannot be proven
  // closed").
  auto version = conn.query(
      "SELECT VERSION() LIKE '%MariaDB%' AS mariadb, (SELECT COUNT(*) FROM information_schema.PLUGINS WHERE "
      "PLUGIN_NAME = 'METADATA_LOCK_INFO' AND PLUGIN_STATUS = 'ACTIVE') AS lock_info");
  if (version.isOk() && version->next() && version->u64("mariadb") != 0 && version->u64("lock_info") == 0) {
    notes.push_back(
        "the server does not show metadata locks (the metadata_lock_info plugin is not loaded): an open hole then "
        "stays open while any client statement runs, one that cannot write the outbox table too (a report, a dump, "
        "a SELECT SLEEP), and each poll reads every hole found meanwhile (README, \"Which server a source "
        "reads\"). Load it: INSTALL SONAME 'metadata_lock_info'; (or plugin_load_add = metadata_lock_info in the "
        "server's config)");
  }
  auto appliers = conn.query(
      "SELECT COUNT(*) AS appliers FROM information_schema.PROCESSLIST WHERE COMMAND IN ('Slave_SQL', 'Slave_worker')");
  if (appliers.isOk() && appliers->next() && appliers->u64("appliers") > 0) {
    notes.push_back(
        "this server also applies replicated writes (replica threads are running): while its applier has work left "
        "no open hole is given up (its rows carry ids another server handed out), and every producer of this source "
        "must still write through this server (README, \"Which server a source reads\")");
  }
  return Status::ok();
}

}  // namespace outbox::db
