// The consumer (docs/consumers.md): bootstraps from the snapshot, streamed; follows the stream
// from stream.seq + 1; bootstraps again on a version gap or a new epoch; keeps the checksum
// current and compares it with ?summary=true every few minutes (verify.ts); hands each change to
// its store, which applies it with the inbox row in one step. What `outbox-bridge replica` does in
// C++ (src/replica/replica.cpp), with the same lines.

import { connect, DeliverPolicy, type JetStreamClient, type JsMsg, type NatsConnection } from "nats";

import { changeOf } from "./change.js";
import { connectionOptions, type NatsOptions } from "./nats_options.js";
import { readSnapshot, SnapshotRejected, type SnapshotSummary } from "./snapshot.js";
import { bodyText, fetchSummary, get, Verifier, type Verdict, type VersionState } from "./verify.js";
import type { Bootstrap, Change, InboxRow, ReplicaStore } from "./store.js";
import { MemoryStore } from "./store.js";
import { isStreamNotFound, streamProblem, Subscription, type StreamProblem } from "./subscription.js";

export type { NatsOptions } from "./nats_options.js";

export interface ReplicaOptions {
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
  onApplied?: (change: Change) => void | Promise<void>; // after the store applied it
  snapshotBatch?: number; // records handed to the store at a time (default 1000)
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

/** A failure the replica retries (with backoff, in run()). */
export class RetryableError extends Error {}

const formatChecksum = (sum: bigint) => "sha256-sum64:" + sum.toString(16).padStart(16, "0");
const sleep = (ms: number, signal?: AbortSignal) =>
  new Promise<void>((resolve) => {
    const timer = setTimeout(resolve, ms);
    signal?.addEventListener("abort", () => {
      clearTimeout(timer);
      resolve();
    });
  });

export class Replica {
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

  private readonly options: ReplicaOptions;
  private inboxRow: InboxRow | null = null;
  private loaded = false;
  private lastVerified = 0;
  private behind: { version: number; since: number } | null = null; // the source ahead, nothing arriving
  private static readonly STALL_MS = 30_000;
  // The stream a bootstrap named did not exist: followed again with backoff, and the source asked
  // every STALL_MS whether it names another (a snapshot per retry would read the table each time).
  private awaiting: { stream: string; since: number } | null = null;
  private readonly verifier: Verifier;
  private lastWatch = 0; // the stream last asked whether it can give what comes next (STALL_MS)
  private lastProgressReport = 0;
  private reportedVersion = 0;

  private nc: NatsConnection | null = null;
  private js: JetStreamClient | null = null;
  private following: Subscription | null = null;

  constructor(options: ReplicaOptions) {
    this.options = options;
    this.store = options.store ?? new MemoryStore();
    this.verifier = new Verifier({
      intervalMs: options.verifyIntervalMs ?? 300_000,
      historySize: options.verifyHistory ?? 500,
    });
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

  /** bootstrap (or resume from the store's inbox row) then step until `signal`, retrying failures. */
  async run(signal?: AbortSignal): Promise<void> {
    let delay = 200;
    while (!signal?.aborted) {
      try {
        await this.step(200);
        delay = 200;
      } catch (e) {
        this.say(`${(e as Error).message}; retrying in ${delay} ms`);
        await this.unfollow();
        await sleep(delay, signal);
        delay = Math.min(delay * 2, 10_000);
      }
    }
  }

  /** Applies what arrives within `waitMs`; bootstraps when needed; verifies when caught up. */
  async step(waitMs: number): Promise<void> {
    if (!this.loaded) {
      this.inboxRow = await this.store.load(this.options.source);
      this.loaded = true;
      if (this.inboxRow) {
        this.lastVerified = 0;
        this.verifier.reset(stateOf(this.inboxRow), Date.now(), false);
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
    const now = Date.now();
    if (m) {
      needBootstrap = await this.applyMessage(m);
      const row = this.inboxRow;
      if (!needBootstrap && row && row.appliedVersion !== this.reportedVersion && now - this.lastProgressReport >= 1000) {
        this.say(`applied through version ${row.appliedVersion} (${row.recordCount} records)`);
        this.reportedVersion = row.appliedVersion;
        this.lastProgressReport = now;
      }
    } else {
      // Caught up: a summary the replica has now reached is judged, and the stream asked now and
      // then whether it can still give what comes next (a purge on a quiet source shows no gap).
      needBootstrap = this.judged(this.verifier.idle(now)) || (await this.watch(now));
    }
    if (!needBootstrap && this.loaded && this.inboxRow && this.verifier.due(now)) {
      needBootstrap = await this.verify(m === null);
    }
    if (needBootstrap) await this.bootstrap();
  }

  /** Fetches the snapshot, streams it into the store, checks it, and follows the stream after it. */
  async bootstrap(): Promise<void> {
    await this.unfollow();
    await this.connection(); // before the snapshot: no download while nats-server cannot be reached
    const url = `${this.options.url}/v1/sources/${encodeURIComponent(this.options.source)}/control-snapshot`;
    const res = await get(url).catch((e: Error) => {
      throw new RetryableError(`GET ${url}: ${e.message}`);
    });
    if (res.statusCode !== 200) {
      throw new RetryableError(`GET ${url}: HTTP ${res.statusCode}: ${await bodyText(res)}`);
    }
    let writing: Bootstrap | null = null;
    let summary: SnapshotSummary;
    try {
      summary = await readSnapshot(
        res,
        async (header, columns, batch) => {
          writing ??= await this.store.beginBootstrap(this.options.source, header);
          await writing.records(columns, batch);
        },
        { batchSize: this.options.snapshotBatch ?? 1000 },
      );
    } catch (e) {
      res.destroy();
      await (writing as Bootstrap | null)?.abort().catch(() => undefined);
      if (!(e instanceof SnapshotRejected)) throw e;
      this.counters.rejectedSnapshots++;
      this.say(`snapshot rejected: ${e.message}; retrying`);
      throw new RetryableError(`snapshot rejected: ${e.message}`);
    }
    writing ??= await this.store.beginBootstrap(this.options.source, summary);
    const row: InboxRow = {
      epoch: summary.epoch,
      appliedVersion: summary.watermark,
      streamName: summary.streamName,
      streamSeq: summary.streamSeq,
      key: summary.key,
      columns: summary.columns,
      numeric: summary.numeric,
      sum: summary.sum,
      recordCount: summary.recordCount,
      generation: 0,
    };
    const stored = await (writing as Bootstrap).commit(row);
    const changedEpoch = this.inboxRow !== null && this.inboxRow.epoch !== row.epoch;
    this.inboxRow = stored;
    this.loaded = true;
    this.lastVerified = row.appliedVersion;
    this.verifier.reset(stateOf(stored), Date.now(), true);
    this.counters.bootstraps++;
    const what =
      this.counters.bootstraps === 1 ? "bootstrapped" : changedEpoch ? "re-bootstrapped in a new epoch" : "re-bootstrapped";
    this.say(
      `${what}: epoch ${row.epoch}, watermark ${row.appliedVersion}, ${row.recordCount} records, checksum ` +
        `${formatChecksum(row.sum)}; following ${row.streamName} from sequence ${row.streamSeq + 1}`,
    );
    const problem = await this.follow(row.streamName, row.streamSeq + 1);
    if (problem) {
      // Missing: the bridge creates it at its next publish. Otherwise the snapshot is older than
      // the stream (read before the bridge recreated it, or before messages expired): the next
      // step bootstraps again, after run()'s backoff.
      this.awaiting = problem.missing ? { stream: row.streamName, since: Date.now() } : null;
      throw new RetryableError(`the snapshot's ${problem.why}`);
    }
  }

  /** Stops following and closes the connection to nats-server. */
  async close(): Promise<void> {
    await this.unfollow();
    const nc = this.nc;
    this.nc = null;
    this.js = null;
    await nc?.close().catch(() => undefined);
  }

  private say(line: string): void {
    this.options.report?.(`[${this.options.source}] ${line}`);
  }

  private async connection(): Promise<JetStreamClient> {
    if (this.nc && this.js && !this.nc.isClosed()) return this.js;
    const o = this.options.nats;
    try {
      this.nc = await connect(connectionOptions(o));
    } catch (e) {
      throw new RetryableError(`nats: ${(e as Error).message}`);
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
    this.following = new Subscription(consumer, this.nc as NatsConnection);
    this.awaiting = null;
    return null;
  }

  // The inbox row's stream cannot give what comes next (docs/consumers.md section 3: a reason to
  // bootstrap, as a gap is). Waiting for it would wait for ever: nats.js retries a missing
  // stream without end, and an emptied stream of a quiet source shows no gap.
  private async streamLost(problem: StreamProblem): Promise<void> {
    const row = this.inboxRow as InboxRow;
    const awaiting = this.awaiting;
    let why = problem.why;
    if (problem.missing && awaiting?.stream === row.streamName) {
      // The snapshot named it: wait for the bridge to create it, unless the source names another.
      if (Date.now() - awaiting.since < Replica.STALL_MS) {
        throw new RetryableError(`${why}: waiting for the bridge to create it`);
      }
      const summary = await this.summary();
      if (summary.streamName === row.streamName && summary.epoch <= row.epoch) {
        awaiting.since = Date.now();
        throw new RetryableError(`${why}, and the source still names it: waiting for the bridge to create it`);
      }
      why += summary.streamName !== row.streamName ? `; the source now publishes to stream ${summary.streamName}` : "";
    }
    this.counters.lostStreams++;
    this.say(`${why}: re-bootstrapping`);
    await this.bootstrap();
  }

  private async unfollow(): Promise<void> {
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
    const header = (name: string) => m.headers?.get(name) ?? "";
    const epoch = Number(header("Outbox-Epoch"));
    const version = Number(header("Outbox-Version"));
    if (!Number.isSafeInteger(epoch) || !Number.isSafeInteger(version) || epoch < 1 || version < 1) {
      // Not a message of the bridge (or a version past 2^53, which this client cannot count).
      throw new RetryableError(
        `sequence ${m.seq} of the stream has Outbox-Epoch '${header("Outbox-Epoch")}' and Outbox-Version ` +
          `'${header("Outbox-Version")}': not a change this client can apply`,
      );
    }
    if (epoch > row.epoch) {
      this.counters.epochChanges++;
      this.say(`epoch changed from ${row.epoch} to ${epoch} at version ${version}: re-bootstrapping`);
      return true;
    }
    if (epoch < row.epoch || version <= row.appliedVersion) {
      this.counters.skippedDuplicates++; // already reflected in what we have
      return false;
    }
    if (version !== row.appliedVersion + 1) {
      this.counters.gaps++;
      this.say(`gap: expected version ${row.appliedVersion + 1}, got ${version} (sequence ${m.seq}): re-bootstrapping`);
      return true;
    }
    const read = changeOf(m, this.options.source, row);
    if ("problem" in read) {
      this.say(`version ${version}: ${read.problem}: re-bootstrapping`);
      return true;
    }
    const { change, from } = read;
    const next = await this.store.apply(change, from);
    if (next === null) {
      // Another consumer of this source moved the inbox row: start again from what it holds.
      this.say(`the inbox row moved past version ${row.appliedVersion} under this consumer: reading it again`);
      this.loaded = false;
      await this.unfollow();
      return false;
    }
    this.inboxRow = next;
    this.counters.applied++;
    const judged = this.judged(this.verifier.applied(stateOf(next), Date.now()));
    await this.options.onApplied?.(change);
    return judged;
  }

  // The source is ahead and nothing has arrived: after STALL_MS with no version applied, the
  // subscription is started again from the inbox row (nats.js can stop delivering without a word,
  // e.g. an ordered consumer that cannot be recreated). True when it was.
  private async stalled(sourceAt: number, row: InboxRow): Promise<boolean> {
    const now = Date.now();
    if (this.behind === null || this.behind.version !== row.appliedVersion) {
      this.behind = { version: row.appliedVersion, since: now };
      return false;
    }
    if (now - this.behind.since < Replica.STALL_MS) return false;
    this.say(
      `nothing arrived for ${Math.round((now - this.behind.since) / 1000)} s while the source is at version ` +
        `${sourceAt}: following ${row.streamName} again from sequence ${row.streamSeq + 1}`,
    );
    this.behind = null;
    await this.unfollow();
    return true;
  }

  /** ?summary=true: the snapshot without its records. */
  private summary() {
    return fetchSummary(this.options.url, this.options.source, (m) => new RetryableError(m));
  }

  // Asks ?summary=true and hands it to the verifier; true when a bootstrap is needed. `idle`:
  // nothing arrived in this step.
  private async verify(idle: boolean): Promise<boolean> {
    this.verifier.asking(Date.now()); // a bridge that does not answer is asked again an interval later
    const summary = await this.summary();
    const row = this.inboxRow as InboxRow;
    if (summary.epoch !== row.epoch) {
      if (summary.epoch < row.epoch) return false;
      this.counters.epochChanges++;
      this.say(`epoch changed from ${row.epoch} to ${summary.epoch}: re-bootstrapping`);
      return true;
    }
    if (summary.streamName !== row.streamName) {
      this.counters.lostStreams++;
      this.say(`the source now publishes to stream ${summary.streamName}, not ${row.streamName}: re-bootstrapping`);
      return true;
    }
    if (idle && summary.watermark > row.appliedVersion) {
      // The source is ahead and nothing arrived: a stream that no longer holds the next sequence
      // will not send it (a purge or max_age on a quiet source shows no gap).
      const problem = await streamProblem(await this.connection(), row.streamName, row.streamSeq + 1);
      if (problem) {
        this.counters.lostStreams++;
        this.say(`${problem.why}: re-bootstrapping`);
        return true;
      }
      if (await this.stalled(summary.watermark, row)) return false;
    }
    return this.judged(this.verifier.offer(summary, Date.now(), idle));
  }

  // What the verifier said, in lines and counters; true when a bootstrap is needed.
  private judged(verdict: Verdict): boolean {
    if (verdict.kind === "verified") {
      this.counters.verifications++;
      const first = this.lastVerified !== verdict.version || this.counters.verifications === 1;
      this.lastVerified = verdict.version; // before the line: the CLI dumps on it
      const state = this.verifier.history.at(verdict.version) as VersionState;
      if (first) {
        const checksum = formatChecksum(state.sum);
        this.say(`verified at version ${verdict.version}: ${state.recordCount} records, checksum ${checksum}`);
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
    this.say(
      `checksum differs at version ${state.version}: replica ${formatChecksum(state.sum)} (${state.recordCount} ` +
        `records), source ${summary.checksum} (${summary.recordCount} records, watermark ${summary.watermark})` +
        (verdict.inARow >= limit ? ": re-bootstrapping" : "; checking again"),
    );
    return verdict.inARow >= limit;
  }

  // Every STALL_MS while nothing arrives: whether the stream can still give what comes next
  // (nats-server alone: no summary, no read of the source). True when a bootstrap is needed.
  private async watch(now: number): Promise<boolean> {
    if (now - this.lastWatch < Replica.STALL_MS) return false;
    this.lastWatch = now;
    const row = this.inboxRow as InboxRow;
    const problem = await streamProblem(await this.connection(), row.streamName, row.streamSeq + 1);
    if (!problem) return false;
    this.counters.lostStreams++;
    this.say(`${problem.why}: re-bootstrapping`);
    return true;
  }
}

const stateOf = (row: InboxRow): VersionState => ({
  version: row.appliedVersion,
  sum: row.sum,
  recordCount: row.recordCount,
});
