// The lease (ReplicaOptions.lease) against the real bridge, MariaDB and nats-server, where a pod's
// work outlasts its time to live: a bootstrap longer than the lease, a lease taken away during a
// bootstrap, and a pod that keeps failing while a healthy one stands by.
import assert from "node:assert/strict";
import { test } from "node:test";

import type mysql from "mysql2/promise";

import { MysqlInbox, Replica, type InboxHandler } from "../src/index.js";
import { AccountsSource, consumerDatabase, env, until } from "./support.js";

/** A handler keeping `replica`: `calls` counts what it was asked; `loadMs`: each batch of a snapshot takes as long. */
function handler(calls: { resets: number; loads: number }, loadMs = 0, broken = false): InboxHandler {
  return {
    reset: async (conn) => {
      calls.resets++;
      await conn.query("DELETE FROM replica");
    },
    load: async (conn, _columns, records) => {
      calls.loads++;
      await new Promise((r) => setTimeout(r, loadMs));
      await conn.query("INSERT INTO replica VALUES ?", [records.map((r) => r.values)]);
    },
    apply: async (conn, c) => {
      if (broken) throw new Error("this pod's handler is broken");
      if (c.values) await conn.query("REPLACE INTO replica VALUES (?)", [c.values]);
      else await conn.query("DELETE FROM replica WHERE id = ?", [c.key]);
    },
  };
}

async function setUp(): Promise<{ source: AccountsSource; consumer: { name: string; pool: mysql.Pool } }> {
  const source = await AccountsSource.create();
  const consumer = await consumerDatabase();
  await consumer.pool.query("CREATE TABLE replica (id BIGINT PRIMARY KEY, name TEXT)");
  return { source, consumer };
}

async function tearDown(pods: Replica[], source: AccountsSource, consumer: { name: string; pool: mysql.Pool }) {
  for (const p of pods) await p.close();
  await consumer.pool.query(`DROP DATABASE IF EXISTS ${consumer.name}`).catch(() => undefined);
  await consumer.pool.end();
  await source.close();
}

test("lease: a bootstrap longer than the lease's time to live renews it, and the standing-by pod does not bootstrap too", async () => {
  const { source, consumer } = await setUp();
  const pods: Replica[] = [];
  const running: Promise<void>[] = [];
  const calls = [
    { resets: 0, loads: 0 },
    { resets: 0, loads: 0 },
  ];
  try {
    await source.seed(3000);
    await source.startBridge();
    const final = await source.drained();
    for (const [i, holder] of ["pod-a", "pod-b"].entries()) {
      const store = new MysqlInbox({ pool: consumer.pool, handler: handler(calls[i], 250) });
      if (i === 0) await store.createTables();
      pods.push(
        new Replica({
          url: source.url,
          source: source.name,
          nats: { servers: env("OUTBOX_TEST_NATS_URL") },
          store,
          snapshotBatch: 200, // 15 batches of 250 ms: 3.75 s, past the lease's 1.5 s
          lease: { holder, ttlMs: 1500 },
        }),
      );
    }
    const [a, b] = pods;
    running.push(a.run());
    await until(() => calls[0].loads > 0, 30_000, "the first pod's bootstrap to load");
    running.push(b.run());
    await until(() => a.appliedVersion === final, 30_000, "the first pod's bootstrap");
    assert.equal(calls[1].resets, 0, "the standing-by pod began no bootstrap of its own");
    assert.equal(b.status().state, "standby");
    assert.equal(a.counters.bootstraps, 1);
  } finally {
    await tearDown(pods, source, consumer);
    await Promise.allSettled(running);
  }
});

test("lease: a pod whose lease another takes during its bootstrap stops it and stands by", async () => {
  const { source, consumer } = await setUp();
  const calls = { resets: 0, loads: 0 };
  let pod: Replica | null = null;
  let running: Promise<void> | null = null;
  try {
    await source.seed(3000);
    await source.startBridge();
    await source.drained();
    const store = new MysqlInbox({ pool: consumer.pool, handler: handler(calls, 250) });
    await store.createTables();
    const p = new Replica({
      url: source.url,
      source: source.name,
      nats: { servers: env("OUTBOX_TEST_NATS_URL") },
      store,
      snapshotBatch: 200,
      lease: { holder: "pod-a", ttlMs: 1500 },
    });
    pod = p;
    running = p.run();
    await until(() => calls.loads > 0, 30_000, "the bootstrap to load");
    // Another pod took it (this one paused past its lease, say): for an hour.
    await consumer.pool.query(
      "UPDATE outbox_inbox_lease SET holder = 'pod-b', expires_at = NOW(6) + INTERVAL 1 HOUR WHERE source = ?",
      [source.name],
    );
    await until(() => p.status().state === "standby", 5_000, "the pod to stand by");
    const loads = calls.loads;
    await new Promise((r) => setTimeout(r, 1000));
    assert.equal(calls.loads, loads, "the bootstrap loads no more");
    assert.equal(p.counters.bootstraps, 0, "the bootstrap was not committed");
    assert.equal(await store.load(source.name), null, "no inbox row");
  } finally {
    await tearDown(pod ? [pod] : [], source, consumer);
    await running?.catch(() => undefined);
  }
});

test("lease: a pod that keeps failing gives the lease up once its failures outlast the time to live; the healthy one takes over", async () => {
  const { source, consumer } = await setUp();
  const pods: Replica[] = [];
  const running: Promise<void>[] = [];
  try {
    await source.seed(10);
    await source.startBridge();
    await source.drained();
    const ttlMs = 5000;
    for (const [i, holder] of ["pod-a", "pod-b"].entries()) {
      const store = new MysqlInbox({ pool: consumer.pool, handler: handler({ resets: 0, loads: 0 }, 0, i === 0) });
      if (i === 0) await store.createTables();
      pods.push(
        new Replica({
          url: source.url,
          source: source.name,
          nats: { servers: env("OUTBOX_TEST_NATS_URL") },
          store,
          lease: { holder, ttlMs },
        }),
      );
    }
    const [a, b] = pods;
    let firstFailure = 0;
    a.on("error", () => void (firstFailure ||= performance.now()));
    running.push(a.run());
    await until(() => a.appliedVersion === 10, 30_000, "the first pod's bootstrap");
    running.push(b.run());
    await until(() => b.status().state === "standby", 10_000, "the second pod to stand by");
    await source.change(3, "After");
    const final = await source.drained();
    await until(() => b.appliedVersion === final, 30_000, `the healthy pod at ${final}`);
    const took = performance.now() - firstFailure;
    console.log(`the healthy pod applied version ${final} ${took} ms after the other's first failure (lease of ${ttlMs} ms)`);
    // Normally 4-5 s; a failing pod that kept renewing between its retries would hold it for ever.
    assert.ok(took < ttlMs + 8000, `took over ${took} ms after the first failure`);
    await until(() => a.status().state === "standby", 15_000, "the failing pod to stand by after its wait");
  } finally {
    await tearDown(pods, source, consumer);
    await Promise.allSettled(running);
  }
});

test("lease: a pod that loses the lease shows no stale version or pending count in status() while it stands by", async () => {
  const { source, consumer } = await setUp();
  let pod: Replica | null = null;
  let running: Promise<void> | null = null;
  try {
    await source.seed(10);
    await source.startBridge();
    await source.drained();
    const store = new MysqlInbox({ pool: consumer.pool, handler: handler({ resets: 0, loads: 0 }) });
    await store.createTables();
    const p = new Replica({
      url: source.url,
      source: source.name,
      nats: { servers: env("OUTBOX_TEST_NATS_URL") },
      store,
      // A ttl of seconds: 1.5 s lapsed under a full run's load (three lanes on two cores), and the
      // pod stood by and took the lease again before it had caught up.
      lease: { holder: "pod-a", ttlMs: 6000 },
    });
    pod = p;
    running = p.run();
    // Bootstrapped first: a change the snapshot already holds arrives as no message, and the
    // pending count stays unknown (null) on a slow machine.
    await until(() => p.appliedVersion === 10, 30_000, "the pod's bootstrap");
    await source.change(1, "Seen");
    const final = await source.drained();
    await until(() => p.appliedVersion === final && p.status().pendingMessages !== null, 30_000, `version ${final}`);
    await consumer.pool.query(
      "UPDATE outbox_inbox_lease SET holder = 'pod-b', expires_at = NOW(6) + INTERVAL 1 HOUR WHERE source = ?",
      [source.name],
    );
    await until(() => p.status().state === "standby", 15_000, "the pod to stand by"); // at its next renewal
    const status = p.status();
    assert.equal(status.appliedVersion, 0, "not this pod's to report: another applies now");
    assert.equal(status.pendingMessages, null);
    assert.equal(status.epoch, null);
  } finally {
    await tearDown(pod ? [pod] : [], source, consumer);
    await running?.catch(() => undefined);
  }
});
