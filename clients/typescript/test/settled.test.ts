// The settled stream's reactor (src/settled.ts) against the real nats-server: settled messages as
// the bridge writes them (the main message's headers, then Outbox-Settled-From, -Count, -Through
// and -Seen) are handed to the handler in stream order, one at a time, acked once it returns; a
// handler that throws gets the same change again before any later one; a reactor stopped with a
// change in hand, or a new instance of it, resumes where the durable consumer stands.
import assert from "node:assert/strict";
import { test } from "node:test";

import { connect, headers as natsHeaders, type NatsConnection } from "nats";

import { SettledReactor, type SettledChange } from "../src/index.js";
import { env, suffix, until } from "./support.js";

interface Fixture {
  nc: NatsConnection;
  stream: string;
  subject: string;
  publish(key: string, version: number, from: number, extra?: Record<string, string>): Promise<void>;
  close(): Promise<void>;
}

async function settledStream(): Promise<Fixture> {
  const nc = await connect({ servers: env("OUTBOX_TEST_NATS_URL") });
  const id = suffix();
  const stream = `RT${id.toUpperCase()}_SETTLED`;
  const subject = `rt${id}.account_settled`;
  const jsm = await nc.jetstreamManager();
  await jsm.streams.add({ name: stream, subjects: [`${subject}.>`] });
  const js = nc.jetstream();
  return {
    nc,
    stream,
    subject,
    async publish(key, version, from, extra = {}) {
      const h = natsHeaders();
      const fields: Record<string, string> = {
        "Outbox-Source": `rt${id}`,
        "Outbox-Epoch": "1",
        "Outbox-Version": String(version),
        "Outbox-Entity-Type": "account",
        "Outbox-Entity-Key": key,
        "Outbox-Op": "upsert",
        "Outbox-Settled-From": String(from),
        "Outbox-Settled-Count": String(version - from + 1),
        "Outbox-Settled-Through": String(from - 1),
        "Outbox-Settled-Seen": String(version),
        ...extra,
      };
      for (const [k, v] of Object.entries(fields)) h.set(k, v);
      await js.publish(`${subject}.account.${key}.upsert`, new TextEncoder().encode(`{"id":"${key}","v":${version}}`), {
        headers: h,
        msgID: `rt${id}:settled:${version}`,
      });
    },
    async close() {
      await jsm.streams.delete(stream).catch(() => undefined);
      await nc.close();
    },
  };
}

test("a settled change reaches the handler once, in order, with what it stands for; a new instance resumes", async () => {
  const f = await settledStream();
  try {
    for (let i = 1; i <= 5; i++) await f.publish(`k${i}`, i * 3, i * 3 - 2);
    const seen: SettledChange[] = [];
    const reactor = new SettledReactor({
      nats: f.nc,
      stream: f.stream,
      durable: "series",
      handler: (c) => {
        seen.push(c);
      },
    });
    const running = reactor.run();
    await until(() => seen.length === 5, 10_000, "five settled changes");
    reactor.close();
    await running;
    assert.deepEqual(
      seen.map((c) => [c.entityKey, c.version, c.from, c.count, c.through]),
      [1, 2, 3, 4, 5].map((i) => [`k${i}`, i * 3, i * 3 - 2, 3, i * 3 - 3]),
    );
    assert.equal(seen[0].payload, '{"id":"k1","v":3}');
    assert.equal(seen[0].op, "upsert");
    assert.equal(seen[0].entityType, "account");
    assert.equal(seen[0].redelivered, 0);
    assert.equal(seen[4].headers.get("Outbox-Settled-Seen"), "15");
    assert.equal(reactor.status().handled, 5);
    assert.equal(reactor.status().state, "stopped");

    // A second instance of the same durable consumer: only what came after.
    await f.publish("k1", 20, 16);
    const later: SettledChange[] = [];
    const again = new SettledReactor({ nats: f.nc, stream: f.stream, durable: "series", handler: (c) => void later.push(c) });
    const runningAgain = again.run();
    await until(() => later.length === 1, 10_000, "the sixth settled change");
    await new Promise((r) => setTimeout(r, 300)); // nothing else comes
    again.close();
    await runningAgain;
    assert.deepEqual(
      later.map((c) => [c.entityKey, c.version]),
      [["k1", 20]],
    );
  } finally {
    await f.close();
  }
});

test("a handler that throws gets the same change again, and no later one meanwhile", async () => {
  const f = await settledStream();
  try {
    await f.publish("a", 1, 1);
    await f.publish("b", 2, 2);
    const calls: number[] = [];
    const reactor = new SettledReactor({
      nats: f.nc,
      stream: f.stream,
      durable: "flaky",
      retryMinMs: 20,
      handler: (c) => {
        calls.push(c.version);
        if (c.version === 1 && calls.length <= 3) throw new Error("the series store is down");
      },
    });
    const running = reactor.run();
    await until(() => calls.includes(2), 10_000, "version 2 handled");
    reactor.close();
    await running;
    assert.deepEqual(calls, [1, 1, 1, 1, 2]);
    assert.equal(reactor.status().handled, 2);
    assert.equal(reactor.status().failures, 0);
    assert.equal(reactor.status().lastError?.message, "the series store is down");
  } finally {
    await f.close();
  }
});

test('onHandlerError "stop": run() rejects, and the change is handed out again to the next run', async () => {
  const f = await settledStream();
  try {
    await f.publish("a", 1, 1);
    const failing = new SettledReactor({
      nats: f.nc,
      stream: f.stream,
      durable: "strict",
      onHandlerError: "stop",
      handler: () => {
        throw new Error("bad day");
      },
    });
    await assert.rejects(failing.run(), /bad day/);
    assert.equal(failing.status().state, "failed");
    const got: SettledChange[] = [];
    const next = new SettledReactor({ nats: f.nc, stream: f.stream, durable: "strict", handler: (c) => void got.push(c) });
    const running = next.run();
    await until(() => got.length === 1, 10_000, "the change handed out again");
    next.close();
    await running;
    assert.equal(got[0].version, 1);
    assert.ok(got[0].redelivered >= 1, `redelivered ${got[0].redelivered}`);
  } finally {
    await f.close();
  }
});

test("a reactor stopped with a change in hand does not ack it: the next run gets it first", async () => {
  const f = await settledStream();
  try {
    await f.publish("a", 1, 1);
    await f.publish("b", 2, 2);
    let release: () => void = () => undefined;
    const stopping = new AbortController();
    const first = new SettledReactor({
      nats: f.nc,
      stream: f.stream,
      durable: "stopped",
      handler: (_c, signal) =>
        new Promise<void>((resolve, reject) => {
          release = resolve;
          signal.addEventListener("abort", () => reject(new Error("stopped")));
        }),
    });
    const running = first.run(stopping.signal);
    await until(() => first.status().pendingMessages !== null, 10_000, "the first change in hand");
    stopping.abort();
    await running;
    release();
    assert.equal(first.status().handled, 0);
    const got: number[] = [];
    const second = new SettledReactor({ nats: f.nc, stream: f.stream, durable: "stopped", handler: (c) => void got.push(c.version) });
    const again = second.run();
    await until(() => got.length === 2, 10_000, "both changes");
    second.close();
    await again;
    assert.deepEqual(got, [1, 2]);
  } finally {
    await f.close();
  }
});

test("a message the bridge did not write is passed over and counted; a durable of another shape is refused", async () => {
  const f = await settledStream();
  try {
    await f.nc.jetstream().publish(`${f.subject}.account.x.upsert`, new TextEncoder().encode("{}"));
    await f.publish("a", 1, 1);
    const got: number[] = [];
    const reactor = new SettledReactor({ nats: f.nc, stream: f.stream, durable: "mixed", handler: (c) => void got.push(c.version) });
    const running = reactor.run();
    await until(() => got.length === 1, 10_000, "the bridge's change");
    reactor.close();
    await running;
    assert.equal(reactor.status().unreadable, 1);
    const other = new SettledReactor({
      nats: f.nc,
      stream: f.stream,
      durable: "mixed",
      filterSubject: `${f.subject}.account.>`,
      handler: () => undefined,
    });
    await assert.rejects(other.run(), /consumer mixed of stream .* exists with filter_subject/);
  } finally {
    await f.close();
  }
});
