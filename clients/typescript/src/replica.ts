// The consumer (docs/consumers.md): bootstraps from the snapshot, streamed; follows the stream
// from stream.seq + 1; bootstraps again on a version gap or a new epoch; keeps the checksum
// current and compares it with ?summary=true when caught up; hands each change to its store,
// which applies it with the inbox row in one step. What `outbox-bridge replica` does in C++
// (src/replica/replica.cpp), with the same lines.

import { readFileSync } from "node:fs";
import http from "node:http";
import https from "node:https";

import {
  connect,
  credsAuthenticator,
  DeliverPolicy,
  nkeyAuthenticator,
  type ConnectionOptions,
  type JetStreamClient,
  type JsMsg,
  type NatsConnection,
} from "nats";

import { parseRecord } from "./json.js";
import { readSnapshot, SnapshotRejected, type SnapshotSummary } from "./snapshot.js";
import type { Bootstrap, Change, InboxRow, ReplicaStore } from "./store.js";
import { MemoryStore } from "./store.js";
import { isStreamNotFound, streamProblem, Subscription, type StreamProblem } from "./subscription.js";
import { ipIdentityCheck } from "./tls_identity.js";

/** How to reach nats-server: the bridge's [nats] settings. */
export interface NatsOptions {
  servers: string | string[]; // URLs, or one string of comma-separated URLs
  user?: string;
  password?: string;
  token?: string;
  credsFile?: string;
  nkeySeedFile?: string;
  tlsCa?: string;
  tlsCert?: string;
  tlsKey?: string;
  tlsServerName?: string;
  jsDomain?: string;
}

export interface ReplicaOptions {
  url: string; // the bridge's base URL, e.g. http://127.0.0.1:8080
  source: string;
  nats: NatsOptions;
  store?: ReplicaStore; // default: a MemoryStore
  verifyIntervalMs?: number; // between checks against ?summary=true while not yet verified (default 1000)
  mismatchesBeforeRebootstrap?: number; // default 3: a summary may reflect unpublished changes
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

/** A GET of the bridge's HTTP API: the response, streaming. */
function get(url: string): Promise<http.IncomingMessage> {
  return new Promise((resolve, reject) => {
    const lib = url.startsWith("https:") ? https : http;
    const req = lib.get(url, { timeout: 120_000 }, resolve);
    req.on("timeout", () => req.destroy(new Error("no answer within 120 s")));
    req.on("error", reject);
  });
}

async function bodyText(res: http.IncomingMessage, limit = 4096): Promise<string> {
  let text = "";
  for await (const chunk of res) {
    if (text.length < limit) text += chunk.toString();
  }
  return text.slice(0, limit);
}

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
  private mismatchVersion = 0;
  private mismatchCount = 0;
  private lastVerifyAttempt = 0;
  private lastProgressReport = 0;
  private reportedVersion = 0;

  private nc: NatsConnection | null = null;
  private js: JetStreamClient | null = null;
  private following: Subscription | null = null;

  constructor(options: ReplicaOptions) {
    this.options = options;
    this.store = options.store ?? new MemoryStore();
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
      // Caught up: check against the source now and then (rarely once verified).
      const every = (this.options.verifyIntervalMs ?? 1000) * (this.appliedVersion === this.lastVerified ? 30 : 1);
      if (now - this.lastVerifyAttempt >= every) needBootstrap = await this.verify();
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
    this.mismatchCount = 0;
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
    const servers = typeof o.servers === "string" ? o.servers.split(",").map((s) => s.trim()) : o.servers;
    const opts: ConnectionOptions = {
      servers,
      name: "outbox-replica",
      maxReconnectAttempts: -1,
    };
    if (o.user) {
      opts.user = o.user;
      opts.pass = o.password ?? "";
    }
    if (o.token) opts.token = o.token;
    if (o.credsFile) opts.authenticator = credsAuthenticator(readFileSync(o.credsFile));
    if (o.nkeySeedFile) {
      opts.authenticator = nkeyAuthenticator(new TextEncoder().encode(readFileSync(o.nkeySeedFile, "utf8").trim()));
    }
    if (o.tlsCa || o.tlsCert || o.tlsServerName) {
      opts.tls = {
        ...(o.tlsCa ? { caFile: o.tlsCa } : {}),
        ...(o.tlsCert ? { certFile: o.tlsCert, keyFile: o.tlsKey } : {}),
        ...(o.tlsServerName ? { servername: o.tlsServerName } : { checkServerIdentity: ipIdentityCheck(servers) }),
      } as ConnectionOptions["tls"];
    }
    try {
      this.nc = await connect(opts);
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
    const op = header("Outbox-Op") === "delete" ? "delete" : "upsert";
    const payload = m.data.length > 0 ? new TextDecoder().decode(m.data) : "";
    let from = row;
    let values: (string | null)[] | null = null;
    if (op === "upsert") {
      let fields;
      try {
        fields = parseRecord(payload);
      } catch (e) {
        this.say(`version ${version}: payload is ${(e as Error).message}: re-bootstrapping`);
        return true;
      }
      if (from.columns.length === 0) {
        // The snapshot was empty: the first change tells the columns.
        from = { ...from, columns: fields.map((f) => f.name), numeric: fields.map((f) => f.numeric) };
      }
      // A name given twice: the last one counts, as in a JSON object read into a map.
      const byName = new Map(fields.map((f) => [f.name, f.text] as const));
      values = from.columns.map((c) => byName.get(c) ?? null);
    }
    // Built only for an application that reads them: most read the record alone.
    let headers: Map<string, string> | undefined;
    const headersOf = (): Map<string, string> => {
      headers = new Map();
      for (const [k, v] of m.headers ?? []) headers.set(k, v.join(","));
      return headers;
    };
    const change: Change = {
      source: this.options.source,
      epoch,
      version,
      streamSeq: m.seq,
      subject: m.subject,
      entityType: header("Outbox-Entity-Type"),
      key: header("Outbox-Entity-Key"),
      op,
      columns: from.columns,
      values,
      payload,
      get headers() {
        return headers ?? headersOf();
      },
    };
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
    await this.options.onApplied?.(change);
    return false;
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
  private async summary(): Promise<SnapshotSummary> {
    const url = `${this.options.url}/v1/sources/${encodeURIComponent(this.options.source)}/control-snapshot?summary=true`;
    const res = await get(url).catch((e: Error) => {
      throw new RetryableError(`GET ${url}: ${e.message}`);
    });
    if (res.statusCode !== 200) throw new RetryableError(`GET ${url}: HTTP ${res.statusCode}: ${await bodyText(res)}`);
    try {
      return await readSnapshot(res, async () => undefined, { expectRecords: false });
    } catch (e) {
      throw new RetryableError(`summary rejected: ${(e as Error).message}`);
    }
  }

  // Compares with ?summary=true; true when a bootstrap is needed.
  private async verify(): Promise<boolean> {
    this.lastVerifyAttempt = Date.now();
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
    if (summary.watermark > row.appliedVersion) {
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
    if (summary.watermark !== row.appliedVersion) return false; // the watermarks have not met yet
    this.counters.verifications++;
    if (summary.sum === row.sum && summary.recordCount === row.recordCount) {
      const first = this.lastVerified !== row.appliedVersion || this.counters.verifications === 1;
      this.lastVerified = row.appliedVersion; // before the line: the CLI dumps on it
      if (first) {
        this.say(`verified at version ${row.appliedVersion}: ${row.recordCount} records, checksum ${formatChecksum(row.sum)}`);
      }
      this.mismatchCount = 0;
      return false;
    }
    this.counters.mismatches++;
    this.mismatchCount = this.mismatchVersion === row.appliedVersion ? this.mismatchCount + 1 : 1;
    this.mismatchVersion = row.appliedVersion;
    // A summary may reflect changes committed but not yet published (invariant 6): only a
    // difference that stays at the same version means the replica is wrong.
    if (this.mismatchCount < 2) return false;
    const limit = this.options.mismatchesBeforeRebootstrap ?? 3;
    this.say(
      `checksum differs at version ${row.appliedVersion}: replica ${formatChecksum(row.sum)} (${row.recordCount} ` +
        `records), source ${summary.checksum} (${summary.recordCount} records)` +
        (this.mismatchCount >= limit ? ": re-bootstrapping" : "; checking again"),
    );
    return this.mismatchCount >= limit;
  }
}

/**
 * The replica held by a MemoryStore as `outbox-bridge replica --dump` writes it: snapshot-shaped
 * JSON, records in the byte order of their keys.
 */
export function dumpJson(source: string, row: InboxRow | null, records: ReadonlyMap<string, (string | null)[]>): string {
  const keys = [...records.keys()].sort((a, b) => Buffer.compare(Buffer.from(a, "utf8"), Buffer.from(b, "utf8")));
  const columns = row?.columns ?? [];
  const numeric = row?.numeric ?? [];
  const parts: string[] = [];
  for (const key of keys) {
    const values = records.get(key) as (string | null)[];
    const fields: string[] = [];
    for (let i = 0; i < columns.length && i < values.length; ++i) {
      const v = values[i];
      fields.push(JSON.stringify(columns[i]) + ":" + (v === null ? "null" : numeric[i] ? v : JSON.stringify(v)));
    }
    parts.push("{" + fields.join(",") + "}");
  }
  return (
    `{"source":${JSON.stringify(source)},"sourceEpoch":${row?.epoch ?? 0},"appliedVersion":${row?.appliedVersion ?? 0},` +
    `"key":${JSON.stringify(row?.key ?? "")},"records":[${parts.join(",")}],"recordCount":${records.size},` +
    `"checksum":"${formatChecksum(row?.sum ?? 0n)}"}`
  );
}
