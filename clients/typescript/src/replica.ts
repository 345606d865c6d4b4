// The consumer (docs/consumers.md): bootstraps from the snapshot, streamed; follows the stream
// from stream.seq + 1; bootstraps again on a version gap or a new epoch; keeps the checksum
// current and compares it with ?summary=true every few minutes (replica_checks.ts, verify.ts);
// hands each change to its store, which applies it with the inbox row in one step. What
// `outbox-bridge replica` does in C++ (src/replica/replica.cpp), with the same lines.

import { connect, DeliverPolicy, type JetStreamClient, type JsMsg, type NatsConnection } from "nats";

import { changeOf, ruleOf } from "./change.js";
import { monotonicMs } from "./clock.js";
import { connectionOptions } from "./nats_options.js";
import { applyAll, gather, tellApplied } from "./replica_batch.js";
import { download, sleep } from "./replica_bootstrap.js";
import { PodLease } from "./replica_lease.js";
import { formatChecksum, ReplicaChecks, stateOf, type ReplicaOptions } from "./replica_checks.js";
import { HandlerError, RetryableError, transient } from "./replica_events.js";
import { SnapshotRejected } from "./snapshot.js";
import type { Change, Fields, InboxRow } from "./store.js";
import { isStreamNotFound, streamProblem, Subscription, type StreamProblem } from "./subscription.js";

export type { NatsOptions } from "./nats_options.js";
export type { ReplicaCounters, ReplicaOptions } from "./replica_checks.js";
export { HandlerError, RetryableError } from "./replica_events.js";

/** `T`: the record's type, by field name (Change<T>.record); typed.ts states how numbers read. */
export class Replica<T = Fields> extends ReplicaChecks<T> {
  private loaded = false;
  private lastProgressReport = -Infinity; // monotonicMs(): none yet
  private reportedVersion = 0;

  private nc: NatsConnection | null = null;
  private js: JetStreamClient | null = null;
  private following: Subscription | null = null;
  private stopping = new AbortController(); // close(); a new one once it is done
  private closing: Promise<void> | null = null;
  private running: AbortSignal | null = null; // run()'s, while it runs
  private readonly podLease: PodLease | null;

  constructor(options: ReplicaOptions<T>) {
    super(options);
    this.podLease = options.lease ? new PodLease(this.store, options.source, options.lease) : null;
  }

  protected get signal(): AbortSignal {
    return this.running ?? this.stopping.signal;
  }

  /** The inbox row: epoch, applied version, checksum; null before the first bootstrap. */
  get inbox(): InboxRow | null {
    return this.inboxRow;
  }
  get appliedVersion(): number {
    return this.inboxRow?.appliedVersion ?? 0;
  }
  get lastVerifiedVersion(): number {
    return this.lastVerified;
  }

  /**
   * Bootstraps (or resumes from the store's inbox row), then steps until `signal` fires or
   * close() is called, retrying failures with backoff. Either stops a bootstrap where it is (its
   * download too). Rejects only with a HandlerError under onHandlerError: "stop".
   */
  async run(signal?: AbortSignal): Promise<void> {
    const own = new AbortController();
    const stop = () => own.abort();
    const closing = this.stopping.signal;
    // One listener on each for the whole run, removed at its end: a long outage adds none.
    signal?.addEventListener("abort", stop);
    closing.addEventListener("abort", stop);
    if (signal?.aborted || closing.aborted) own.abort();
    this.running = own.signal;
    let delay = 200;
    try {
      while (!own.signal.aborted) {
        try {
          await this.step(200);
          delay = 200;
        } catch (e) {
          if (own.signal.aborted) break;
          const error = e instanceof Error ? e : new Error(String(e));
          const stopping =
            error instanceof HandlerError && this.options.onHandlerError === "stop" && !transient(error.cause);
          this.failed(error, stopping ? null : delay);
          if (stopping) throw error;
          await this.unfollow();
          if (await this.podLease?.failing(this.failingSince, delay)) {
            this.say(`failing for longer than the lease's time to live: lease of ${this.options.source} given up`, "warn");
          }
          await sleep(delay, own.signal);
          delay = Math.min(delay * 2, 10_000);
        }
      }
    } finally {
      signal?.removeEventListener("abort", stop);
      closing.removeEventListener("abort", stop);
      this.running = null;
      if (this.state !== "failed") this.state = "stopped";
    }
  }

  /** Applies what arrives within `waitMs`; bootstraps when needed; verifies when caught up. */
  async step(waitMs: number): Promise<void> {
    if (this.signal.aborted) throw new Error("the replica is closing");
    if (this.podLease && !(await this.podLease.held())) {
      // Another pod follows the source: wait, and read the inbox row again when this one takes over.
      if (this.state !== "standby") this.say(`another pod holds the lease of ${this.options.source}: standing by`);
      await this.unfollow();
      this.loaded = false;
      this.inboxRow = null; // read again on taking over: meanwhile not this pod's to report
      this.pending = null;
      this.state = "standby";
      this.failures = 0;
      this.waitingSince = 0; // not this pod's lag to report
      return sleep(waitMs, this.signal);
    }
    if (!this.loaded) {
      this.inboxRow = await this.store.load(this.options.source);
      this.loaded = true;
      if (this.inboxRow) {
        this.lastVerified = 0;
        this.verifier.reset(stateOf(this.inboxRow), monotonicMs(), false);
        this.say(
          `resumed from the inbox: epoch ${this.inboxRow.epoch}, version ${this.inboxRow.appliedVersion}, ` +
            `${this.inboxRow.recordCount} records, checksum ${formatChecksum(this.inboxRow.sum)}`,
        );
      }
    }
    if (!this.inboxRow) return this.bootstrap();
    if (!this.following) {
      const problem = await this.follow(this.inboxRow.streamName, this.inboxRow.streamSeq + 1);
      if (problem) return this.streamLost(problem);
    }
    const m = await this.next(waitMs);
    let needBootstrap = false;
    const now = monotonicMs();
    if (m) {
      needBootstrap = await this.applyMessage(m);
      const row = this.inboxRow;
      if (!needBootstrap && row && row.appliedVersion !== this.reportedVersion && now - this.lastProgressReport >= 1000) {
        this.say(`applied through version ${row.appliedVersion} (${row.recordCount} records)`, "debug");
        this.reportedVersion = row.appliedVersion;
        this.lastProgressReport = now;
      }
    } else {
      this.waitingSince = 0; // caught up
      this.pending = this.pending === null ? null : 0;
      // Caught up: a summary the replica has now reached is judged, and the stream asked now and
      // then whether it can still give what comes next (a purge on a quiet source shows no gap).
      needBootstrap = this.judged(this.verifier.idle(now)) || (await this.watch(now));
    }
    if (!needBootstrap && this.loaded && this.inboxRow && this.verifier.due(now)) {
      needBootstrap = await this.verify(m === null);
    }
    if (needBootstrap) await this.bootstrap();
    this.succeeded();
  }

  /** Fetches the snapshot, streams it into the store, checks it, and follows the stream after it. */
  override async bootstrap(): Promise<void> {
    await this.unfollow();
    await this.connection(); // before the snapshot: no download while nats-server cannot be reached
    this.state = "bootstrapping";
    let stored: InboxRow;
    try {
      const fetch = (signal: AbortSignal) =>
        download({
          url: this.options.url,
          source: this.options.source,
          store: this.store,
          batchSize: this.options.snapshotBatch ?? 1000,
          numbers: this.options.numbers ?? "auto",
          spool: this.options.spool,
          signal,
        });
      // A bootstrap can outlast the lease: renewed while it runs, stopped if another pod took it.
      stored = await (this.podLease ? this.podLease.during(this.signal, fetch) : fetch(this.signal));
    } catch (e) {
      if (!(e instanceof SnapshotRejected)) throw e;
      this.counters.rejectedSnapshots++;
      this.say(`snapshot rejected: ${e.message}; retrying`, "warn");
      throw new RetryableError(`snapshot rejected: ${e.message}`);
    }
    const row = stored;
    const changedEpoch = this.inboxRow !== null && this.inboxRow.epoch !== row.epoch;
    this.inboxRow = stored;
    this.loaded = true;
    this.lastVerified = row.appliedVersion;
    this.verifier.reset(stateOf(stored), monotonicMs(), true);
    this.counters.bootstraps++;
    this.waitingSince = 0;
    const what =
      this.counters.bootstraps === 1 ? "bootstrapped" : changedEpoch ? "re-bootstrapped in a new epoch" : "re-bootstrapped";
    const checksum = formatChecksum(row.sum);
    const event = { epoch: row.epoch, version: row.appliedVersion, recordCount: row.recordCount, checksum, reason: this.reason };
    this.say(
      `${what}: epoch ${row.epoch}, watermark ${row.appliedVersion}, ${row.recordCount} records, checksum ` +
        `${checksum}; following ${row.streamName} from sequence ${row.streamSeq + 1}`,
      "info",
      event,
    );
    this.events.emit("bootstrapped", event);
    this.reason = "first";
    const problem = await this.follow(row.streamName, row.streamSeq + 1);
    if (problem) {
      // Missing: the bridge creates it at its next publish. Otherwise the snapshot is older than
      // the stream (read before the bridge recreated it, or before messages expired): the next
      // step bootstraps again, after run()'s backoff.
      this.awaiting = problem.missing ? { stream: row.streamName, since: monotonicMs() } : null;
      this.reason = "stream";
      throw new RetryableError(`the snapshot's ${problem.why}`);
    }
  }

  /**
   * Stops run() and any bootstrap in progress, stops following and closes the connection to
   * nats-server. Calls while it closes get the same promise; after it, a call does nothing more,
   * and step() or run() connects again and goes on from the inbox row.
   */
  close(): Promise<void> {
    this.closing ??= (async () => {
      this.stopping.abort();
      await this.unfollow();
      const nc = this.nc;
      this.nc = null;
      this.js = null;
      await nc?.close().catch(() => undefined);
      await this.podLease?.release().catch(() => undefined); // another pod takes over at once
      if (this.state !== "failed") this.state = "stopped";
      this.stopping = new AbortController();
      this.closing = null;
    })();
    return this.closing;
  }

  protected async connection(): Promise<JetStreamClient> {
    const signal = this.signal; // a close() while connecting leaves this connection to us
    if (signal.aborted) throw new Error("the replica is closing");
    if (this.nc && this.js && !this.nc.isClosed()) return this.js;
    const o = this.options.nats;
    try {
      this.nc = await connect(connectionOptions(o));
    } catch (e) {
      throw new RetryableError(`nats: ${(e as Error).message}`);
    }
    if (signal.aborted) {
      await this.nc.close().catch(() => undefined);
      this.nc = null;
      throw new Error("the replica is closing");
    }
    this.js = this.nc.jetstream(o.jsDomain ? { domain: o.jsDomain } : {});
    return this.js;
  }

  /** Follows `stream` from `fromSeq`, or says why it cannot give that sequence. */
  private async follow(stream: string, fromSeq: number): Promise<StreamProblem | null> {
    const js = await this.connection();
    const problem = await streamProblem(js, stream, fromSeq);
    if (problem) return problem;
    let consumer;
    try {
      consumer = await js.consumers.get(stream, { deliver_policy: DeliverPolicy.StartSequence, opt_start_seq: fromSeq });
    } catch (e) {
      if (isStreamNotFound(e)) return { missing: true, why: `stream ${stream} does not exist (deleted, or renamed)` };
      throw e;
    }
    this.following = new Subscription(consumer, this.nc as NatsConnection, this.options.bufferBytes);
    this.awaiting = null;
    this.state = "following";
    return null;
  }

  protected async unfollow(): Promise<void> {
    const following = this.following;
    this.following = null;
    await following?.close();
  }

  private async next(waitMs: number): Promise<JsMsg | null> {
    const following = this.following as Subscription;
    try {
      return await following.next(waitMs);
    } catch (e) {
      await this.unfollow();
      throw new RetryableError(`following the stream: ${(e as Error).message}`);
    }
  }

  // The rules of docs/consumers.md section 3; true when a bootstrap is needed.
  private async applyMessage(m: JsMsg): Promise<boolean> {
    const row = this.inboxRow as InboxRow;
    this.pending = m.info.pending;
    const published = Math.floor(m.info.timestampNanos / 1e6);
    if (this.waitingSince === 0) this.waitingSince = published;
    const rule = ruleOf(m, row);
    if (rule.kind === "unreadable") throw new RetryableError(rule.why);
    if (rule.kind === "epoch") {
      this.events.emit("epoch", { from: row.epoch, to: rule.epoch });
      return this.needs("epoch", `epoch changed from ${row.epoch} to ${rule.epoch} at version ${rule.version}`);
    }
    if (rule.kind === "old") {
      this.counters.skippedDuplicates++; // already reflected in what we have
      return false;
    }
    if (rule.kind === "gap") {
      const expected = row.appliedVersion + 1;
      this.events.emit("gap", { expected, got: rule.version, streamSeq: m.seq });
      return this.needs("gap", `gap: expected version ${expected}, got ${rule.version} (sequence ${m.seq})`);
    }
    const read = changeOf(m, this.options.source, row, this.options.numbers);
    if ("problem" in read) return this.needs("payload", `version ${row.appliedVersion + 1}: ${read.problem}`);
    const { change, from } = read;
    const batch = gather(this.following, from, change.version, (this.options.batchVersions ?? 1) - 1, (n, at) =>
      changeOf(n, this.options.source, at, this.options.numbers),
    );
    const changes = [change, ...batch.changes];
    const rows = await applyAll(this.store, changes, batch.from);
    if (rows === null) {
      // Another consumer of this source moved the inbox row: start again from what it holds.
      this.say(`the inbox row moved past version ${row.appliedVersion} under this consumer: reading it again`, "warn");
      this.loaded = false;
      await this.unfollow();
      return false;
    }
    this.inboxRow = rows[rows.length - 1];
    if (rows.length < changes.length) {
      // A store without applyBatch: the row moved under a later change of the batch. The rest,
      // taken from the subscription already, is read again from the stream after the row.
      this.say(`the inbox row moved past version ${this.inboxRow.appliedVersion} under this consumer: reading it again`, "warn");
      this.loaded = false;
      await this.unfollow();
    }
    this.counters.applied += rows.length;
    this.lastAppliedAt = new Date();
    // What waits next was published at or after the last one applied.
    const info = batch.last?.info ?? m.info;
    this.pending = info.pending;
    this.waitingSince = info.pending > 0 ? Math.floor(info.timestampNanos / 1e6) : 0;
    let judged = false;
    for (const next of rows) judged = this.judged(this.verifier.applied(stateOf(next), monotonicMs())) || judged;
    const onApplied = this.options.onApplied;
    if (onApplied) await tellApplied(changes.slice(0, rows.length), (c) => onApplied(c as Change<T>));
    return judged;
  }
}
