// What a Replica tells the service running it, against the real bridge, MariaDB and
// nats-server: the logger hook, the events, status() for a health check, and stopping on a
// handler's bug instead of retrying it for ever.
import assert from "node:assert/strict";
import { performance } from "node:perf_hooks";
import { test } from "node:test";

import type mysql from "mysql2/promise";
import { connect } from "nats";

import { HandlerError, MemoryStore, MysqlInbox, Replica, type ReplicaEvents, type ReplicaLogger } from "../src/index.js";
import { AccountsSource, consumerDatabase, env, freePort, suffix, until } from "./support.js";

type Logged = { level: string; fields: Record<string, unknown>; message: string };
const collect = (into: Logged[]): ReplicaLogger => ({
  debug: (fields, message) => into.push({ level: "debug", fields: fields as Record<string, unknown>, message }),
  info: (fields, message) => into.push({ level: "info", fields: fields as Record<string, unknown>, message }),
  warn: (fields, message) => into.push({ level: "warn", fields: fields as Record<string, unknown>, message }),
  error: (fields, message) => into.push({ level: "error", fields: fields as Record<string, unknown>, message }),
});

/** A MysqlInbox whose handler throws on account `bad` while `broken()` says so. */
async function inboxFailingOn(pool: mysql.Pool, bad: string, broken: () => boolean): Promise<MysqlInbox> {
  await pool.query("CREATE TABLE replica (id VARCHAR(64) PRIMARY KEY, name TEXT)");
  const inbox = new MysqlInbox({
    pool,
    handler: {
      reset: async (conn) => void (await conn.query("DELETE FROM replica")),
      load: async (conn, _columns, records) => void (await conn.query("INSERT INTO replica VALUES ?", [records.map((r) => r.values)])),
      apply: async (conn, change) => {
        if (change.key === bad && broken()) throw new TypeError(`cannot read properties of undefined (account ${bad})`);
        if (change.values) await conn.query("REPLACE INTO replica VALUES (?)", [change.values]);
        else await conn.query("DELETE FROM replica WHERE id = ?", [change.key]);
      },
    },
  });
  await inbox.createTables();
  return inbox;
}

test("onHandlerError 'stop': run() rejects with the handler's error; status, events and logger say it", async () => {
  const source = await AccountsSource.create();
  const consumer = await consumerDatabase();
  const logged: Logged[] = [];
  const errors: ReplicaEvents["error"][] = [];
  const bootstraps: ReplicaEvents["bootstrapped"][] = [];
  let replica: Replica | null = null;
  try {
    await source.seed(10);
    await source.startBridge();
    await source.drained();
    replica = new Replica({
      url: source.url,
      source: source.name,
      nats: { servers: env("OUTBOX_TEST_NATS_URL") },
      store: await inboxFailingOn(consumer.pool, "13", () => true),
      logger: collect(logged),
      onHandlerError: "stop",
    });
    replica.on("error", (e) => errors.push(e));
    replica.on("bootstrapped", (e) => bootstraps.push(e));
    // Its end taken at once: it may reject before the changes below are written.
    const ended = replica.run().then(
      () => new Error("run() ended without the handler's error"),
      (e: unknown) => e,
    );
    await until(() => bootstraps.length === 1, 30_000, "the bootstrap");
    assert.deepEqual({ ...bootstraps[0], checksum: "" }, { epoch: 1, version: 10, recordCount: 10, checksum: "", reason: "first" });
    for (const id of [11, 12, 13, 14]) await source.change(id, `Account ${id}`);
    await source.drained();
    const error = await ended;
    assert.ok(error instanceof HandlerError, String(error));
    assert.ok((error as HandlerError).cause instanceof TypeError);
    assert.match((error as Error).message, /apply of version 13: cannot read properties of undefined \(account 13\)/);
    const status = replica.status();
    assert.equal(status.state, "failed");
    assert.equal(status.appliedVersion, 12); // 13 rolled back with its inbox row
    assert.match(status.lastError?.message ?? "", /version 13/);
    assert.equal(status.failures, 1, "stopped at the first failure, without retrying");
    assert.ok(status.lagMs > 0, "a replica stopped behind the stream is not caught up");
    assert.equal(errors.length, 1);
    assert.equal(errors[0].retryInMs, null);
    const line = logged.find((l) => l.level === "error");
    assert.ok(line, JSON.stringify(logged));
    assert.equal(line.fields.source, source.name);
    assert.ok(line.fields.err instanceof HandlerError);
    assert.ok(logged.some((l) => l.level === "info" && l.message.startsWith("bootstrapped: epoch 1")));
  } finally {
    await replica?.close();
    await consumer.pool.query(`DROP DATABASE IF EXISTS ${consumer.name}`).catch(() => undefined);
    await consumer.pool.end();
    await source.close();
  }
});

test("by default a handler's failure is retried; status() shows the lag and the error until it passes", async () => {
  const source = await AccountsSource.create();
  const consumer = await consumerDatabase();
  let broken = true;
  let replica: Replica | null = null;
  try {
    await source.seed(5);
    await source.startBridge();
    await source.drained();
    replica = new Replica({
      url: source.url,
      source: source.name,
      nats: { servers: env("OUTBOX_TEST_NATS_URL") },
      store: await inboxFailingOn(consumer.pool, "7", () => broken),
    });
    const r = replica;
    const running = r.run();
    await until(() => r.appliedVersion === 5, 30_000, "the bootstrap");
    assert.deepEqual([r.status().lagMs, r.status().failures, r.status().lastError], [0, 0, null]);
    for (const id of [6, 7, 8]) await source.change(id, `Account ${id}`);
    await source.drained();
    await until(() => r.status().failures >= 3, 30_000, "three failures in a row");
    const failing = r.status();
    assert.equal(failing.state, "retrying");
    assert.equal(failing.appliedVersion, 6);
    assert.match(failing.lastError?.message ?? "", /apply of version 7/);
    assert.ok(failing.pendingMessages !== null && failing.pendingMessages >= 1, JSON.stringify(failing));
    await new Promise((resolve) => setTimeout(resolve, 300));
    assert.ok(r.status().lagMs > failing.lagMs, "the lag grows while the same change fails");
    broken = false; // the fix is deployed
    await until(() => r.appliedVersion === 8, 30_000, "version 8");
    await until(() => r.status().lagMs === 0, 5000, "the lag to reach 0");
    const healed = r.status();
    assert.equal(healed.failures, 0);
    assert.equal(healed.state, "following");
    assert.match(healed.lastError?.message ?? "", /version 7/, "the last error stays, with its time");
    assert.ok(healed.lastAppliedAt instanceof Date);
    await r.close();
    await running;
  } finally {
    await replica?.close();
    await consumer.pool.query(`DROP DATABASE IF EXISTS ${consumer.name}`).catch(() => undefined);
    await consumer.pool.end();
    await source.close();
  }
});

test("the events of a gap and of a new epoch, and the bootstrap each caused", async () => {
  const source = await AccountsSource.create();
  const events: string[] = [];
  let replica: Replica | null = null;
  try {
    await source.seed(5);
    await source.startBridge();
    await source.drained();
    replica = new Replica({
      url: source.url,
      source: source.name,
      nats: { servers: env("OUTBOX_TEST_NATS_URL") },
      store: new MemoryStore(),
      verifyIntervalMs: 50,
    });
    const r = replica;
    r.on("gap", (e) => events.push(`gap ${e.expected} ${e.got}`));
    r.on("epoch", (e) => events.push(`epoch ${e.from} ${e.to}`));
    r.on("bootstrapped", (e) => events.push(`bootstrapped ${e.reason} ${e.epoch} ${e.version}`));
    r.on("bootstrapped", () => {
      throw new Error("a listener's bug"); // caught: it stops nothing
    });
    const stepUntil = async (done: () => boolean, what: string) => {
      const deadline = performance.now() + 30_000;
      while (!done()) {
        if (performance.now() > deadline) throw new Error(`timed out waiting for ${what}: ${events.join(", ")}`);
        await r.step(50).catch(() => undefined);
      }
    };
    await stepUntil(() => r.lastVerifiedVersion === 5, "the bootstrap");
    await r.close();
    replica = new Replica({ url: source.url, source: source.name, nats: { servers: env("OUTBOX_TEST_NATS_URL") }, store: r.store, verifyIntervalMs: 50 });
    const r2 = replica;
    r2.on("gap", (e) => events.push(`gap ${e.expected} ${e.got}`));
    r2.on("epoch", (e) => events.push(`epoch ${e.from} ${e.to}`));
    r2.on("bootstrapped", (e) => events.push(`bootstrapped ${e.reason} ${e.epoch} ${e.version}`));
    r2.on("verified", (e) => events.push(`verified ${e.version}`));
    for (let i = 6; i <= 8; ++i) await source.change(i, `Account ${i}`);
    await source.drained();
    const nc = await connect({ servers: env("OUTBOX_TEST_NATS_URL") });
    await (await nc.jetstreamManager()).streams.deleteMessage(source.stream, 7);
    await nc.close();
    const stepUntil2 = async (done: () => boolean, what: string) => {
      const deadline = performance.now() + 30_000;
      while (!done()) {
        if (performance.now() > deadline) throw new Error(`timed out waiting for ${what}: ${events.join(", ")}`);
        await r2.step(50).catch(() => undefined);
      }
    };
    await stepUntil2(() => r2.lastVerifiedVersion === 8, "the bootstrap after the gap");
    await source.run(["epoch", "bump", "--config", source.config, "--source", source.name, "--reason", "ts test"]);
    await source.change(9, "In the new epoch");
    await source.drained();
    await stepUntil2(() => r2.inbox?.epoch === 2, "the new epoch");
    await source.change(10, "Verified after");
    const final = await source.drained();
    await stepUntil2(() => events.includes(`verified ${final}`), "a verified event");
    const seen = events.join(", ");
    assert.ok(seen.startsWith("bootstrapped first 1 5, gap 7 8"), seen);
    assert.ok(seen.includes("gap 7 8, bootstrapped gap 1 8"), seen);
    assert.match(seen, /epoch 1 2, bootstrapped epoch 2 \d+/);
  } finally {
    await replica?.close();
    await source.close();
  }
});

test("a bridge URL with user:password@ keeps the password out of errors, lastError and the log", async () => {
  const port = await freePort(); // nothing listens: every download fails
  const password = "pw-" + suffix();
  const lines: string[] = [];
  const errors: string[] = [];
  const r = new Replica({
    url: `http://reader:${password}@127.0.0.1:${port}`,
    source: "accounts",
    nats: { servers: env("OUTBOX_TEST_NATS_URL") },
    store: new MemoryStore(),
    report: (line) => void lines.push(line),
  });
  r.on("error", (e) => void errors.push(e.error.message));
  const running = r.run();
  try {
    await until(() => errors.length >= 2, 20_000, "two failed downloads");
  } finally {
    await r.close();
    await running;
  }
  const seen = [...errors, ...lines, r.status().lastError?.message ?? ""].join("\n");
  assert.match(seen, /127\.0\.0\.1/, "the errors name the bridge");
  assert.ok(!seen.includes(password), seen);
});

test('onHandlerError "stop": a lock wait timeout in the handler is retried, not a stop', async () => {
  const source = await AccountsSource.create();
  const consumer = await consumerDatabase();
  let replica: Replica | null = null;
  try {
    await source.seed(10);
    await source.startBridge();
    await source.drained();
    await consumer.pool.query("CREATE TABLE replica (id BIGINT PRIMARY KEY, name TEXT)");
    await consumer.pool.query("CREATE TABLE hot (id INT PRIMARY KEY)");
    await consumer.pool.query("INSERT INTO hot VALUES (1)");
    const inbox = new MysqlInbox({
      pool: consumer.pool,
      handler: {
        reset: async (conn) => void (await conn.query("DELETE FROM replica")),
        load: async (conn, _c, records) => void (await conn.query("INSERT INTO replica VALUES ?", [records.map((x) => x.values)])),
        apply: async (conn, c) => {
          await conn.query("SET SESSION innodb_lock_wait_timeout = 1");
          await conn.query("SELECT id FROM hot WHERE id = 1 FOR UPDATE"); // waits for the blocker below
          await conn.query("REPLACE INTO replica VALUES (?)", [c.values]);
        },
      },
    });
    await inbox.createTables();
    const r = new Replica({ url: source.url, source: source.name, nats: { servers: env("OUTBOX_TEST_NATS_URL") }, store: inbox, onHandlerError: "stop" });
    replica = r;
    await until(async () => (await r.step(50), r.appliedVersion === 10), 30_000, "the bootstrap");
    const blocker = await consumer.pool.getConnection();
    await blocker.query("START TRANSACTION");
    await blocker.query("SELECT id FROM hot WHERE id = 1 FOR UPDATE");
    const errors: Error[] = [];
    r.on("error", (e) => void errors.push(e.error));
    let outcome = "running";
    const running = r.run().then(
      () => (outcome = "stopped"),
      (e: Error) => (outcome = `rejected: ${e.message}`),
    );
    await source.change(1, "Blocked");
    const final = await source.drained();
    await until(() => errors.length >= 1, 20_000, "the lock wait timeout");
    await blocker.query("ROLLBACK");
    blocker.release();
    await until(() => r.appliedVersion === final || outcome !== "running", 20_000, `version ${final}`);
    assert.equal(outcome, "running", errors.map((e) => e.message).join("\n"));
    assert.ok(errors[0] instanceof HandlerError && /Lock wait timeout/i.test(errors[0].message), errors[0].message);
    await r.close();
    await running;
  } finally {
    await replica?.close();
    await consumer.pool.query(`DROP DATABASE IF EXISTS ${consumer.name}`).catch(() => undefined);
    await consumer.pool.end();
    await source.close();
  }
});
