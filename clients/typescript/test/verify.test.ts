// The verifier without services (src/verify.ts): the history of checksums a summary is compared
// at, when a summary is judged, the distinct reads a mismatch needs, and when to ask.
import assert from "node:assert/strict";
import { test } from "node:test";

import { ChecksumHistory, Verifier, type ServedSummary, type VersionState } from "../src/verify.js";

// The replica's state after version v: sums that differ at every version.
const stateAt = (v: number): VersionState => ({ version: v, sum: BigInt(v) * 1_000_003n, recordCount: 100 + v });

function summaryOf(state: VersionState, readAt: string, freshForMs = 0): ServedSummary {
  return {
    source: "a",
    epoch: 1,
    watermark: state.version,
    streamName: "CONTROL_A",
    streamSeq: state.version,
    key: "id",
    recordCount: state.recordCount,
    checksum: "",
    sum: state.sum,
    columns: [],
    numeric: [],
    readAt,
    freshForMs,
  };
}

/** A verifier at version `from`, then versions from+1..to applied. */
function verifierThrough(from: number, to: number, options: Partial<ConstructorParameters<typeof Verifier>[0]> = {}) {
  const v = new Verifier({ intervalMs: 300_000, historySize: 500, random: () => 0.5, ...options });
  v.reset(stateAt(from), 0, true);
  for (let i = from + 1; i <= to; ++i) v.applied(stateAt(i), 0);
  return v;
}

test("the history keeps the last `size` versions, oldest first", () => {
  const h = new ChecksumHistory(4);
  h.reset(stateAt(10));
  for (let v = 11; v <= 20; ++v) h.push(stateAt(v));
  assert.equal(h.oldest()?.version, 17);
  assert.equal(h.newest()?.version, 20);
  assert.deepEqual(h.at(18), stateAt(18));
  assert.equal(h.at(16), undefined);
  assert.equal(h.at(21), undefined);
  assert.equal(h.match(17, stateAt(19).sum, stateAt(19).recordCount), 19);
  assert.equal(h.match(20, stateAt(19).sum, stateAt(19).recordCount), null); // only at or after `from`
  h.push(stateAt(20)); // a duplicate changes nothing
  assert.equal(h.newest()?.version, 20);
  assert.equal(h.oldest()?.version, 17);
});

test("a summary behind the replica is compared at its own watermark", () => {
  const v = verifierThrough(100, 400);
  const verdict = v.offer(summaryOf(stateAt(250), "r1"), 1_000, false);
  assert.deepEqual(verdict, { kind: "verified", version: 250 });
});

test("a summary that held changes not yet published matches a later version", () => {
  const v = verifierThrough(100, 400);
  // Read at watermark 250 with versions 251 and 252 already committed in the table.
  const s = { ...summaryOf(stateAt(252), "r1"), watermark: 250 };
  assert.deepEqual(v.offer(s, 1_000, true), { kind: "verified", version: 252 });
});

test("a summary ahead of the replica is compared once the replica reaches it", () => {
  const v = verifierThrough(100, 200);
  assert.deepEqual(v.offer(summaryOf(stateAt(210), "r1"), 1_000, true), { kind: "later" });
  assert.equal(v.waitingFor, 210);
  for (let i = 201; i < 210; ++i) assert.deepEqual(v.applied(stateAt(i), 1_000), { kind: "none" });
  assert.deepEqual(v.applied(stateAt(210), 1_000), { kind: "verified", version: 210 });
  assert.equal(v.waitingFor, null);
});

test("a summary read before the history begins is not judged, and asked again once the bridge reads again", () => {
  const v = verifierThrough(100, 1_000); // the history holds 501..1000
  assert.deepEqual(v.offer(summaryOf(stateAt(400), "old", 20_000), 0, true), { kind: "later" });
  assert.equal(v.due(20_000), false);
  assert.equal(v.due(20_000 + 100 + 500), true); // freshFor + 100 ms + the jitter's half second
});

test("a difference counts once per read of the table: the same read served again is not a second one", () => {
  const v = verifierThrough(100, 200);
  const wrong = (readAt: string) => ({ ...summaryOf(stateAt(200), readAt), sum: 42n });
  const first = v.offer(wrong("r1"), 0, true);
  assert.equal(first.kind, "mismatch");
  assert.equal(first.kind === "mismatch" && first.inARow, 1);
  assert.deepEqual(first.kind === "mismatch" && first.state, stateAt(200));
  for (let i = 0; i < 5; ++i) {
    const again = v.offer(wrong("r1"), 0, true);
    assert.equal(again.kind === "mismatch" && again.inARow, 1, "the cache's copy of read r1");
  }
  assert.equal((v.offer(wrong("r2"), 0, true) as { inARow: number }).inARow, 2);
  assert.equal((v.offer(wrong("r3"), 0, true) as { inARow: number }).inARow, 3);
  // A match starts the count again.
  assert.equal(v.offer(summaryOf(stateAt(200), "r4"), 0, true).kind, "verified");
  assert.equal((v.offer(wrong("r5"), 0, true) as { inARow: number }).inARow, 1);
});

test("while changes still arrive, an unmatched summary waits: a later state may match it", () => {
  const v = verifierThrough(100, 200);
  const s = { ...summaryOf(stateAt(203), "r1"), watermark: 199 };
  assert.deepEqual(v.offer(s, 0, false), { kind: "later" });
  v.applied(stateAt(201), 0);
  v.applied(stateAt(202), 0);
  assert.deepEqual(v.applied(stateAt(203), 0), { kind: "verified", version: 203 });
  // One that nothing matches is judged at the next idle step.
  const wrong = { ...summaryOf(stateAt(203), "r2"), sum: 7n };
  assert.deepEqual(v.offer(wrong, 0, false), { kind: "later" });
  assert.equal(v.idle(0).kind, "mismatch");
});

test("checks come every interval, ±20%, and never with interval 0", () => {
  for (const r of [0, 0.25, 0.5, 0.999]) {
    const v = new Verifier({ intervalMs: 300_000, historySize: 10, random: () => r });
    v.reset(stateAt(1), 0, true);
    const at = 300_000 * (0.8 + 0.4 * r);
    assert.equal(v.due(at - 1), false, `random ${r}`);
    assert.equal(v.due(at), true, `random ${r}`);
    assert.ok(at >= 240_000 && at < 360_000);
  }
  // Resumed from an inbox row: the first check at a random point of the first interval.
  const resumed = new Verifier({ intervalMs: 300_000, historySize: 10, random: () => 0.1 });
  resumed.reset(stateAt(1), 0, false);
  assert.equal(resumed.due(30_000), true);
  const off = new Verifier({ intervalMs: 0, historySize: 10 });
  off.reset(stateAt(1), 0, true);
  assert.equal(off.enabled, false);
  assert.equal(off.due(Number.MAX_SAFE_INTEGER), false);
});
