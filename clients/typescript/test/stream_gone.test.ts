// The stream no longer holds what the inbox row follows — deleted and recreated, renamed, purged
// while the source is quiet — against the real bridge, MariaDB and nats-server: each is a reason
// to bootstrap (docs/consumers.md section 3), and the consumer must not wait for a message that
// cannot come.
import assert from "node:assert/strict";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";

import { connect, type JetStreamManager } from "nats";

import { MemoryStore, Replica } from "../src/index.js";
import {
  AccountsSource,
  assertSameTable,
  cleanUp,
  consumerDatabase,
  env,
  Process,
  replicaTable,
  startConsumer,
  tmp,
  until,
} from "./support.js";

async function withJsm<T>(f: (jsm: JetStreamManager) => Promise<T>): Promise<T> {
  const nc = await connect({ servers: env("OUTBOX_TEST_NATS_URL") });
  try {
    return await f(await nc.jetstreamManager());
  } finally {
    await nc.close();
  }
}

/** Restarts the bridge with the source's stream under a new name (`deleteOld`: the old one
 * deleted meanwhile, as its subjects are the new one's), on the same HTTP port (the consumer's URL). */
async function renameStream(source: AccountsSource, deleteOld: boolean): Promise<string> {
  await source.bridge!.stop();
  const renamed = `${source.stream}_RENAMED`;
  const config = readFileSync(source.config, "utf8").replace(
    'listen = "127.0.0.1:0"',
    `listen = "127.0.0.1:${source.port}"`,
  );
  writeFileSync(source.config, config + `stream = "${renamed}"\n`);
  if (deleteOld) await withJsm((jsm) => jsm.streams.delete(source.stream));
  await source.startBridge();
  return renamed;
}

/** A Replica over a MemoryStore, running (run()) until stopped. */
class Running {
  readonly store = new MemoryStore();
  readonly lines: string[] = [];
  readonly replica: Replica;
  private readonly stop = new AbortController();
  private readonly done: Promise<void>;

  constructor(readonly source: AccountsSource) {
    this.replica = new Replica({
      url: source.url,
      source: source.name,
      nats: { servers: env("OUTBOX_TEST_NATS_URL") },
      store: this.store,
      verifyIntervalMs: 50,
      report: (line) => this.lines.push(`${new Date().toISOString().slice(11, 23)} ${line}`),
    });
    this.done = this.replica.run(this.stop.signal);
  }

  async verifiedAt(version: number, ms: number, what: string): Promise<void> {
    await until(() => this.replica.lastVerifiedVersion === version, ms, () => `${what}:\n${this.lines.join("\n")}`);
  }

  async assertEqual(): Promise<void> {
    const table = await this.source.table();
    const records = this.store.records(this.source.name);
    assert.equal(records.size, table.size);
    for (const [id, name] of table) assert.deepEqual(records.get(id), [id, name], `record ${id}`);
  }

  async close(): Promise<void> {
    this.stop.abort();
    await this.done;
    await this.replica.close();
  }
}

/** A source of ten rows, its bridge, and a Running consumer verified at version 10, for `body`;
 * both closed after it. */
async function withVerifiedConsumer(body: (source: AccountsSource, r: Running) => Promise<void>): Promise<void> {
  const source = await AccountsSource.create();
  let running: Running | null = null;
  try {
    await source.seed(10);
    await source.startBridge();
    await source.drained();
    running = new Running(source);
    await running.verifiedAt(10, 30_000, "the first bootstrap");
    await body(source, running);
  } finally {
    await running?.close();
    await source.close();
  }
}

test("the stream deleted and recreated under a running consumer: it bootstraps and is equal to the table", async () => {
  const source = await AccountsSource.create();
  let running: Running | null = null;
  try {
    await source.seed(10);
    await source.startBridge();
    await source.drained();
    // After an epoch bump the stream holds epoch 1's messages before epoch 2's: recreated, it
    // holds epoch 2's alone, from sequence 1 — below the sequence the consumer's inbox row has.
    await source.run(["epoch", "bump", "--config", source.config, "--source", source.name, "--reason", "ts test"]);
    for (let i = 1; i <= 5; ++i) await source.change(i, `Epoch 2 ${i}`);
    const before = await source.drained();
    running = new Running(source);
    const r = running;
    await r.verifiedAt(before, 30_000, "the first bootstrap");
    const followed = r.replica.inbox!.streamSeq;

    const at = Date.now();
    await withJsm((jsm) => jsm.streams.delete(source.stream));
    await source.change(3, null, true);
    await source.change(40, "After the stream was recreated");
    await source.change(4, "Renamed after the stream was recreated");
    const final = await source.drained();
    const last = await withJsm(async (jsm) => (await jsm.streams.info(source.stream)).state.last_seq);
    assert.ok(last < followed, `the recreated stream ends at ${last}, below the inbox row's sequence ${followed}`);

    await r.verifiedAt(final, 30_000, "the replica to bootstrap from the recreated stream");
    console.log(`stream deleted and recreated: at version ${final} ${Date.now() - at} ms after the deletion`);
    assert.ok(r.replica.counters.bootstraps >= 2, r.lines.join("\n"));
    assert.ok(r.replica.counters.lostStreams >= 1, r.lines.join("\n"));
    assert.equal(r.replica.inbox!.streamName, source.stream);
    await r.assertEqual();
  } finally {
    await running?.close();
    await source.close();
  }
});

test("the stream deleted while the source is quiet: one bootstrap, then the consumer waits for it, and follows", async () => {
  await withVerifiedConsumer(async (source, r) => {
    await withJsm((jsm) => jsm.streams.delete(source.stream));
    // Until the bridge's next publish creates it again, the snapshot names a stream that is not
    // there: the consumer waits (a snapshot per retry would read the source's table each time).
    await new Promise((resolve) => setTimeout(resolve, 12_000));
    assert.equal(r.replica.counters.bootstraps, 2, r.lines.join("\n"));
    const waiting = "does not exist (deleted, or renamed): waiting for the bridge";
    assert.ok(r.lines.some((l) => l.includes(waiting)), r.lines.join("\n"));

    const at = Date.now();
    await source.change(11, "After the stream was deleted");
    const final = await source.drained();
    await until(() => r.replica.appliedVersion === final, 30_000, () => r.lines.join("\n"));
    console.log(`stream deleted, source quiet: version ${final} applied ${Date.now() - at} ms after it was written`);
    assert.equal(r.replica.counters.bootstraps, 2, r.lines.join("\n"));
    await r.verifiedAt(final, 10_000, "the replica to verify");
    await r.assertEqual();
  });
});

test("the stream renamed (stream = changed, the old one deleted): the consumer bootstraps onto the new one", async () => {
  await withVerifiedConsumer(async (source, r) => {
    const at = Date.now();
    const renamed = await renameStream(source, true);
    await source.change(11, "In the renamed stream");
    const final = await source.drained();

    await r.verifiedAt(final, 30_000, "the replica to follow the renamed stream");
    console.log(`stream renamed: at version ${final} ${Date.now() - at} ms after the bridge stopped`);
    assert.ok(r.replica.counters.lostStreams >= 1, r.lines.join("\n"));
    assert.equal(r.replica.inbox!.streamName, renamed, r.lines.join("\n"));
    assert.ok(r.replica.counters.bootstraps >= 2, r.lines.join("\n"));
    await r.assertEqual();
  });
});

for (const emptied of ["purged", "emptied by max_age"] as const) {
  test(`the stream ${emptied} behind a paused consumer while the source is quiet: it bootstraps within 10 s`, async () => {
    const source = await AccountsSource.create(undefined, emptied === "purged" ? "" : 'max_age = "2s"\n');
    const consumer = await consumerDatabase();
    let p: Process | null = null;
    try {
      await source.seed(20);
      await source.startBridge();
      await source.drained();
      const log = join(tmp, `consumer-emptied-${source.name}.log`);
      const c = startConsumer(source, consumer.name, log);
      p = c;
      await until(() => c.log().includes("] verified at version 20:"), 30_000, () => c.log());

      // Paused past its pull's expiry (5 s): what is published meanwhile waits in the stream.
      c.child.kill("SIGSTOP");
      await new Promise((resolve) => setTimeout(resolve, 6000));
      for (let i = 1; i <= 5; ++i) await source.change(i, `Missed ${i}`);
      await source.change(21, "Missed too");
      const final = await source.drained();
      if (emptied === "purged") await withJsm((jsm) => jsm.streams.purge(source.stream));
      const empty = () => withJsm(async (jsm) => (await jsm.streams.info(source.stream)).state.messages === 0);
      await until(empty, 10_000, "the stream to be empty");
      // Nothing more is written: no later message can show the consumer a gap.
      const at = Date.now();
      c.child.kill("SIGCONT");
      const rebootstrapped = `] re-bootstrapped: epoch 1, watermark ${final}, 21 records`;
      await until(() => c.log().includes(rebootstrapped), 10_000, () => c.log());
      console.log(`stream ${emptied}, source quiet: re-bootstrapped at version ${final} after ${Date.now() - at} ms`);
      assert.match(c.log(), /stream CONTROL_\w+ begins at sequence 27: sequence 21 was purged or expired: re-bootstrapping/);
      assertSameTable(await replicaTable(consumer.pool), await source.table());
    } finally {
      await cleanUp(p, consumer, source);
    }
  });
}

test("the stream deleted, then renamed while the consumer waits for it: the source's summary sends it to the new one", async () => {
  await withVerifiedConsumer(async (source, r) => {
    await withJsm((jsm) => jsm.streams.delete(source.stream));
    const waiting = "does not exist (deleted, or renamed): waiting for the bridge";
    await until(() => r.lines.some((l) => l.includes(waiting)), 20_000, () => r.lines.join("\n"));

    // The old name never comes back, and nothing is written: only the summary can tell.
    const at = Date.now();
    const renamed = await renameStream(source, false);
    await until(() => r.replica.inbox?.streamName === renamed, 45_000, () => r.lines.join("\n"));
    console.log(`stream renamed while the consumer waited: following it ${Date.now() - at} ms after the restart`);
    const told = `does not exist (deleted, or renamed); the source now publishes to stream ${renamed}: re-bootstrapping`;
    assert.ok(r.lines.some((l) => l.includes(told)), r.lines.join("\n"));
    assert.equal(r.replica.counters.bootstraps, 3, r.lines.join("\n"));
    await source.change(11, "In the renamed stream");
    const final = await source.drained();
    await r.verifiedAt(final, 30_000, "the replica to follow the renamed stream");
    await r.assertEqual();
  });
});
