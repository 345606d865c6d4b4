// A consumer process for the tests: a Replica with the MySQL inbox, whose application keeps
// `accounts_replica` and counts each version it applies in `applied_versions` (one row per
// version), in the inbox's transaction. Configured by the environment:
//   CONSUMER_URL, CONSUMER_SOURCE, CONSUMER_DATABASE, OUTBOX_TEST_NATS_URL, OUTBOX_TEST_MYSQL_*.
// Prints the replica's lines, and its peak RSS after each verification and at exit.
import mysql from "mysql2/promise";

import { MysqlInbox, Replica, type InboxHandler } from "../src/index.js";
import { env, mysqlOptions } from "./support.js";

const database = env("CONSUMER_DATABASE");
const pool = mysql.createPool({ ...mysqlOptions(database), connectionLimit: 4 });
await pool.query(
  "CREATE TABLE IF NOT EXISTS accounts_replica (id BIGINT UNSIGNED PRIMARY KEY, display_name VARCHAR(191) NULL) " +
    "DEFAULT CHARSET=utf8mb4",
);
await pool.query(
  "CREATE TABLE IF NOT EXISTS applied_versions (version BIGINT UNSIGNED PRIMARY KEY, applied INT NOT NULL)",
);

const field = (columns: readonly string[], values: readonly (string | null)[], name: string) =>
  values[columns.indexOf(name)] ?? null;

const handler: InboxHandler = {
  async reset(conn) {
    await conn.query("DELETE FROM accounts_replica");
  },
  async load(conn, columns, records) {
    await conn.query("INSERT INTO accounts_replica (id, display_name) VALUES ?", [
      records.map((r) => [field(columns, r.values, "id"), field(columns, r.values, "displayName")]),
    ]);
  },
  async apply(conn, change) {
    if (change.op === "delete") {
      await conn.query("DELETE FROM accounts_replica WHERE id = ?", [change.key]);
    } else {
      const values = change.values as (string | null)[];
      await conn.query(
        "INSERT INTO accounts_replica (id, display_name) VALUES (?, ?) " +
          "ON DUPLICATE KEY UPDATE display_name = VALUES(display_name)",
        [field(change.columns, values, "id"), field(change.columns, values, "displayName")],
      );
    }
    await conn.query(
      "INSERT INTO applied_versions (version, applied) VALUES (?, 1) ON DUPLICATE KEY UPDATE applied = applied + 1",
      [change.version],
    );
  },
};

const inbox = new MysqlInbox({ pool, handler });
await inbox.createTables();

const rss = () => `peak RSS ${(process.resourceUsage().maxRSS / 1024).toFixed(1)} MiB`;
const print = (line: string) => process.stdout.write(`${new Date().toISOString().slice(0, 19)}Z ${line}\n`);
const replica = new Replica({
  url: env("CONSUMER_URL"),
  source: env("CONSUMER_SOURCE"),
  nats: { servers: env("OUTBOX_TEST_NATS_URL") },
  store: inbox,
  verifyIntervalMs: 100,
  report: (line) => {
    print(line);
    if (line.includes("] verified at version")) print(rss());
  },
});
const stop = new AbortController();
process.on("SIGTERM", () => stop.abort());
await replica.run(stop.signal);
await replica.close();
print(`stopped at version ${replica.appliedVersion}; ${rss()}`);
await pool.end();
