// The client's own intervals run on a monotonic clock (src/clock.ts): a step of the wall clock
// neither holds a lease's renewal back nor brings it forward. No services: a store that counts.
import assert from "node:assert/strict";
import { test } from "node:test";

import { PodLease } from "../src/replica_lease.js";
import type { ReplicaStore } from "../src/store.js";

test("clock: a pod's lease is renewed a third of its time to live later, whatever the wall clock does", async () => {
  let asked = 0;
  const store = {
    lease: async () => {
      asked++;
      return true;
    },
    releaseLease: async () => undefined,
  } as unknown as ReplicaStore;
  const lease = new PodLease(store, "accounts", { holder: "pod-a", ttlMs: 3000 }); // renewed every second
  const wall = Date.now;
  try {
    assert.equal(await lease.held(), true);
    assert.equal(asked, 1);
    // An hour back: the renewal is still due a second after the last ask, not an hour later.
    const back = wall() - 3_600_000;
    Date.now = () => back;
    await new Promise((r) => setTimeout(r, 1100));
    assert.equal(await lease.held(), true);
    assert.equal(asked, 2);
    // A minute forward: not due for a second yet, so not asked.
    const ahead = wall() + 60_000;
    Date.now = () => ahead;
    assert.equal(await lease.held(), true);
    assert.equal(asked, 2);
  } finally {
    Date.now = wall;
  }
});
