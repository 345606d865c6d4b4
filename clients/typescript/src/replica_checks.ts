// The Replica's state and its checks while it follows (docs/consumers.md sections 3 and 4):
// verifying against ?summary=true, a stream that can no longer give what comes next, a
// subscription that stopped delivering; and what it tells (lines, the logger, events).
// replica.ts builds the Replica on it: bootstrap, follow, apply, the lifecycle.

import type { JetStreamClient } from "nats";

import { monotonicMs } from "./clock.js";
import type { NatsOptions } from "./nats_options.js";
import {
  EventHub,
  logTo,
  RetryableError,
  type BootstrapReason,
  type LogLevel,
  type ReplicaEvents,
  type ReplicaLogger,
  type ReplicaState,
  type ReplicaStatus,
} from "./replica_events.js";
import type { Change, Fields, InboxRow, ReplicaStore } from "./store.js";
import type { NumberPolicy } from "./typed.js";
import { MemoryStore } from "./store.js";
import { streamProblem, type StreamProblem } from "./subscription.js";
import { fetchSummary, Verifier, type Verdict, type VersionState } from "./verify.js";

/** `T`: the record's type, by field name (Change<T>.record). */
export interface ReplicaOptions<T = Fields> {
  url: string; // the bridge's base URL, e.g. http://127.0.0.1:8080
  source: string;
  nats: NatsOptions;
  store?: ReplicaStore; // default: a MemoryStore
  verifyIntervalMs?: number; // between checks against ?summary=true, ±20% (default 300000); 0: never
  verifyHistory?: number; // versions whose checksum is kept to compare a summary at (default 500)
  // Distinct reads of the table that differ, in a row, before a bootstrap (default 3): a summary
  // may reflect unpublished changes.
  mismatchesBeforeRebootstrap?: number;
  report?: (line: string) => void; // one line per state change, "[source] ..."
  logger?: ReplicaLogger; // the same lines with their facts as fields, by level (pino's shape)
  onApplied?: (change: Change<T>) => void | Promise<void>; // after the store applied it
  numbers?: NumberPolicy; // how a JSON number reads in `record` (typed.ts; default "auto")
  // What a HandlerError (the store's handler or onApplied threw) does: "retry" (the default)
  // retries with backoff as for any failure; "stop" makes run() reject with it, but for the
  // handler's database's passing trouble (a deadlock, a lock wait timeout, a lost connection).
  onHandlerError?: "retry" | "stop";
  snapshotBatch?: number; // records handed to the store at a time (default 1000)
  // Bytes of messages pulled ahead of the store (nats-server's count; default 1 MiB, at least the
  // server's max_payload): the bound on what waits in memory for a slow store.
  bufferBytes?: number;
  // A directory (e.g. os.tmpdir()): a bootstrap downloads the snapshot to a file there first, then
  // loads it, so a slow store does not hold the bridge's read of the producer's database open.
  spool?: string;
  // Versions applied in one step of the store (applyBatch: one transaction, one conditional
  // UPDATE of the inbox row in MysqlInbox), taken from what has already arrived (default 1).
  batchVersions?: number;
  // One active pod per source: only the holder of a lease in the store (MysqlInbox: a row of
  // outbox_inbox_lease, on the database's clock) follows the stream; the others wait, in state
  // "standby", and one takes over within ttlMs of the holder's end (at once after its close()),
  // or of its failing for longer than ttlMs (a failing holder gives the lease up).
  lease?: { holder?: string; ttlMs?: number }; // default holder: host, pid and a random part; ttl 15 s
}

export interface ReplicaCounters {
  bootstraps: number;
  rejectedSnapshots: number;
  gaps: number;
  epochChanges: number;
  lostStreams: number; // the stream missing, or no longer holding what the inbox row follows
  applied: number;
  skippedDuplicates: number;
  verifications: number;
  mismatches: number;
}

export const formatChecksum = (sum: bigint) => "sha256-sum64:" + sum.toString(16).padStart(16, "0");

export const stateOf = (row: InboxRow): VersionState => ({
  version: row.appliedVersion,
  sum: row.sum,
  recordCount: row.recordCount,
});

export abstract class ReplicaChecks<T = Fields> {
  readonly counters: ReplicaCounters = {
    bootstraps: 0,
    rejectedSnapshots: 0,
    gaps: 0,
    epochChanges: 0,
    lostStreams: 0,
    applied: 0,
    skippedDuplicates: 0,
    verifications: 0,
    mismatches: 0,
  };
  readonly store: ReplicaStore;

  protected readonly options: ReplicaOptions<T>;
  protected inboxRow: InboxRow | null = null;
  protected lastVerified = 0;
  protected reason: BootstrapReason = "first"; // why the next bootstrap happens
  protected static readonly STALL_MS = 30_000;
  protected readonly verifier: Verifier;
  protected readonly events: EventHub;
  // The stream a bootstrap named did not exist: followed again with backoff, and the source asked
  // every STALL_MS whether it names another (a snapshot per retry would read the table each time).
  protected awaiting: { stream: string; since: number } | null = null;
  // For status(): the state, the last failure, and the age of what waits to be applied.
  protected state: ReplicaState = "idle";
  protected lastError: { message: string; at: Date } | null = null;
  protected failures = 0;
  protected failingSince = 0;
  protected pending: number | null = null;
  protected waitingSince = 0; // publish time of the oldest change taken and not applied, at most; 0: none
  protected lastAppliedAt: Date | null = null;
  private behind: { version: number; since: number } | null = null; // the source ahead, nothing arriving
  private lastWatch = -Infinity; // monotonicMs(): the stream last asked whether it can give what comes next (STALL_MS)

  constructor(options: ReplicaOptions<T>) {
    this.options = options;
    this.store = options.store ?? new MemoryStore();
    this.verifier = new Verifier({
      intervalMs: options.verifyIntervalMs ?? 300_000,
      historySize: options.verifyHistory ?? 500,
    });
    this.events = new EventHub((level, fields, message) => this.say(message, level, fields));
  }

  /** Listens to `name`; returns what stops listening. */
  on<E extends keyof ReplicaEvents>(name: E, listener: (event: ReplicaEvents[E]) => void): () => void {
    return this.events.on(name, listener);
  }

  /** Stops what runs now: run()'s signal, or close(). */
  /** Where the replica is, for a health check. */
  status(): ReplicaStatus {
    // waitingSince is a message's publish time (the wall clock's); failingSince this process's.
    let lagMs = this.waitingSince > 0 ? Math.max(0, Date.now() - this.waitingSince) : 0;
    // Failing with nothing taken: whether the stream moved on is not known, so the lag is counted
    // from the first failure.
    if (lagMs === 0 && this.failures > 0) lagMs = monotonicMs() - this.failingSince;
    return {
      source: this.options.source,
      state: this.state,
      epoch: this.inboxRow?.epoch ?? null,
      appliedVersion: this.inboxRow?.appliedVersion ?? 0,
      lastVerifiedVersion: this.lastVerified,
      pendingMessages: this.pending,
      lagMs,
      lastAppliedAt: this.lastAppliedAt,
      lastError: this.lastError,
      failures: this.failures,
    };
  }

  protected failed(error: Error, retryInMs: number | null): void {
    if (this.failures++ === 0) this.failingSince = monotonicMs();
    this.lastError = { message: error.message, at: new Date() };
    this.state = retryInMs === null ? "failed" : "retrying";
    const line = retryInMs === null ? `${error.message}; stopping` : `${error.message}; retrying in ${retryInMs} ms`;
    this.say(line, retryInMs === null ? "error" : "warn", { err: error, retryInMs });
    this.events.emit("error", { error, retryInMs });
  }

  protected succeeded(): void {
    this.failures = 0;
    this.state = "following";
  }

  protected abstract get signal(): AbortSignal;
  protected abstract connection(): Promise<JetStreamClient>;
  protected abstract unfollow(): Promise<void>;
  abstract bootstrap(): Promise<void>;

  protected say(line: string, level: LogLevel = "info", fields: object = {}): void {
    this.options.report?.(`[${this.options.source}] ${line}`);
    logTo(this.options.logger, level, { source: this.options.source, ...fields }, line);
  }

  /** ?summary=true: the snapshot without its records. */
  protected summary() {
    return fetchSummary(this.options.url, this.options.source, (m) => new RetryableError(m), this.signal);
  }

  /** A bootstrap is needed, for `reason`: says so, counts it, and returns true. */
  protected needs(reason: BootstrapReason, line: string, fields: object = {}): true {
    this.reason = reason;
    if (reason === "epoch") this.counters.epochChanges++;
    if (reason === "stream") this.counters.lostStreams++;
    if (reason === "gap") this.counters.gaps++;
    this.say(`${line}: re-bootstrapping`, "warn", { reason, ...fields });
    return true;
  }

  // Asks ?summary=true and hands it to the verifier; true when a bootstrap is needed. `idle`:
  // nothing arrived in this step.
  protected async verify(idle: boolean): Promise<boolean> {
    this.verifier.asking(monotonicMs()); // a bridge that does not answer is asked again an interval later
    const summary = await this.summary();
    const row = this.inboxRow as InboxRow;
    if (summary.epoch !== row.epoch) {
      if (summary.epoch < row.epoch) return false;
      this.events.emit("epoch", { from: row.epoch, to: summary.epoch });
      return this.needs("epoch", `epoch changed from ${row.epoch} to ${summary.epoch}`);
    }
    if (summary.streamName !== row.streamName) {
      return this.needs("stream", `the source now publishes to stream ${summary.streamName}, not ${row.streamName}`);
    }
    if (idle && summary.watermark > row.appliedVersion) {
      // The source is ahead and nothing arrived: a stream that no longer holds the next sequence
      // will not send it (a purge or max_age on a quiet source shows no gap).
      const problem = await streamProblem(await this.connection(), row.streamName, row.streamSeq + 1);
      if (problem) return this.needs("stream", problem.why);
      if (await this.stalled(summary.watermark, row)) return false;
    }
    return this.judged(this.verifier.offer(summary, monotonicMs(), idle));
  }

  // What the verifier said, in lines, counters and events; true when a bootstrap is needed.
  protected judged(verdict: Verdict): boolean {
    if (verdict.kind === "verified") {
      this.counters.verifications++;
      const first = this.lastVerified !== verdict.version || this.counters.verifications === 1;
      this.lastVerified = verdict.version; // before the line: the CLI dumps on it
      const state = this.verifier.history.at(verdict.version) as VersionState;
      if (first) {
        const checksum = formatChecksum(state.sum);
        const event = { version: verdict.version, recordCount: state.recordCount, checksum };
        this.say(`verified at version ${verdict.version}: ${state.recordCount} records, checksum ${checksum}`, "info", event);
        this.events.emit("verified", event);
      }
      return false;
    }
    if (verdict.kind !== "mismatch") return false;
    this.counters.verifications++;
    this.counters.mismatches++;
    // A summary may reflect changes committed but not yet published (invariant 6): only a
    // difference that stays over distinct reads of the table means the replica is wrong.
    if (verdict.inARow < 2) return false;
    const limit = this.options.mismatchesBeforeRebootstrap ?? 3;
    const { summary, state } = verdict;
    const event = {
      version: state.version,
      replica: formatChecksum(state.sum),
      source: summary.checksum,
      inARow: verdict.inARow,
      rebootstrap: verdict.inARow >= limit,
    };
    const line =
      `checksum differs at version ${state.version}: replica ${event.replica} (${state.recordCount} ` +
      `records), source ${summary.checksum} (${summary.recordCount} records, watermark ${summary.watermark})`;
    this.events.emit("mismatch", event);
    if (event.rebootstrap) return this.needs("mismatch", line, event);
    this.say(`${line}; checking again`, "warn", event);
    return false;
  }

  // The source is ahead and nothing has arrived: after STALL_MS with no version applied, the
  // subscription is started again from the inbox row (nats.js can stop delivering without a word,
  // e.g. an ordered consumer that cannot be recreated). True when it was.
  private async stalled(sourceAt: number, row: InboxRow): Promise<boolean> {
    const now = monotonicMs();
    if (this.behind === null || this.behind.version !== row.appliedVersion) {
      this.behind = { version: row.appliedVersion, since: now };
      return false;
    }
    if (now - this.behind.since < ReplicaChecks.STALL_MS) return false;
    this.say(
      `nothing arrived for ${Math.round((now - this.behind.since) / 1000)} s while the source is at version ` +
        `${sourceAt}: following ${row.streamName} again from sequence ${row.streamSeq + 1}`,
      "warn",
    );
    this.behind = null;
    await this.unfollow();
    return true;
  }

  // The inbox row's stream cannot give what comes next (docs/consumers.md section 3: a reason to
  // bootstrap, as a gap is). Waiting for it would wait for ever: nats.js retries a missing
  // stream without end, and an emptied stream of a quiet source shows no gap.
  protected async streamLost(problem: StreamProblem): Promise<void> {
    const row = this.inboxRow as InboxRow;
    const awaiting = this.awaiting;
    let why = problem.why;
    if (problem.missing && awaiting?.stream === row.streamName) {
      // The snapshot named it: wait for the bridge to create it, unless the source names another.
      if (monotonicMs() - awaiting.since < ReplicaChecks.STALL_MS) {
        throw new RetryableError(`${why}: waiting for the bridge to create it`);
      }
      const summary = await this.summary();
      if (summary.streamName === row.streamName && summary.epoch <= row.epoch) {
        awaiting.since = monotonicMs();
        throw new RetryableError(`${why}, and the source still names it: waiting for the bridge to create it`);
      }
      why += summary.streamName !== row.streamName ? `; the source now publishes to stream ${summary.streamName}` : "";
    }
    this.needs("stream", why);
    await this.bootstrap();
  }

  // Every STALL_MS while nothing arrives: whether the stream can still give what comes next
  // (nats-server alone: no summary, no read of the source). True when a bootstrap is needed.
  protected async watch(now: number): Promise<boolean> {
    if (now - this.lastWatch < ReplicaChecks.STALL_MS) return false;
    this.lastWatch = now;
    const row = this.inboxRow as InboxRow;
    const problem = await streamProblem(await this.connection(), row.streamName, row.streamSeq + 1);
    return problem ? this.needs("stream", problem.why) : false;
  }
}
