// The inbox in MariaDB under READ COMMITTED, where a DELETE takes no gap locks: a bootstrap and
// another pod's apply of a key the bootstrap's snapshot no longer holds, run against each other on
// the stack's server.
import assert from "node:assert/strict";
import { test } from "node:test";

import type mysql from "mysql2/promise";

import { recordHash } from "../src/checksum.js";
import { MysqlInbox, type Bootstrap, type Change, type InboxHandler, type InboxRow } from "../src/index.js";
import { consumerDatabase } from "./support.js";

const columns = ["id", "name"];

function row(version: number, records: string[][]): InboxRow {
  return {
    epoch: 1,
    appliedVersion: version,
    streamName: "S",
    streamSeq: version,
    key: "id",
    columns,
    numeric: [false, false],
    sum: records.reduce((s, r) => (s + recordHash(r)) % (1n << 64n), 0n),
    recordCount: records.length,
    generation: 0,
  };
}

function change(version: number, key: string, values: string[] | null): Change {
  return {
    source: "s",
    epoch: 1,
    version,
    streamSeq: version,
    subject: "x",
    entityType: "t",
    key,
    op: values ? "upsert" : "delete",
    columns,
    values,
    payload: "",
    record: null,
    headers: new Map(),
  };
}

const handler: InboxHandler = {
  reset: async (c) => void (await c.query("DELETE FROM replica")),
  load: async (c, _columns, records) => void (await c.query("INSERT INTO replica VALUES ?", [records.map((r) => r.values)])),
  apply: async (c, ch) => {
    if (ch.values) await c.query("REPLACE INTO replica VALUES (?)", [ch.values]);
    else await c.query("DELETE FROM replica WHERE id = ?", [ch.key]);
  },
};

test("READ COMMITTED: another pod's apply during a bootstrap waits for it, then finds the row moved; no record the snapshot lacks is left", async () => {
  const consumer = await consumerDatabase();
  const pool: mysql.Pool = consumer.pool;
  pool.on("connection", (c) => void c.query("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED"));
  let b: Bootstrap | null = null;
  try {
    await pool.query("CREATE TABLE replica (id VARCHAR(10) PRIMARY KEY, name TEXT)");
    const inbox = new MysqlInbox({ pool, handler });
    await inbox.createTables();
    b = await inbox.beginBootstrap("s");
    await b.records(columns, [{ key: "1", values: ["1", "a"] }]);
    const podA = await b.commit(row(1, [["1", "a"]]));
    // Pod B bootstraps again from a snapshot read at version 3 (version 2 inserted key 5, version
    // 3 deleted it): records {1}. While it loads, pod A applies version 2 from the row it knows.
    b = await inbox.beginBootstrap("s");
    await b.records(columns, [{ key: "1", values: ["1", "a"] }]);
    const applying = inbox.applyBatch([change(2, "5", ["5", "x"])], podA);
    const early = await Promise.race([applying.then(() => "done"), new Promise((r) => setTimeout(() => r("waiting"), 1500))]);
    assert.equal(early, "waiting", "pod A's apply waits for the bootstrap's lock on the inbox row");
    const stored = await b.commit(row(3, [["1", "a"]]));
    assert.equal(await applying, null, "pod A's apply finds the row moved and changes nothing");
    const [app] = await pool.query<mysql.RowDataPacket[]>("SELECT id FROM replica ORDER BY id");
    const [hashes] = await pool.query<mysql.RowDataPacket[]>(
      "SELECT CAST(entity_key AS CHAR) AS k FROM outbox_inbox_record ORDER BY k",
    );
    assert.deepEqual(app.map((r) => r.id), ["1"], "the application's rows are the snapshot's");
    assert.deepEqual(hashes.map((r) => r.k), ["1"], "the hashes are the snapshot's");
    const loaded = (await inbox.load("s")) as InboxRow;
    assert.equal(loaded.appliedVersion, 3);
    assert.equal(loaded.recordCount, 1);
    assert.equal(loaded.generation, stored.generation);
  } finally {
    await b?.abort().catch(() => undefined); // its open transaction would hold the DROP back
    await pool.query(`DROP DATABASE IF EXISTS ${consumer.name}`).catch(() => undefined);
    await pool.end();
  }
});

test("lease: holders that differ only in case or a trailing space are different pods, in a table made before holder was VARBINARY too", async () => {
  const consumer = await consumerDatabase();
  try {
    // The table as createTables() made it before: VARCHAR, the default collation (case-insensitive).
    await consumer.pool.query(
      "CREATE TABLE old_lease (source VARCHAR(64) NOT NULL PRIMARY KEY, holder VARCHAR(255) NOT NULL, expires_at TIMESTAMP(6) NOT NULL)",
    );
    for (const leaseTable of ["old_lease", "outbox_inbox_lease"]) {
      const inbox = new MysqlInbox({ pool: consumer.pool, handler, leaseTable });
      await inbox.createTables();
      await checkHolders(inbox);
    }
  } finally {
    await consumer.pool.query(`DROP DATABASE IF EXISTS ${consumer.name}`).catch(() => undefined);
    await consumer.pool.end();
  }
});

async function checkHolders(inbox: MysqlInbox): Promise<void> {
    assert.equal(await inbox.lease("s", "POD-A", 60_000), true);
    assert.equal(await inbox.lease("s", "pod-a", 60_000), false, "another pod's lease, not this one's");
    assert.equal(await inbox.lease("s", "POD-A ", 60_000), false, "a trailing space too");
    await inbox.releaseLease("s", "pod-a");
    assert.equal(await inbox.lease("s", "POD-A", 60_000), true, "still the first pod's");
    assert.equal(await inbox.lease("s", "pod-a", 60_000), false, "not given up by the other");
}
