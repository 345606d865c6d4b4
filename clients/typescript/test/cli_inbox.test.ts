// The CLI's --inbox store (src/cli_inbox.ts) when the server closes its pooled connections (a
// restart of the inbox's MariaDB): --dump read through a connection mysql2 handed out again after
// it was lost, every time, and the last dump at exit was never written (the conformance suite's
// "inbox database restarted" scenario, seen once).
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";

import mysql from "mysql2/promise";

import { CliInbox } from "../src/cli_inbox.js";
import { dumpJson } from "../src/dump.js";
import { consumerDatabase, env, mysqlOptions, suffix, tmp } from "./support.js";

test("--dump reads through a new connection after the server closed the pooled ones", async () => {
  const db = await consumerDatabase();
  const dsn = `mysql://${env("OUTBOX_TEST_MYSQL_USER")}@${env("OUTBOX_TEST_MYSQL_HOST")}:${env(
    "OUTBOX_TEST_MYSQL_PORT",
  )}/${db.name}`;
  const inbox = await CliInbox.open(dsn, env("OUTBOX_TEST_MYSQL_PASSWORD"), "lost");
  const admin = await mysql.createConnection(mysqlOptions());
  try {
    await inbox.createTables();
    const file = join(tmp, `lost-${suffix()}.json`);
    await inbox.writeDump(file);
    assert.equal(readFileSync(file, "utf8"), dumpJson("lost", null, new Map()));
    for (let round = 0; round < 3; round++) {
      // Every connection of the inbox's database but the test's own pool's, closed by the server.
      const [ids] = await admin.query<mysql.RowDataPacket[]>(
        "SELECT ID FROM information_schema.PROCESSLIST WHERE DB = ? AND ID <> CONNECTION_ID()",
        [db.name],
      );
      assert.ok(ids.length > 0, "the inbox holds no connection: this test proves nothing");
      for (const { ID } of ids) await admin.query(`KILL CONNECTION ${Number(ID)}`).catch(() => undefined);
      await inbox.writeDump(file);
      assert.equal(readFileSync(file, "utf8"), dumpJson("lost", null, new Map()));
    }
  } finally {
    await inbox.close();
    await admin.query(`DROP DATABASE IF EXISTS ${db.name}`);
    await admin.end();
    await db.pool.end();
  }
});

// --dump with --inbox streams the records from the table in the byte order of their keys: the same
// text as dumpJson of the same records (keys whose UTF-8 byte order is not JavaScript's string
// order, NULLs, numbers, quotes), many records without holding them.
test("--dump streams the inbox's records as dumpJson writes them", async () => {
  const db = await consumerDatabase();
  const dsn = `mysql://${env("OUTBOX_TEST_MYSQL_USER")}@${env("OUTBOX_TEST_MYSQL_HOST")}:${env(
    "OUTBOX_TEST_MYSQL_PORT",
  )}/${db.name}`;
  const inbox = await CliInbox.open(dsn, env("OUTBOX_TEST_MYSQL_PASSWORD"), "streamed");
  try {
    await inbox.createTables();
    const records = new Map<string, (string | null)[]>();
    for (const key of ["z", "é", "\u{1F600}", "\uFFFD", "B", "a", "a b", "\"q\""]) {
      records.set(key, [key, key.length % 2 === 0 ? null : String(key.length), 'say "hi"\n']);
    }
    for (let i = 0; i < 5000; i++) records.set(`k${i}`, [`k${i}`, String(i), null]);
    const bootstrap = await inbox.store.beginBootstrap("streamed");
    const columns = ["id", "n", "note"];
    const all = [...records].map(([key, values]) => ({ key, values }));
    for (let i = 0; i < all.length; i += 1000) await bootstrap.records(columns, all.slice(i, i + 1000));
    const row = await bootstrap.commit({
      epoch: 3,
      appliedVersion: 41,
      streamName: "S",
      streamSeq: 77,
      key: "id",
      columns,
      numeric: [false, true, false],
      sum: 0xfedcba9876543210n,
      recordCount: records.size,
      generation: 0,
    });
    const file = join(tmp, `streamed-${suffix()}.json`);
    await inbox.writeDump(file);
    const text = readFileSync(file, "utf8");
    assert.equal(text, dumpJson("streamed", row, records));
    const parsed = JSON.parse(text);
    assert.equal(parsed.recordCount, records.size);
    assert.equal(parsed.records[0].id, '"q"'); // bytes: '"' < "B" < "a" < ... < "z" < "é" < U+FFFD < U+1F600
    assert.equal(parsed.records[1].id, "B");
    assert.equal(parsed.records.at(-1).id, "\u{1F600}");
  } finally {
    await inbox.close();
    const admin = await mysql.createConnection(mysqlOptions());
    await admin.query(`DROP DATABASE IF EXISTS ${db.name}`);
    await admin.end();
    await db.pool.end();
  }
});
