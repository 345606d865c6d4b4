// Batches and several pods, against the real bridge, MariaDB and nats-server: batchVersions
// applies up to N waiting versions in one transaction with one conditional UPDATE of the inbox row
// (counted by a trigger on it); two replicas on one inbox apply each version once, and the work of
// all but one is rolled back.
import assert from "node:assert/strict";
import { test } from "node:test";

import type mysql from "mysql2/promise";

import { MemoryStore, MysqlInbox, Replica, type Change, type InboxHandler, type InboxRow } from "../src/index.js";
import { AccountsSource, consumerDatabase, env, until } from "./support.js";

/** A handler keeping `replica` and counting each version it commits in `applied` (rolled back with it). */
function handler(calls: number[]): InboxHandler {
  const write = async (conn: mysql.PoolConnection, changes: readonly Change[]) => {
    calls.push(changes.length);
    for (const c of changes) {
      if (c.values) await conn.query("REPLACE INTO replica VALUES (?)", [c.values]);
      else await conn.query("DELETE FROM replica WHERE id = ?", [c.key]);
    }
    await conn.query(
      "INSERT INTO applied (version, times) VALUES ? ON DUPLICATE KEY UPDATE times = times + 1",
      [changes.map((c) => [c.version, 1])],
    );
  };
  return {
    reset: async (conn) => void (await conn.query("DELETE FROM replica")),
    load: async (conn, _columns, records) => void (await conn.query("INSERT INTO replica VALUES ?", [records.map((r) => r.values)])),
    apply: (conn, change) => write(conn, [change]),
    applyBatch: (conn, changes) => write(conn, changes),
  };
}

async function setUp(pool: mysql.Pool, calls: number[]): Promise<MysqlInbox> {
  await pool.query("CREATE TABLE replica (id BIGINT PRIMARY KEY, name TEXT)");
  await pool.query("CREATE TABLE applied (version BIGINT PRIMARY KEY, times INT NOT NULL)");
  await pool.query("CREATE TABLE inbox_updates (n BIGINT AUTO_INCREMENT PRIMARY KEY, version BIGINT)");
  const inbox = new MysqlInbox({ pool, handler: handler(calls) });
  await inbox.createTables();
  await pool.query(
    "CREATE TRIGGER inbox_updated AFTER UPDATE ON outbox_inbox FOR EACH ROW INSERT INTO inbox_updates (version) VALUES (NEW.applied_version)",
  );
  return inbox;
}

async function check(pool: mysql.Pool, source: AccountsSource, from: number, final: number): Promise<void> {
  const [applied] = await pool.query<mysql.RowDataPacket[]>("SELECT version, times FROM applied ORDER BY version");
  assert.equal(applied.length, final - from, "every version applied");
  for (const r of applied) assert.equal(Number(r.times), 1, `version ${r.version} applied ${r.times} times`);
  const [rows] = await pool.query<mysql.RowDataPacket[]>("SELECT CAST(id AS CHAR) AS id, name FROM replica");
  const table = await source.table();
  assert.equal(rows.length, table.size);
  for (const r of rows) assert.equal(r.name, table.get(r.id), `record ${r.id}`);
}

test("batchVersions: waiting versions applied up to 50 in one transaction, with one UPDATE of the inbox row", async () => {
  const source = await AccountsSource.create();
  const consumer = await consumerDatabase();
  const calls: number[] = [];
  let replica: Replica | null = null;
  try {
    await source.seed(10);
    await source.startBridge();
    await source.drained();
    const inbox = await setUp(consumer.pool, calls);
    const options = { url: source.url, source: source.name, nats: { servers: env("OUTBOX_TEST_NATS_URL") }, store: inbox };
    replica = new Replica({ ...options, verifyIntervalMs: 50, batchVersions: 50 });
    const r = replica;
    await until(async () => (await r.step(50), r.appliedVersion === 10), 30_000, "the bootstrap");
    await r.close(); // the next 300 wait in the stream
    for (let k = 0; k < 300; ++k) await source.change(1 + (k % 40), k % 7 === 0 ? null : `Name ${k}`, k % 7 === 0);
    const final = await source.drained();
    const running = r.run();
    await until(() => r.lastVerifiedVersion === final, 60_000, `verified at ${final}`);
    await r.close();
    await running;
    await check(consumer.pool, source, 10, final);
    const [updates] = await consumer.pool.query<mysql.RowDataPacket[]>("SELECT COUNT(*) AS n FROM inbox_updates");
    console.log(`300 versions in ${calls.length} transactions of ${calls.join(", ")}`);
    assert.ok(Math.max(...calls) <= 50, calls.join(","));
    assert.ok(calls.length <= 30, `${calls.length} transactions for 300 waiting versions`);
    assert.equal(Number(updates[0].n), calls.length, "one UPDATE of the inbox row per transaction");
  } finally {
    await replica?.close();
    await consumer.pool.query(`DROP DATABASE IF EXISTS ${consumer.name}`).catch(() => undefined);
    await consumer.pool.end();
    await source.close();
  }
});

test("two pods on one inbox: each version applied once; every pod runs the handler, the loser rolls back", async () => {
  const source = await AccountsSource.create();
  const consumer = await consumerDatabase();
  const calls: number[] = [];
  const pods: Replica[] = [];
  try {
    await source.seed(10);
    await source.startBridge();
    await source.drained();
    const inbox = await setUp(consumer.pool, calls);
    const options = { url: source.url, source: source.name, nats: { servers: env("OUTBOX_TEST_NATS_URL") }, store: inbox };
    for (let i = 0; i < 2; ++i) pods.push(new Replica({ ...options, verifyIntervalMs: 100 }));
    const [a, b] = pods;
    const running = [a.run()];
    await until(() => a.appliedVersion === 10, 30_000, "the first pod's bootstrap");
    running.push(b.run());
    for (let k = 0; k < 200; ++k) await source.change(1 + (k % 40), `Pods ${k}`);
    const final = await source.drained();
    await until(() => a.appliedVersion === final && b.appliedVersion === final, 60_000, `both pods at ${final}`);
    for (const p of pods) await p.close();
    await Promise.all(running);
    await check(consumer.pool, source, 10, final);
    const ran = calls.reduce((x, y) => x + y, 0);
    console.log(`two pods, 200 versions: the handler ran ${ran} times, ${ran - 200} of them rolled back`);
    assert.ok(ran > 200, "the second pod ran the handler too");
  } finally {
    for (const p of pods) await p.close();
    await consumer.pool.query(`DROP DATABASE IF EXISTS ${consumer.name}`).catch(() => undefined);
    await consumer.pool.end();
    await source.close();
  }
});

test("lease: one active pod per source; the other stands by, and takes over when the first stops and its lease runs out", async () => {
  const source = await AccountsSource.create();
  const consumer = await consumerDatabase();
  const calls: number[] = [];
  const pods: Replica[] = [];
  try {
    await source.seed(10);
    await source.startBridge();
    await source.drained();
    const inbox = await setUp(consumer.pool, calls);
    const options = { url: source.url, source: source.name, nats: { servers: env("OUTBOX_TEST_NATS_URL") }, store: inbox };
    for (const holder of ["pod-a", "pod-b"]) pods.push(new Replica({ ...options, verifyIntervalMs: 100, lease: { holder, ttlMs: 3000 } }));
    const [a, b] = pods;
    const stopA = new AbortController();
    const running = [a.run(stopA.signal)];
    await until(() => a.appliedVersion === 10, 30_000, "the first pod's bootstrap");
    running.push(b.run());
    await until(() => b.status().state === "standby", 10_000, "the second pod to stand by");
    for (let k = 0; k < 200; ++k) await source.change(1 + (k % 40), `Lease ${k}`);
    let final = await source.drained();
    await until(() => a.appliedVersion === final, 60_000, `the first pod at ${final}`);
    const ran = calls.reduce((x, y) => x + y, 0);
    assert.equal(ran, 200, "the handler ran once per version: the pod without the lease did nothing");
    assert.equal(b.status().state, "standby");
    assert.equal(b.appliedVersion, 0, "the standing-by pod has not even read the inbox row");

    // The first pod stops without close(), as a killed one does: its lease runs out (3 s), then
    // the other takes over. What is left of the lease is read on the database's clock, which times
    // it (a stall of this process before its last renewal leaves less than the 2-3 s it normally has).
    const [left] = await consumer.pool.query<mysql.RowDataPacket[]>(
      "SELECT TIMESTAMPDIFF(MICROSECOND, NOW(6), expires_at) / 1000 AS ms FROM outbox_inbox_lease " +
        "WHERE source = ? AND holder = 'pod-a'",
      [source.name],
    );
    assert.equal(left.length, 1, "the first pod holds the lease");
    const readAt = performance.now();
    stopA.abort();
    await running[0];
    const stopped = performance.now();
    // Left at the stop, at least (a renewal meanwhile only adds to it).
    const leaseLeftMs = Number(left[0].ms) - (stopped - readAt);
    for (let k = 0; k < 20; ++k) await source.change(50 + k, `After ${k}`);
    final = await source.drained();
    await until(() => b.appliedVersion === final, 30_000, `the second pod at ${final}`);
    const took = performance.now() - stopped;
    console.log(`the second pod took over ${took} ms after the first stopped (its lease ran ${leaseLeftMs} ms more)`);
    assert.ok(took >= leaseLeftMs, `took over after ${took} ms, while the first pod's lease still ran`);
    assert.equal(b.counters.bootstraps, 0, "it went on from the inbox row");
    await b.close();
    await running[1];
    await check(consumer.pool, source, 10, final);
  } finally {
    for (const p of pods) await p.close();
    await consumer.pool.query(`DROP DATABASE IF EXISTS ${consumer.name}`).catch(() => undefined);
    await consumer.pool.end();
    await source.close();
  }
});

test("batchVersions on an empty snapshot whose first change is a delete: the columns the first upsert tells hold for the rest of the batch, as one by one", async () => {
  const source = await AccountsSource.create();
  const replicas: Replica[] = [];
  try {
    await source.seed(1);
    await source.change(1, null, true); // the snapshot is empty: no columns yet
    await source.startBridge();
    const bootstrapped = await source.drained();
    const stores = [new MemoryStore(), new MemoryStore()];
    for (const [i, batchVersions] of [1, 10].entries()) {
      replicas.push(
        new Replica({
          url: source.url,
          source: source.name,
          nats: { servers: env("OUTBOX_TEST_NATS_URL") },
          store: stores[i],
          batchVersions,
          verifyIntervalMs: 3_600_000, // the payloads below are not the table's: no verification
        }),
      );
    }
    for (const r of replicas) await until(async () => (await r.step(50), r.appliedVersion === bootstrapped), 30_000, "the bootstrap");
    for (const r of replicas) await r.close(); // what follows waits in the stream, for one batch
    for (const [op, key, payload] of [
      ["delete", "9", null],
      ["upsert", "1", '{"id":1,"displayName":"a"}'],
      ["upsert", "2", '{"displayName":"b","id":2}'],
      ["upsert", "3", '{"id":3}'],
    ]) {
      await source.pool.query(`INSERT INTO ${source.outbox} (entity_type, entity_key, op, payload) VALUES ('account', ?, ?, ?)`, [
        key,
        op,
        payload,
      ]);
    }
    const final = await source.drained();
    for (const r of replicas) await until(async () => (await r.step(50), r.appliedVersion === final), 30_000, `version ${final}`);
    const [one, batched] = replicas.map((r) => r.inbox as InboxRow);
    assert.deepEqual(one.columns, ["id", "displayName"]);
    assert.deepEqual([...stores[0].records(source.name)], [
      ["1", ["1", "a"]],
      ["2", ["2", "b"]],
      ["3", ["3", null]],
    ]);
    assert.deepEqual(batched.columns, one.columns, "the columns");
    assert.deepEqual([...stores[1].records(source.name)], [...stores[0].records(source.name)], "the records, in column order");
    assert.equal(batched.sum, one.sum, "the checksum");
    assert.equal(batched.recordCount, 3);
  } finally {
    for (const r of replicas) await r.close();
    await source.close();
  }
});

test("batchVersions: onApplied that throws for some versions of a committed batch is still called for the rest, once each; the error says they are applied", async () => {
  const source = await AccountsSource.create();
  let replica: Replica | null = null;
  try {
    await source.seed(10);
    await source.startBridge();
    const bootstrapped = await source.drained();
    const calls: number[] = [];
    const r = new Replica({
      url: source.url,
      source: source.name,
      nats: { servers: env("OUTBOX_TEST_NATS_URL") },
      store: new MemoryStore(),
      batchVersions: 10,
      onApplied: (c) => {
        calls.push(c.version);
        if ((c.version - bootstrapped) % 3 === 1) throw new Error("metrics push failed");
      },
    });
    replica = r;
    await until(async () => (await r.step(50), r.appliedVersion === bootstrapped), 30_000, "the bootstrap");
    await r.close(); // the next 30 wait in the stream, for batches of up to 10
    for (let k = 1; k <= 30; ++k) await source.change(k, `Then ${k}`);
    const final = await source.drained();
    const errors: string[] = [];
    await until(
      async () => {
        await r.step(50).catch((e: Error) => void errors.push(`${e.name}: ${e.message}`));
        return r.appliedVersion === final;
      },
      30_000,
      `version ${final}`,
    );
    const versions = Array.from({ length: 30 }, (_, k) => bootstrapped + 1 + k);
    assert.deepEqual(calls, versions, "onApplied once for each committed version");
    assert.ok(errors.length > 0 && errors.length <= 10, errors.join("\n"));
    for (const e of errors) assert.match(e, /^HandlerError: .*applied.*metrics push failed/);
  } finally {
    await replica?.close();
    await source.close();
  }
});
