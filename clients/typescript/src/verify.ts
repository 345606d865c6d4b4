// Verifying a replica against the source (docs/consumers.md section 4) at a cost the producer's
// database accepts. The bridge reads the whole table for a summary at most once per its
// summary_interval and serves that read, at its own watermark, until the next; so the replica
// keeps its checksum at each of its last few hundred versions and compares a summary at the
// summary's watermark, whatever version it has reached since (or once it gets there). It asks
// every few minutes (with jitter, so that pods started together spread out), or not at all.

import * as http from "node:http";
import * as https from "node:https";

import { readSnapshot, type SnapshotSummary } from "./snapshot.js";

/** A summary as the bridge served it: its facts, and which read of the table it came from. */
export interface ServedSummary extends SnapshotSummary {
  readAt: string; // Outbox-Summary-Read-At: the read's start, which names it ("" from an older bridge)
  freshForMs: number; // Outbox-Summary-Fresh-For: until the bridge reads again (0: at the next request)
}

/** A GET of the bridge's HTTP API: the response, streaming; `signal` destroys the request and its body. */
export function get(url: string, signal?: AbortSignal): Promise<http.IncomingMessage> {
  return new Promise((resolve, reject) => {
    const lib = url.startsWith("https:") ? https : http;
    const req = lib.get(url, { timeout: 120_000, signal }, resolve);
    req.on("timeout", () => req.destroy(new Error("no answer within 120 s")));
    req.on("error", reject);
  });
}

export async function bodyText(res: http.IncomingMessage, limit = 4096): Promise<string> {
  let text = "";
  for await (const chunk of res) {
    if (text.length < limit) text += chunk.toString();
  }
  return text.slice(0, limit);
}

/** `url` for a message or a log: a user:password@ in it (the bridge behind a proxy) as ***@. */
export function shown(url: string): string {
  return url.replace(/^([A-Za-z][A-Za-z0-9+.-]*:\/\/)[^/?#@]*@/, "$1***@");
}

/** ?summary=true of `source`: the snapshot without its records. Throws `fail(message)`. */
export async function fetchSummary(
  baseUrl: string,
  source: string,
  fail: (m: string) => Error,
  signal?: AbortSignal,
): Promise<ServedSummary> {
  const url = `${baseUrl}/v1/sources/${encodeURIComponent(source)}/control-snapshot?summary=true`;
  const res = await get(url, signal).catch((e: Error) => {
    throw fail(`GET ${shown(url)}: ${e.message}`);
  });
  if (res.statusCode !== 200) throw fail(`GET ${shown(url)}: HTTP ${res.statusCode}: ${await bodyText(res)}`);
  let summary: SnapshotSummary;
  try {
    summary = await readSnapshot(res, async () => undefined, { expectRecords: false });
  } catch (e) {
    throw fail(`summary rejected: ${(e as Error).message}`);
  }
  const freshFor = Number(res.headers["outbox-summary-fresh-for"] ?? 0);
  return {
    ...summary,
    readAt: String(res.headers["outbox-summary-read-at"] ?? ""),
    freshForMs: Number.isFinite(freshFor) && freshFor > 0 ? freshFor : 0,
  };
}

/** The replica's state at one version: what a summary at that watermark must say. */
export interface VersionState {
  version: number;
  sum: bigint;
  recordCount: number;
}

/**
 * The state at each of the last `size` versions applied, oldest first. The checksum is a sum
 * over records (order-independent), so the state after each version is one number and a count:
 * keeping a few hundred costs a few tens of kilobytes.
 */
export class ChecksumHistory {
  private readonly states: VersionState[] = [];
  private start = 0; // index of the oldest in `states`, a ring once full

  constructor(readonly size: number) {}

  /** Forgets everything but `state` (a bootstrap, or a resumed inbox row). */
  reset(state: VersionState): void {
    this.states.length = 0;
    this.start = 0;
    this.states.push(state);
  }

  /** The state after the next version applied. */
  push(state: VersionState): void {
    const last = this.newest();
    if (last && state.version <= last.version) return; // already there (a skipped duplicate)
    if (this.states.length < this.size) {
      this.states.push(state);
      return;
    }
    this.states[this.start] = state;
    this.start = (this.start + 1) % this.size;
  }

  oldest(): VersionState | undefined {
    return this.states.length === 0 ? undefined : this.states[this.start];
  }

  newest(): VersionState | undefined {
    return this.states.length === 0 ? undefined : this.states[(this.start + this.states.length - 1) % this.states.length];
  }

  /** The state at `version`, if kept. */
  at(version: number): VersionState | undefined {
    const oldest = this.oldest();
    if (!oldest || version < oldest.version) return undefined;
    const s = this.states[(this.start + (version - oldest.version)) % this.states.length];
    return s?.version === version ? s : undefined;
  }

  /** The first version at or after `from` whose state has `sum` and `recordCount`, or null. */
  match(from: number, sum: bigint, recordCount: number): number | null {
    for (let i = 0; i < this.states.length; ++i) {
      const s = this.states[(this.start + i) % this.states.length];
      if (s.version >= from && s.sum === sum && s.recordCount === recordCount) return s.version;
    }
    return null;
  }
}

/** What comparing a summary said. */
export type Verdict =
  | { kind: "verified"; version: number } // the replica's state at `version` is the summary's
  | { kind: "mismatch"; summary: ServedSummary; state: VersionState; inARow: number } // no state matched
  | { kind: "later" } // nothing to say yet: ahead of the replica, or before its history (asked again soon)
  | { kind: "none" };

export interface VerifierOptions {
  intervalMs: number; // between checks, jittered by ±20%; 0: never
  historySize: number;
  random?: () => number; // [0, 1), for the jitter (tests)
}

/**
 * When to ask for a summary and what it says. A summary may reflect changes committed and not
 * yet published (invariant 6): its state is then the replica's at a later version, which the
 * history finds. When none matches, only a difference that stays over a few distinct reads of the
 * table in a row means the replica is wrong (`inARow`); one read served again (the bridge keeps
 * a summary for its summary_interval) counts once.
 */
export class Verifier {
  readonly history: ChecksumHistory;
  private nextAt = 0;
  private pending: ServedSummary | null = null; // not judged yet: the replica has not got past it
  private mismatchedReads: string[] = [];

  constructor(private readonly options: VerifierOptions) {
    this.history = new ChecksumHistory(Math.max(1, options.historySize));
  }

  get enabled(): boolean {
    return this.options.intervalMs > 0;
  }

  /** Whether to ask for a summary now. */
  due(now: number): boolean {
    return this.enabled && now >= this.nextAt;
  }

  /** A summary is being asked for: the next ask is an interval away unless what it says moves it. */
  asking(now: number): void {
    this.nextAt = now + this.jittered();
  }

  /** The watermark of the summary waiting for the replica to get past it, or null. */
  get waitingFor(): number | null {
    return this.pending?.watermark ?? null;
  }

  /**
   * A new state to verify from: a bootstrap (itself checked: the next check after a whole
   * interval) or an inbox row resumed (soon, at a random point of the first interval).
   */
  reset(state: VersionState, now: number, bootstrapped: boolean): void {
    this.history.reset(state);
    this.pending = null;
    this.mismatchedReads = [];
    this.nextAt = now + (bootstrapped ? this.jittered() : this.random() * this.options.intervalMs);
  }

  /**
   * The state after a version applied. A pending summary matched by it is verified; one the
   * replica got far past (half the history: whatever it held unpublished has come since) is judged.
   */
  applied(state: VersionState, now: number): Verdict {
    this.history.push(state);
    const p = this.pending;
    if (p === null || state.version < p.watermark) return { kind: "none" };
    if (state.sum === p.sum && state.recordCount === p.recordCount) {
      this.pending = null;
      return this.verified(state.version, now);
    }
    if (state.version < p.watermark + this.history.size / 2) return { kind: "none" };
    this.pending = null;
    return this.judge(p, now);
  }

  /** A summary just read; `idle`: nothing is arriving (the replica is caught up). */
  offer(summary: ServedSummary, now: number, idle: boolean): Verdict {
    const newest = this.history.newest() as VersionState;
    const oldest = this.history.oldest() as VersionState;
    if (summary.watermark < oldest.version) {
      // Read before the oldest state kept: ask again once the bridge reads again.
      this.pending = null;
      this.soon(summary, now);
      return { kind: "later" };
    }
    this.pending = summary;
    // Ahead of the replica, or not matched while changes still arrive: compared as they do (a
    // replica that stops getting them asks again within STALL_MS, which shows it the stall).
    this.nextAt = now + Math.min(this.jittered(), 30_000 + this.random() * 5_000);
    if (summary.watermark > newest.version) return { kind: "later" };
    const at = this.history.match(summary.watermark, summary.sum, summary.recordCount);
    if (at !== null) {
      this.pending = null;
      return this.verified(at, now);
    }
    return idle ? this.idle(now) : { kind: "later" };
  }

  /** Nothing arrives (the replica is caught up): a pending summary it has reached is judged now. */
  idle(now: number): Verdict {
    const p = this.pending;
    const newest = this.history.newest() as VersionState;
    if (p === null || newest.version < p.watermark) return { kind: "none" };
    this.pending = null;
    return this.judge(p, now);
  }

  // Against every state kept since the summary's watermark.
  private judge(summary: ServedSummary, now: number): Verdict {
    const at = this.history.match(summary.watermark, summary.sum, summary.recordCount);
    if (at !== null) return this.verified(at, now);
    if (summary.readAt === "" || !this.mismatchedReads.includes(summary.readAt)) this.mismatchedReads.push(summary.readAt);
    this.soon(summary, now);
    return {
      kind: "mismatch",
      summary,
      state: this.history.at(summary.watermark) ?? (this.history.newest() as VersionState),
      inARow: this.mismatchedReads.length,
    };
  }

  private verified(version: number, now: number): Verdict {
    this.mismatchedReads = [];
    this.nextAt = now + this.jittered();
    return { kind: "verified", version };
  }

  // Once the bridge reads the table again (and a little after, so that pods asking at that
  // moment share the read), but no later than the regular check.
  private soon(summary: ServedSummary, now: number): void {
    this.nextAt = now + Math.min(summary.freshForMs + 100 + this.random() * 1000, this.jittered());
  }

  private jittered(): number {
    return this.options.intervalMs * (0.8 + 0.4 * this.random());
  }

  private random(): number {
    return (this.options.random ?? Math.random)();
  }
}
