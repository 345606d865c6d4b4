// The consumer against the real bridge, MariaDB and nats-server: a large bootstrap under
// concurrent changes, exactly-once across SIGKILLs with the MySQL inbox, and bootstrapping
// again after a purge, a gap and an epoch bump.
import assert from "node:assert/strict";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { test } from "node:test";

import type mysql from "mysql2/promise";
import { connect } from "nats";

import { keyPartition, MemoryStore, Replica } from "../src/index.js";
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

const random = (n: number) => Math.floor(Math.random() * n);

/** One random change: mostly renames, some deletes, some new accounts. */
async function randomChange(source: AccountsSource, ids: number, k: number): Promise<void> {
  const roll = random(10);
  if (roll === 0) await source.change(1 + random(ids), null, true);
  else if (roll === 1) await source.change(ids + 1 + random(ids), `New ${k}`);
  else await source.change(1 + random(ids), `Change ${k} ✓`);
}

test("a 200,000-record bootstrap under 500 concurrent changes ends equal to the database, verified", async () => {
  const source = await AccountsSource.create();
  const consumer = await consumerDatabase();
  let process_: Process | null = null;
  try {
    await source.seed(200_000);
    await source.startBridge();
    await source.drained(180_000);
    // 500 changes from 2 connections over ~10 s; the consumer starts after the first 100, so the
    // rest flow while it reads the snapshot.
    let done = 0;
    let started = false;
    const log = join(tmp, `consumer-200k-${source.name}.log`);
    const worker = async () => {
      while (done < 500) {
        const k = done++;
        await randomChange(source, 200_000, k);
        await new Promise((r) => setTimeout(r, 40));
        if (done >= 100 && !started) {
          started = true;
          process_ = startConsumer(source, consumer.name, log);
        }
      }
    };
    await Promise.all([worker(), worker()]);
    const final = await source.drained();
    assert.ok(final >= 200_500, `${final} versions`);
    const p = process_ as unknown as Process;
    await until(() => p.log().includes(`] verified at version ${final}:`), 240_000, p.log());
    const bootstrapped = /\] bootstrapped: epoch 1, watermark (\d+), (\d+) records/.exec(p.log());
    assert.ok(bootstrapped, p.log());
    const watermark = Number(bootstrapped[1]);
    assert.ok(watermark > 200_000 && watermark < final, `the snapshot was taken while changes flowed (${watermark})`);
    assert.ok(Number(bootstrapped[2]) > 199_000, bootstrapped[0]); // some of the changes delete
    assert.equal(p.log().match(/bootstrapped:/g)?.length, 1, p.log());
    assertSameTable(await replicaTable(consumer.pool), await source.table());
    assert.equal(await p.stop(), 0, p.log());
    const peak = /peak RSS ([0-9.]+) MiB/.exec(p.log().split("\n").filter((l) => l.includes("peak RSS")).pop() ?? "");
    assert.ok(peak, p.log());
    console.log(`200,000-record bootstrap: watermark ${watermark}, final ${final}; consumer peak RSS ${peak[1]} MiB`);
    assert.ok(Number(peak[1]) < 400, `peak RSS ${peak[1]} MiB: the snapshot is not streamed`);
  } finally {
    await cleanUp(process_, consumer, source);
  }
});

test("a consumer SIGKILLed 20 times applies every version exactly once with the MySQL inbox", async () => {
  const source = await AccountsSource.create();
  const consumer = await consumerDatabase();
  const logs: string[] = [];
  let current: Process | null = null;
  const start = () => {
    const log = join(tmp, `consumer-kill-${source.name}-${logs.length}.log`);
    logs.push(log);
    current = startConsumer(source, consumer.name, log);
    return current;
  };
  try {
    await source.seed(1000);
    await source.startBridge();
    await source.drained();
    const first = start();
    await until(() => first.log().includes("] bootstrapped:"), 30_000, first.log());
    const watermark = Number(/\] bootstrapped: epoch 1, watermark (\d+)/.exec(first.log())![1]);
    // Changes flow from 2 connections the whole time.
    let writing = true;
    let written = 0;
    const producer = async () => {
      while (writing) {
        await randomChange(source, 1000, written++);
        await new Promise((r) => setTimeout(r, random(4)));
      }
    };
    const producers = [producer(), producer()];
    // Each kill comes at a random moment after the consumer is running: while it applies, reads
    // the stream, or waits.
    for (let kill = 0; kill < 20; ++kill) {
      const running = current as unknown as Process;
      await until(() => /resumed from the inbox|bootstrapped/.test(running.log()), 30_000, running.log());
      await new Promise((r) => setTimeout(r, random(700)));
      await running.kill();
      start();
    }
    writing = false;
    await Promise.all(producers);
    const final = await source.drained();
    const last = current as unknown as Process;
    await until(() => last.log().includes(`] verified at version ${final}:`), 60_000, last.log());
    assert.equal(await last.stop(), 0, last.log());

    const [rows] = await consumer.pool.query<mysql.RowDataPacket[]>(
      "SELECT CAST(version AS CHAR) AS version, applied FROM applied_versions ORDER BY version",
    );
    const twice = rows.filter((r) => r.applied !== 1);
    assert.deepEqual(twice, [], "versions applied more than once");
    assert.equal(rows.length, final - watermark, `versions ${watermark + 1}..${final} applied, none skipped`);
    assert.equal(Number(rows[0].version), watermark + 1);
    assert.equal(Number(rows[rows.length - 1].version), final);
    const { readFileSync } = await import("node:fs");
    const all = logs.map((l) => readFileSync(l, "utf8")).join("");
    assert.equal(all.match(/\] bootstrapped:/g)?.length, 1, "bootstrapped once, resumed from the inbox after");
    assert.equal(all.match(/re-bootstrapped/g), null);
    assert.equal(all.match(/resumed from the inbox/g)?.length, 20, all);
    assertSameTable(await replicaTable(consumer.pool), await source.table());
    console.log(`20 SIGKILLs: ${written} changes, versions ${watermark + 1}..${final} each applied once`);
  } finally {
    await cleanUp(current, consumer, source);
  }
});

test("a stream purged behind the consumer, a message deleted (a gap), an epoch bump: it bootstraps again each time", async () => {
  const source = await AccountsSource.create();
  const store = new MemoryStore();
  const lines: string[] = [];
  let replica: Replica | null = null;
  const r = () => replica as Replica;
  const stepUntil = async (done: () => boolean, what: string) => {
    const deadline = performance.now() + 30_000;
    while (!done()) {
      if (performance.now() > deadline) throw new Error(`timed out waiting for ${what}:\n${lines.join("\n")}`);
      await r().step(50).catch((e: Error) => lines.push(`step: ${e.message}`));
    }
  };
  const equal = async () => {
    const table = await source.table();
    const records = store.records(source.name);
    assert.equal(records.size, table.size);
    for (const [id, name] of table) assert.deepEqual(records.get(id), [id, name], `record ${id}`);
  };
  try {
    await source.seed(10);
    await source.startBridge();
    replica = new Replica({
      url: source.url,
      source: source.name,
      nats: { servers: env("OUTBOX_TEST_NATS_URL") },
      store,
      verifyIntervalMs: 50,
      report: (line) => lines.push(line),
    });
    await source.drained();
    await stepUntil(() => r().lastVerifiedVersion === 10, "the bootstrap");
    await r().close(); // behind from here: it reads nothing while the stream moves on

    for (let i = 11; i <= 20; ++i) await source.change(i, `Account ${i}`);
    await source.drained();
    const nc = await connect({ servers: env("OUTBOX_TEST_NATS_URL") });
    await (await nc.jetstreamManager()).streams.purge(source.stream);
    await nc.close();
    for (let i = 21; i <= 25; ++i) await source.change(i - 20, `After the purge ${i}`);
    assert.equal(await source.drained(), 25);
    await stepUntil(() => r().lastVerifiedVersion === 25, "the replica to catch up after the purge");
    // Seen before any message shows the gap: the stream begins past what the inbox row follows.
    assert.equal(r().counters.lostStreams, 1, lines.join("\n"));
    assert.equal(r().counters.bootstraps, 2);
    const purged = /stream CONTROL_\w+ begins at sequence 21: sequence 11 was purged or expired: re-bootstrapping/;
    assert.ok(lines.some((l) => purged.test(l)), lines.join("\n"));
    await equal();

    // A message deleted from the middle of the stream: the stream still holds the next sequence,
    // and the version after the hole shows the gap.
    await r().close();
    for (let i = 26; i <= 28; ++i) await source.change(i, `Account ${i}`);
    assert.equal(await source.drained(), 28);
    const nc2 = await connect({ servers: env("OUTBOX_TEST_NATS_URL") });
    await (await nc2.jetstreamManager()).streams.deleteMessage(source.stream, 27);
    await nc2.close();
    await stepUntil(() => r().lastVerifiedVersion === 28, "the replica to catch up after the hole");
    assert.ok(r().counters.gaps >= 1, lines.join("\n"));
    assert.equal(r().counters.bootstraps, 3);
    assert.ok(lines.some((l) => /gap: expected version 27, got 28/.test(l)), lines.join("\n"));
    await equal();

    await source.run(["epoch", "bump", "--config", source.config, "--source", source.name, "--reason", "ts test"]);
    await source.change(3, null, true);
    await source.change(30, "In the new epoch");
    const final = await source.drained();
    assert.equal((await source.state()).epoch, 2);
    await stepUntil(() => r().inbox?.epoch === 2 && r().lastVerifiedVersion === final, "the new epoch");
    assert.ok(r().counters.epochChanges >= 1, lines.join("\n"));
    assert.equal(r().counters.bootstraps, 4);
    assert.ok(lines.some((l) => l.includes("re-bootstrapped in a new epoch: epoch 2")), lines.join("\n"));
    await equal();
  } finally {
    await replica?.close();
    await source.close();
  }
});

test("a replica follows a source whose subjects name the key and a partition", async () => {
  const source = await AccountsSource.create(undefined, 'subject = "control.{name}.{partition:4}.{entity_key}"\n');
  const store = new MemoryStore();
  const subjects = new Set<string>();
  let headersSeen = 0;
  let replica: Replica | null = null;
  try {
    await source.seed(50);
    await source.startBridge();
    await source.drained();
    replica = new Replica({
      url: source.url,
      source: source.name,
      nats: { servers: env("OUTBOX_TEST_NATS_URL") },
      store,
      verifyIntervalMs: 50,
      onApplied: (change) => {
        subjects.add(change.subject);
        // Every header of the message reaches the application.
        assert.equal(change.headers.get("Outbox-Entity-Key"), change.key);
        assert.equal(change.headers.get("Outbox-Version"), String(change.version));
        assert.equal(change.headers.get("Content-Type"), "application/json");
        headersSeen++;
      },
    });
    const r = replica;
    await r.step(50);
    for (let i = 1; i <= 30; ++i) await source.change(i, `Per key ${i}`);
    const final = await source.drained();
    const deadline = performance.now() + 30_000;
    while (r.lastVerifiedVersion !== final && performance.now() < deadline) await r.step(50);
    assert.equal(r.lastVerifiedVersion, final);
    const table = await source.table();
    assert.equal(store.records(source.name).size, table.size);
    for (const [id, name] of table) assert.deepEqual(store.records(source.name).get(id), [id, name]);
    assert.ok(subjects.has(`control.${source.name}.${keyPartition("7", 4)}.7`), [...subjects].join(" "));
    assert.equal(headersSeen, 30);
  } finally {
    await replica?.close();
    await source.close();
  }
});
