// A slow consumer database must not hold the producer's snapshot read open: with a spool the
// snapshot is downloaded at the network's pace, then loaded. Against the real bridge, MariaDB and
// nats-server, the bridge's own measure of how long it streamed (outbox_snapshot_duration_seconds)
// is compared with how long the slow store took to load, with and without a spool.
import assert from "node:assert/strict";
import { mkdtempSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";

import type mysql from "mysql2/promise";

import { MemoryStore, MysqlInbox, Replica, type Bootstrap } from "../src/index.js";
import { AccountsSource, clientRoot, consumerDatabase, env, Process, tmp, until } from "./support.js";

/** The bridge's total time streaming whole snapshots of `source`, in seconds. */
async function streamedSeconds(source: AccountsSource): Promise<number> {
  const page = await (await fetch(`${source.url}/metrics`)).text();
  const line = page.split("\n").find((l) => l.startsWith(`outbox_snapshot_duration_seconds_sum{source="${source.name}"}`));
  return line ? Number(line.split(" ").pop()) : 0;
}

/** Bootstraps a replica whose store loads slowly; returns [bridge's stream time, bootstrap time] in s. */
async function slowBootstrap(source: AccountsSource, pool: mysql.Pool, spool?: string): Promise<[number, number]> {
  await pool.query("DROP TABLE IF EXISTS replica, outbox_inbox, outbox_inbox_record");
  await pool.query("CREATE TABLE replica (id BIGINT PRIMARY KEY, name TEXT)");
  const inbox = new MysqlInbox({
    pool,
    handler: {
      reset: async (conn) => void (await conn.query("DELETE FROM replica")),
      load: async (conn, _columns, records) => {
        await new Promise((resolve) => setTimeout(resolve, 60)); // a busy consumer database
        await conn.query("INSERT INTO replica VALUES ?", [records.map((r) => r.values)]);
      },
      apply: async () => undefined,
    },
  });
  await inbox.createTables();
  const replica = new Replica({ url: source.url, source: source.name, nats: { servers: env("OUTBOX_TEST_NATS_URL") }, store: inbox, spool });
  const before = await streamedSeconds(source);
  const started = performance.now();
  let bootstrapped = 0;
  replica.on("bootstrapped", () => (bootstrapped = performance.now()));
  const running = replica.run();
  await until(() => bootstrapped > 0, 120_000, "the bootstrap");
  await replica.close();
  await running;
  return [(await streamedSeconds(source)) - before, (bootstrapped - started) / 1000];
}

test("with a spool the bridge's snapshot read ends with the download, not with a slow store's load", async () => {
  const source = await AccountsSource.create();
  const consumer = await consumerDatabase();
  try {
    await source.seed(150_000);
    await source.startBridge();
    await source.drained(120_000);
    const spool = mkdtempSync(join(tmp, "spool-"));
    const [spooledRead, spooledLoad] = await slowBootstrap(source, consumer.pool, spool);
    const [directRead, directLoad] = await slowBootstrap(source, consumer.pool);
    console.log(
      `150,000 records, a store taking 60 ms a batch: the bridge streamed ${spooledRead.toFixed(2)} s of a ` +
        `${spooledLoad.toFixed(2)} s bootstrap with a spool, ${directRead.toFixed(2)} s of ${directLoad.toFixed(2)} s without`,
    );
    // The test's premise: without a spool the slow store holds the read open (for as long as the
    // sockets' buffers cannot take the rest: measured, about half the load).
    assert.ok(directRead > directLoad / 4, `without a spool the read took ${directRead} s of ${directLoad} s`);
    assert.ok(spooledRead < spooledLoad / 10, `with a spool the read took ${spooledRead} s of ${spooledLoad} s`);
    assert.ok(spooledRead < directRead / 5, "the spool shortens the read");
    assert.deepEqual(readdirSync(spool), [], "the spooled file is removed");
    const [rows] = await consumer.pool.query<mysql.RowDataPacket[]>("SELECT COUNT(*) AS n FROM replica");
    assert.equal(Number(rows[0].n), 150_000);
  } finally {
    await consumer.pool.query(`DROP DATABASE IF EXISTS ${consumer.name}`).catch(() => undefined);
    await consumer.pool.end();
    await source.close();
  }
});

test("a replica killed while it loads a spooled snapshot leaves no file in the spool", async () => {
  const source = await AccountsSource.create();
  let child: Process | null = null;
  try {
    await source.seed(5000); // 50 batches of 100 at 200 ms each: 10 s of loading
    await source.startBridge();
    await source.drained();
    const spool = mkdtempSync(join(tmp, "spool-"));
    child = new Process([process.execPath, join(clientRoot, "dist", "test", "spool_fixture.js")], join(tmp, `spool-${source.name}.log`), {
      SPOOL_URL: source.url,
      SPOOL_SOURCE: source.name,
      SPOOL_DIR: spool,
    });
    const c = child;
    await until(() => c.log().includes("loading"), 30_000, () => `the child to load:\n${c.log()}`);
    await c.kill(); // SIGKILL: no finally runs
    assert.deepEqual(readdirSync(spool), [], "nothing left in the spool");
  } finally {
    if (child && child.child.exitCode === null && child.child.signalCode === null) await child.kill();
    await source.close();
  }
});

test("close() during a bootstrap stops loading at once, also the rest of a chunk already read", async () => {
  const source = await AccountsSource.create();
  let replica: Replica | null = null;
  try {
    await source.seed(2000);
    await source.startBridge();
    await source.drained();
    let closing: Promise<void> | null = null;
    let after = 0; // batches handed to the store after close()
    class Closing extends MemoryStore {
      override async beginBootstrap(name: string): Promise<Bootstrap> {
        const b = await super.beginBootstrap(name);
        return {
          ...b,
          records: async (columns, batch) => {
            if (closing) after++;
            closing ??= replica!.close();
            await b.records(columns, batch);
          },
        };
      }
    }
    const store = new Closing();
    const spool = mkdtempSync(join(tmp, "spool-"));
    replica = new Replica({ url: source.url, source: source.name, nats: { servers: env("OUTBOX_TEST_NATS_URL") }, store, spool, snapshotBatch: 10 });
    await replica.run(); // the spooled file is read in chunks of 256 KiB: 2,000 records in one
    await closing;
    assert.equal(after, 0, "no batch loaded after close()");
    assert.equal(replica.counters.bootstraps, 0);
    assert.equal(await store.load(source.name), null, "nothing committed");
  } finally {
    await replica?.close();
    await source.close();
  }
});
