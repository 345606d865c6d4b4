// What waits in memory for a slow store is bounded in bytes, not in messages: a stream of large
// messages on the stack's nats-server, followed by a Subscription nobody takes from.
import assert from "node:assert/strict";
import { test } from "node:test";

import { connect, DeliverPolicy } from "nats";

import { Subscription } from "../src/subscription.js";
import { env, suffix, until } from "./support.js";

test("a subscription holds at most its byte bound (and one message) of large messages", async () => {
  const nc = await connect({ servers: env("OUTBOX_TEST_NATS_URL") });
  const stream = "BUFFER_" + suffix().toUpperCase();
  const jsm = await nc.jetstreamManager();
  await jsm.streams.add({ name: stream, subjects: [`${stream}.>`] });
  let sub: Subscription | null = null;
  try {
    const js = nc.jetstream();
    const body = new Uint8Array(200 * 1024).fill(0x61); // 200 KiB each: 100 of them are 20 MiB
    for (let i = 0; i < 100; ++i) await js.publish(`${stream}.x`, body);
    const consumer = await js.consumers.get(stream, { deliver_policy: DeliverPolicy.StartSequence, opt_start_seq: 1 });
    const bound = 2 * 1024 * 1024;
    sub = new Subscription(consumer, nc, bound);
    const s = sub;
    await until(() => s.bufferedBytes > 0, 10_000, "the first messages");
    await new Promise((resolve) => setTimeout(resolve, 1000)); // time to pull more, were it allowed
    const held = s.bufferedBytes;
    assert.ok(held <= bound, `${held} bytes held, over the bound of ${bound}`);
    // Taken, the next are pulled: all 100 arrive, in order.
    let taken = 0;
    let max = held;
    while (taken < 100) {
      const m = await s.next(5000);
      assert.ok(m, `message ${taken + 1} did not come`);
      assert.equal(m.seq, ++taken);
      max = Math.max(max, s.bufferedBytes);
    }
    assert.ok(max <= bound, `${max} bytes held at most`);
  } finally {
    await sub?.close();
    await jsm.streams.delete(stream).catch(() => undefined);
    await nc.close();
  }
});
