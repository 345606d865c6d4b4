// A reactor on a source's settled stream (the README's "The settled stream"): a durable JetStream
// consumer that hands each settled change to the application's handler, one at a time, and acks
// it once the handler has returned. A settled message says "this entity changed, and has been
// quiet since": the handler reads the entity as it now stands and does its work (recompute a
// series, refresh a cache); it is not a replica, and the stream is not dense.

import {
  AckPolicy,
  connect,
  DeliverPolicy,
  type ConsumerConfig,
  type ConsumerMessages,
  type JetStreamManager,
  type JsMsg,
  type NatsConnection,
  type NatsError,
} from "nats";

import { connectionOptions, type NatsOptions } from "./nats_options.js";
import { sleep } from "./replica_bootstrap.js";
import { logTo, type ReplicaLogger } from "./replica_events.js";

/** One settled change: the key's latest change, standing for `count` changes from version `from`. */
export interface SettledChange {
  source: string;
  entityType: string;
  entityKey: string;
  op: "upsert" | "delete";
  epoch: number;
  /** The latest change's version on the main stream. */
  version: number;
  /** The first version this message stands for, and how many changes of the key it stands for. */
  from: number;
  count: number;
  /** Every version at or below it is settled by this message or one before it on the stream. */
  through: number;
  subject: string;
  /** The latest change's payload as the producer wrote it (JSON text; empty for a delete). */
  payload: string;
  /** Every header of the message (a repeated one joined by commas). */
  headers: Map<string, string>;
  stream: string;
  streamSeq: number;
  /** Deliveries of this message before this one (a crash after the handler, before its ack). */
  redelivered: number;
}

export interface SettledReactorOptions {
  /** nats-server, as the bridge's [nats] settings, or a connection the service owns. */
  nats: NatsOptions | NatsConnection;
  /** The settled stream: the source's `settled_stream` (default `<STREAM>_SETTLED`). */
  stream: string;
  /** The durable consumer's name: one per reactor application; its instances share it. */
  durable: string;
  /** Only the settled subjects that match (e.g. `control.account_settled.invoice.>`). */
  filterSubject?: string;
  /** The work. Returns (or resolves): the message is acked. Throws: tried again, in order. */
  handler: (change: SettledChange, signal: AbortSignal) => unknown | Promise<unknown>;
  /** "retry" (default): a handler that throws is called again with the same change after a
   * backoff, and no later change is handed out meanwhile; "stop": run() rejects with the error
   * and the change is handed out again to the next run. */
  onHandlerError?: "retry" | "stop";
  /** nats-server hands a change out again when no ack came within this (ms, default 30,000); the
   * reactor tells it the handler is still working every third of it. */
  ackWaitMs?: number;
  /** Backoff between tries of a failing handler (ms): doubles from min to max. */
  retryMinMs?: number;
  retryMaxMs?: number;
  logger?: ReplicaLogger;
}

export interface SettledReactorStatus {
  state: "idle" | "running" | "retrying" | "stopped" | "failed";
  handled: number;
  /** Handler failures in a row on the current change. */
  failures: number;
  /** Messages the stream held that the bridge did not write (no Outbox-* headers): passed over, logged. */
  unreadable: number;
  /** The consumer's own count of messages not yet handed out; null before the first. */
  pendingMessages: number | null;
  lastError: { message: string; at: Date } | null;
}

/** What `m` says, or why it is not a settled change of the bridge. */
export function settledChangeOf(m: JsMsg, stream: string): SettledChange | { problem: string } {
  const headers = new Map<string, string>();
  for (const [k, v] of m.headers ?? []) headers.set(k, v.join(","));
  const number = (name: string): number | null => {
    const text = headers.get(name) ?? "";
    const n = Number(text);
    return /^[0-9]+$/.test(text) && Number.isSafeInteger(n) ? n : null;
  };
  const epoch = number("Outbox-Epoch");
  const version = number("Outbox-Version");
  const from = number("Outbox-Settled-From");
  const count = number("Outbox-Settled-Count");
  const through = number("Outbox-Settled-Through");
  const entityKey = headers.get("Outbox-Entity-Key");
  if (epoch === null || version === null || from === null || count === null || through === null || entityKey === undefined) {
    return {
      problem:
        `sequence ${m.seq} of ${stream} lacks a numeric Outbox-Epoch, Outbox-Version, Outbox-Settled-From, ` +
        "-Count or -Through, or Outbox-Entity-Key: not a settled change of the bridge",
    };
  }
  return {
    source: headers.get("Outbox-Source") ?? "",
    entityType: headers.get("Outbox-Entity-Type") ?? "",
    entityKey,
    op: headers.get("Outbox-Op") === "delete" ? "delete" : "upsert",
    epoch,
    version,
    from,
    count,
    through,
    subject: m.subject,
    payload: new TextDecoder().decode(m.data),
    headers,
    stream,
    streamSeq: m.seq,
    redelivered: Math.max(0, m.info.redeliveryCount - 1),
  };
}

const CONSUMER_NOT_FOUND = 10014; // JetStream's error code

/**
 * Runs `handler` on every settled change of `stream`, in stream order, one at a time, through the
 * durable consumer `durable` (created when missing: explicit acks, one change in flight, so a
 * change handed out again comes before any later one). A change is acked once its handler has
 * returned and nats-server has confirmed the ack; a crash in between hands it out again, which a
 * handler that reads current state takes in its stride.
 */
export class SettledReactor {
  private readonly options: Required<Pick<SettledReactorOptions, "onHandlerError" | "ackWaitMs" | "retryMinMs" | "retryMaxMs">> &
    SettledReactorOptions;
  private readonly stopping = new AbortController();
  private messages: ConsumerMessages | null = null;
  private current: SettledReactorStatus = {
    state: "idle",
    handled: 0,
    failures: 0,
    unreadable: 0,
    pendingMessages: null,
    lastError: null,
  };

  constructor(options: SettledReactorOptions) {
    if (!options.stream) throw new Error("SettledReactor: stream is required");
    if (!/^[A-Za-z0-9_-]+$/.test(options.durable ?? "")) {
      throw new Error("SettledReactor: durable must be a name of letters, digits, '_' and '-'");
    }
    this.options = { onHandlerError: "retry", ackWaitMs: 30_000, retryMinMs: 500, retryMaxMs: 30_000, ...options };
  }

  status(): SettledReactorStatus {
    return { ...this.current };
  }

  /** Stops run() after the change in hand (a change not yet acked is handed out again). */
  close(): void {
    this.stopping.abort();
    this.messages?.stop();
  }

  /** Until `signal` aborts or close(); rejects on a handler error under onHandlerError "stop". */
  async run(signal?: AbortSignal): Promise<void> {
    const stop = () => this.close();
    signal?.addEventListener("abort", stop);
    const own = !("jetstream" in this.options.nats);
    const nc = own ? await connect(connectionOptions(this.options.nats as NatsOptions)) : (this.options.nats as NatsConnection);
    this.current.state = "running";
    try {
      const durable = await this.ensureConsumer(await nc.jetstreamManager());
      const consumer = await nc.jetstream().consumers.get(this.options.stream, durable);
      // One change in flight (the consumer's max_ack_pending is 1): ask for one at a time.
      this.messages = await consumer.consume({ max_messages: 1 });
      if (this.stopping.signal.aborted) this.messages.stop();
      for await (const m of this.messages) {
        this.current.pendingMessages = m.info.pending;
        if (!(await this.take(m))) break;
      }
      this.current.state = "stopped";
    } catch (e) {
      this.current.state = "failed";
      throw e;
    } finally {
      signal?.removeEventListener("abort", stop);
      this.messages = null;
      if (own) await nc.close();
    }
  }

  // The durable consumer, created when missing; one of another shape is refused, not changed.
  private async ensureConsumer(jsm: JetStreamManager): Promise<string> {
    const { stream, durable, filterSubject, ackWaitMs } = this.options;
    try {
      const info = await jsm.consumers.info(stream, durable);
      const c = info.config;
      const problems: string[] = [];
      if (c.ack_policy !== AckPolicy.Explicit) problems.push(`ack_policy ${c.ack_policy}, not explicit`);
      if (c.max_ack_pending !== 1) problems.push(`max_ack_pending ${c.max_ack_pending}, not 1`);
      if ((c.filter_subject ?? "") !== (filterSubject ?? "")) {
        problems.push(`filter_subject '${c.filter_subject ?? ""}', not '${filterSubject ?? ""}'`);
      }
      if (problems.length > 0) {
        throw new Error(
          `consumer ${durable} of stream ${stream} exists with ${problems.join(", ")}: delete it or choose another durable name`,
        );
      }
      return durable;
    } catch (e) {
      if ((e as NatsError | undefined)?.api_error?.err_code !== CONSUMER_NOT_FOUND) throw e;
    }
    const config: Partial<ConsumerConfig> = {
      durable_name: durable,
      ack_policy: AckPolicy.Explicit,
      deliver_policy: DeliverPolicy.All,
      max_ack_pending: 1,
      ack_wait: ackWaitMs * 1_000_000,
      ...(filterSubject ? { filter_subject: filterSubject } : {}),
    };
    await jsm.consumers.add(stream, config);
    logTo(this.options.logger, "info", { stream, durable }, `created consumer ${durable} on ${stream}`);
    return durable;
  }

  // Hands `m` to the handler until it returns, then acks it; false when run() is to end.
  private async take(m: JsMsg): Promise<boolean> {
    const { logger, stream, onHandlerError, ackWaitMs, retryMinMs, retryMaxMs } = this.options;
    const change = settledChangeOf(m, stream);
    if ("problem" in change) {
      // Not the bridge's: no handler can make sense of it, and holding it would stop every later change.
      this.current.unreadable += 1;
      logTo(logger, "error", { stream, streamSeq: m.seq }, `${change.problem}; passed over (terminated: not handed out again)`);
      m.term();
      return true;
    }
    const working = setInterval(() => m.working(), Math.max(1, Math.floor(ackWaitMs / 3)));
    try {
      for (let backoff = retryMinMs; ; backoff = Math.min(retryMaxMs, backoff * 2)) {
        if (this.stopping.signal.aborted) {
          m.nak(); // handed out again at once, to whoever runs next
          return false;
        }
        try {
          await this.options.handler(change, this.stopping.signal);
        } catch (e) {
          const error = e instanceof Error ? e : new Error(String(e));
          this.current.failures += 1;
          this.current.lastError = { message: error.message, at: new Date() };
          const fields = { stream, streamSeq: m.seq, version: change.version, entityKey: change.entityKey, err: error };
          if (onHandlerError === "stop") {
            logTo(logger, "error", fields, `the handler threw on version ${change.version}: stopping`);
            m.nak();
            this.current.state = "failed";
            throw error;
          }
          this.current.state = "retrying";
          logTo(logger, "warn", fields, `the handler threw on version ${change.version}; again in ${backoff} ms`);
          await sleep(backoff, this.stopping.signal);
          continue;
        }
        break;
      }
    } finally {
      clearInterval(working);
    }
    // The handler's work is done: the ack, confirmed, before the next change. One not confirmed
    // (a lost connection) hands the change out again after ackWaitMs, before any later one.
    try {
      await m.ackAck();
    } catch (e) {
      logTo(logger, "warn", { stream, streamSeq: m.seq, err: e }, `the ack of sequence ${m.seq} was not confirmed: ${(e as Error).message}; it may be handed out again`);
    }
    this.current.handled += 1;
    this.current.failures = 0;
    this.current.state = "running";
    return true;
  }
}
