// Following a stream from a sequence: the subscription (pulled in bounded batches) and the check
// that the stream can still give that sequence (docs/consumers.md sections 2 and 3).

import type { Consumer, ConsumerMessages, JetStreamClient, JsMsg, NatsConnection, NatsError } from "nats";

/** Why a stream cannot give what a replica needs next; `missing`: it does not exist. */
export interface StreamProblem {
  missing: boolean;
  why: string;
}

const STREAM_NOT_FOUND = 10059; // JetStream's error code

export const isStreamNotFound = (e: unknown): boolean =>
  (e as NatsError | undefined)?.api_error?.err_code === STREAM_NOT_FOUND;

/**
 * Whether `stream` can give sequence `fromSeq` and what follows, which a replica that applied
 * through sequence fromSeq - 1 expects: null when it can. It cannot when it is missing (deleted,
 * or the source's stream renamed), when it begins after fromSeq (purged or expired: the messages
 * from fromSeq on are gone, whether or not later ones come), or when it ends before fromSeq - 1
 * (recreated, or its tail lost: the sequences the replica followed are not this stream's).
 */
export async function streamProblem(js: JetStreamClient, stream: string, fromSeq: number): Promise<StreamProblem | null> {
  let state;
  try {
    state = (await (await js.streams.get(stream)).info(true)).state;
  } catch (e) {
    if (isStreamNotFound(e)) return { missing: true, why: `stream ${stream} does not exist (deleted, or renamed)` };
    throw e;
  }
  if (state.first_seq > fromSeq) {
    return {
      missing: false,
      why: `stream ${stream} begins at sequence ${state.first_seq}: sequence ${fromSeq} was purged or expired`,
    };
  }
  if (state.last_seq < fromSeq - 1) {
    return {
      missing: false,
      why:
        `stream ${stream} ends at sequence ${state.last_seq}, before sequence ${fromSeq - 1} of the inbox row: ` +
        "it was recreated",
    };
  }
  return null;
}

/**
 * One subscription's messages, pulled in batches of at most `maxBytes` bytes (nats-server counts
 * them) and 100 messages: the next batch is asked for only once this one is taken, so what
 * waits in memory is bounded in bytes whatever the messages weigh; a message arrives as soon as
 * nats-server sends it. Closed, it hands out nothing more.
 */
export class Subscription {
  private readonly pending: JsMsg[] = [];
  private buffered = 0;
  private readonly maxBytes: number;
  private ended: Error | null = null;
  private closed = false;
  private wake: (() => void) | null = null;
  private taken: (() => void) | null = null;
  private batch: ConsumerMessages | null = null;

  private readonly pumped: Promise<void>;

  /** `maxBytes`: raised to the server's max_payload, or a message larger than it could never come. */
  constructor(
    private readonly consumer: Consumer,
    private readonly nc: NatsConnection,
    maxBytes = 1 << 20,
  ) {
    this.maxBytes = Math.max(maxBytes, (nc.info?.max_payload ?? 0) + 16 * 1024); // its subject and headers too
    this.pumped = this.pump().then(
      () => this.end(new Error("the subscription ended")),
      (e: Error) => this.end(e),
    );
  }

  /** The next message within `waitMs`, or null; throws when the subscription failed. */
  async next(waitMs: number): Promise<JsMsg | null> {
    if (this.pending.length === 0 && !this.ended) {
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, waitMs);
        this.wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      this.wake = null;
    }
    // nats.js stops a closed connection's pulls without a word (and an ordered consumer keeps
    // trying to recreate itself on it): a closed connection ends the subscription.
    if (this.nc.isClosed() && !this.ended) this.ended = new Error("the connection to nats-server is closed");
    const m = this.pending.shift();
    if (m) this.buffered -= m.data.length;
    if (this.pending.length === 0) {
      const taken = this.taken;
      this.taken = null;
      taken?.();
    }
    if (m) return m;
    if (this.ended) throw this.ended;
    return null;
  }

  /** A message already received, without waiting; null when none is. */
  poll(): JsMsg | null {
    const m = this.pending[0];
    if (!m) return null;
    this.pending.shift();
    this.buffered -= m.data.length;
    if (this.pending.length === 0) {
      const taken = this.taken;
      this.taken = null;
      taken?.();
    }
    return m;
  }

  /** Gives `m`, just taken, back: the next call hands it out again. */
  putBack(m: JsMsg): void {
    this.pending.unshift(m);
    this.buffered += m.data.length;
  }

  /** The bytes of the message bodies received and not yet taken. */
  get bufferedBytes(): number {
    return this.buffered;
  }

  /** Stops pulling; before the connection closes (an ordered consumer recreating itself on a
   * connection closed under it never stops trying). */
  async close(): Promise<void> {
    this.closed = true;
    this.pending.length = 0;
    this.taken?.();
    this.wake?.();
    await Promise.resolve(this.batch?.close()).catch(() => undefined);
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([this.pumped, new Promise<void>((resolve) => (timer = setTimeout(resolve, 2000)))]);
    clearTimeout(timer);
    await this.consumer.delete().catch(() => undefined);
  }

  private async pump(): Promise<void> {
    while (!this.closed) {
      // nats.js takes max_bytes or max_messages, not both: with max_bytes it asks for 100 at most.
      const batch = await this.consumer.fetch({ max_bytes: this.maxBytes, expires: 5000 });
      this.batch = batch;
      if (this.closed) {
        // Closed while the pull was being set up: close() could not see it.
        await Promise.resolve(batch.close()).catch(() => undefined);
        return;
      }
      // nats.js ends a pull bounded in bytes alone only when its counts of both messages and bytes
      // run out — at `expires` (5 s) after a batch that filled its message count: the batch is
      // over at that count (the request's, 100 in nats.js 2.29), as nats-server sends no more.
      const limit = (batch as unknown as { opts?: { max_messages?: number } }).opts?.max_messages || 100;
      let received = 0;
      for await (const m of batch) {
        if (this.closed) return;
        this.pending.push(m);
        this.buffered += m.data.length;
        this.wake?.();
        if (++received >= limit) break;
      }
      // Every message of this batch taken before the next is asked for.
      if (this.pending.length > 0 && !this.closed) await new Promise<void>((resolve) => (this.taken = resolve));
    }
  }

  private end(e: Error): void {
    if (this.closed) return;
    this.ended = e;
    this.wake?.();
  }
}
