// The CLI's --inbox store (src/cli_inbox.ts) when the server closes its pooled connections (a
// restart of the inbox's MariaDB): --dump read through a connection mysql2 handed out again after
// it was lost, every time, and the last dump at exit was never written (the conformance suite's
// "inbox database restarted" scenario, seen once).
import assert from "node:assert/strict";
import { test } from "node:test";

import mysql from "mysql2/promise";

import { CliInbox } from "../src/cli_inbox.js";
import { consumerDatabase, env, mysqlOptions } from "./support.js";

test("--dump reads through a new connection after the server closed the pooled ones", async () => {
  const db = await consumerDatabase();
  const dsn = `mysql://${env("OUTBOX_TEST_MYSQL_USER")}@${env("OUTBOX_TEST_MYSQL_HOST")}:${env(
    "OUTBOX_TEST_MYSQL_PORT",
  )}/${db.name}`;
  const inbox = await CliInbox.open(dsn, env("OUTBOX_TEST_MYSQL_PASSWORD"), "lost");
  const admin = await mysql.createConnection(mysqlOptions());
  try {
    await inbox.createTables();
    assert.equal((await inbox.read()).row, null);
    for (let round = 0; round < 3; round++) {
      // Every connection of the inbox's database but the test's own pool's, closed by the server.
      const [ids] = await admin.query<mysql.RowDataPacket[]>(
        "SELECT ID FROM information_schema.PROCESSLIST WHERE DB = ? AND ID <> CONNECTION_ID()",
        [db.name],
      );
      assert.ok(ids.length > 0, "the inbox holds no connection: this test proves nothing");
      for (const { ID } of ids) await admin.query(`KILL CONNECTION ${Number(ID)}`).catch(() => undefined);
      const read = await inbox.read();
      assert.equal(read.row, null);
      assert.equal(read.records.size, 0);
    }
  } finally {
    await inbox.close();
    await admin.query(`DROP DATABASE IF EXISTS ${db.name}`);
    await admin.end();
    await db.pool.end();
  }
});
