// batchVersions with a store that has no applyBatch (one apply per change), against the real
// bridge and nats-server: another consumer of the same store moves the inbox row in the middle of
// a batch. The rest of the batch, already taken from the subscription, is read again from the
// stream, not lost to a gap and a needless bootstrap.
import assert from "node:assert/strict";
import { test } from "node:test";

import { MemoryStore, Replica, type Change, type InboxRow } from "../src/index.js";
import { AccountsSource, env, until } from "./support.js";

/** A MemoryStore whose `other` runs once, just before the second apply of a batch (one applied on the row the first returned). */
class MovedUnder extends MemoryStore {
  other: (() => Promise<void>) | null = null;
  private last: InboxRow | null = null;
  override async apply(change: Change, from: InboxRow): Promise<InboxRow | null> {
    const other = this.other;
    if (other && from === this.last) {
      this.other = null;
      await other();
    }
    this.last = await super.apply(change, from);
    return this.last;
  }
}

test("batchVersions without applyBatch: the row moved by another consumer mid-batch; the rest is read again from the stream, no gap, no bootstrap", async () => {
  const source = await AccountsSource.create();
  const store = new MovedUnder();
  const pods: Replica[] = [];
  try {
    await source.seed(10);
    await source.startBridge();
    const bootstrapped = await source.drained();
    const options = { url: source.url, source: source.name, nats: { servers: env("OUTBOX_TEST_NATS_URL") }, store };
    const a = new Replica({ ...options, batchVersions: 5 });
    const b = new Replica(options);
    pods.push(a, b);
    await until(async () => (await a.step(50), a.appliedVersion === bootstrapped), 30_000, "the bootstrap");
    await until(async () => (await b.step(50), b.appliedVersion === bootstrapped), 30_000, "the other to resume");
    await a.close();
    await b.close();
    for (let k = 1; k <= 8; ++k) await source.change(k, `Moved ${k}`);
    const final = await source.drained();
    let moved = 0;
    store.other = async () => {
      // The other consumer applies the next version itself: it reads the row again and follows.
      const target = (await store.load(source.name))!.appliedVersion + 1;
      await until(async () => (await b.step(50), b.appliedVersion >= target), 30_000, `the other at ${target}`);
      moved = target;
      await b.close();
    };
    const gaps: number[] = [];
    a.on("gap", (e) => void gaps.push(e.got));
    await until(async () => (await a.step(50), a.appliedVersion === final), 30_000, `version ${final}`);
    assert.ok(moved > bootstrapped, "the other consumer moved the row mid-batch");
    assert.deepEqual(gaps, [], "no gap seen");
    assert.equal(a.counters.bootstraps, 1, "no bootstrap after the first");
    const table = await source.table();
    assert.equal(store.records(source.name).size, table.size);
    for (const [id, name] of table) assert.deepEqual(store.records(source.name).get(id), [id, name]);
  } finally {
    for (const p of pods) await p.close();
    await source.close();
  }
});
