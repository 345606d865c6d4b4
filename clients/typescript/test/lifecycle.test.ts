// A Replica's lifecycle against the real bridge, MariaDB and nats-server: the signal given to
// run() stops a bootstrap and its download where they are; close() stops run() and can be
// called any number of times; a long outage adds no listener to the signal.
import assert from "node:assert/strict";
import { getEventListeners } from "node:events";
import { createServer, connect as tcpConnect, type Server, type Socket } from "node:net";
import { performance } from "node:perf_hooks";
import { test } from "node:test";

import type mysql from "mysql2/promise";

import { MemoryStore, MysqlInbox, Replica } from "../src/index.js";
import { AccountsSource, consumerDatabase, env, freePort, until } from "./support.js";

/** A TCP proxy to `port` that passes `limit` bytes of each answer, then holds the rest back. */
async function stallingProxy(port: number, limit: number) {
  const sockets = new Set<Socket>();
  let closedByClient = 0;
  const server: Server = createServer((client) => {
    const upstream = tcpConnect(port, "127.0.0.1");
    sockets.add(client).add(upstream);
    let passed = 0;
    client.on("data", (d) => upstream.write(d));
    upstream.on("data", (d) => {
      if (passed < limit) client.write(d.subarray(0, limit - passed));
      passed += d.length;
    });
    client.on("close", () => {
      closedByClient++;
      upstream.destroy();
    });
    client.on("error", () => undefined);
    upstream.on("error", () => client.destroy());
  });
  const listen = await freePort();
  await new Promise<void>((resolve) => server.listen(listen, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${listen}`,
    closedByClient: () => closedByClient,
    close: () => {
      for (const s of sockets) s.destroy();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

test("run()'s signal stops a bootstrap in its download; nothing of it is kept", async () => {
  const source = await AccountsSource.create();
  const consumer = await consumerDatabase();
  let proxy: Awaited<ReturnType<typeof stallingProxy>> | null = null;
  try {
    await source.seed(20_000);
    await source.startBridge();
    await source.drained(120_000);
    proxy = await stallingProxy(source.port, 256 * 1024); // some batches, never the end
    await consumer.pool.query("CREATE TABLE replica (id VARCHAR(64) PRIMARY KEY, name TEXT)");
    let loaded = 0;
    const inbox = new MysqlInbox({
      pool: consumer.pool,
      handler: {
        reset: async (conn) => void (await conn.query("DELETE FROM replica")),
        load: async (conn, _columns, records) => {
          await conn.query("INSERT INTO replica VALUES ?", [records.map((r) => r.values)]);
          loaded += records.length;
        },
        apply: async () => undefined,
      },
    });
    await inbox.createTables();
    const replica = new Replica({
      url: proxy.url,
      source: source.name,
      nats: { servers: env("OUTBOX_TEST_NATS_URL") },
      store: inbox,
      snapshotBatch: 100,
    });
    const stop = new AbortController();
    const running = replica.run(stop.signal);
    await until(() => loaded >= 1000, 30_000, "the first records of the snapshot");
    const state = replica.status().state;
    const asked = performance.now();
    stop.abort();
    await running;
    const took = performance.now() - asked;
    assert.ok(took < 5000, `run() returned ${took} ms after the abort`); // uncut, the stalled download never ends
    assert.equal(state, "bootstrapping");
    await until(() => proxy!.closedByClient() >= 1, 5000, "the download's connection to close");
    assert.ok(loaded < 20_000, `${loaded} records loaded: the download was not cut`);
    // The bootstrap's transaction was rolled back: no inbox row, no record.
    const [rows] = await consumer.pool.query<mysql.RowDataPacket[]>(
      "SELECT (SELECT COUNT(*) FROM outbox_inbox) AS inbox, (SELECT COUNT(*) FROM replica) AS records",
    );
    assert.deepEqual([Number(rows[0].inbox), Number(rows[0].records)], [0, 0]);
    assert.equal(replica.status().state, "stopped");
    await replica.close();
  } finally {
    await proxy?.close();
    await consumer.pool.query(`DROP DATABASE IF EXISTS ${consumer.name}`).catch(() => undefined);
    await consumer.pool.end();
    await source.close();
  }
});

test("close() stops run(), may be called again and concurrently; nothing is applied until step() or run() again", async () => {
  const source = await AccountsSource.create();
  const store = new MemoryStore();
  try {
    await source.seed(10);
    await source.startBridge();
    await source.drained();
    const replica = new Replica({ url: source.url, source: source.name, nats: { servers: env("OUTBOX_TEST_NATS_URL") }, store });
    const running = replica.run(); // no signal: close() alone stops it
    await until(() => replica.appliedVersion === 10, 30_000, "the bootstrap");
    const first = replica.close();
    const second = replica.close();
    assert.equal(first, second, "one close, whoever asks");
    await Promise.all([first, second, replica.close()]);
    let ended = false;
    await Promise.race([running.then(() => (ended = true)), new Promise((r) => setTimeout(r, 3000))]);
    assert.ok(ended, "run() still runs 3 s after close()");
    await source.change(11, "After close");
    await source.drained();
    await new Promise((r) => setTimeout(r, 500));
    assert.equal(replica.appliedVersion, 10, "a closed replica applied a change");
    assert.equal(replica.status().state, "stopped");
    // As before close(): stepping again connects and goes on from where it stopped.
    const deadline = performance.now() + 30_000;
    while (replica.appliedVersion < 11 && performance.now() < deadline) await replica.step(50);
    assert.equal(replica.appliedVersion, 11);
    await replica.close();
  } finally {
    await source.close();
  }
});

test("a long outage adds no listener to run()'s signal", async () => {
  const closed = await freePort(); // nothing listens there: every bootstrap fails and is retried
  const stop = new AbortController();
  const errors: string[] = [];
  const replica = new Replica({
    url: `http://127.0.0.1:${closed}`,
    source: "account",
    nats: { servers: env("OUTBOX_TEST_NATS_URL") },
    report: (line) => void (line.includes("retrying in") && errors.push(line)),
  });
  const running = replica.run(stop.signal);
  await until(() => errors.length >= 5, 20_000, "five failed bootstraps");
  assert.ok(getEventListeners(stop.signal, "abort").length <= 1, `${getEventListeners(stop.signal, "abort").length} listeners`);
  stop.abort();
  await running;
  assert.equal(getEventListeners(stop.signal, "abort").length, 0, "run() left its listener on the signal");
  await replica.close();
  await replica.close();
});
