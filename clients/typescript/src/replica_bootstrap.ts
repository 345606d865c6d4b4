// A bootstrap's download (docs/consumers.md section 2): the snapshot streamed into the store in
// batches, its count and checksum checked at the end, and only then committed. `signal` stops it
// anywhere: the HTTP request is destroyed and the store's half-written bootstrap aborted.

import { readSnapshot, type SnapshotSummary } from "./snapshot.js";
import type { Bootstrap, InboxRow, ReplicaStore } from "./store.js";
import type { NumberPolicy } from "./typed.js";
import { bodyText, get } from "./verify.js";
import { RetryableError } from "./replica_events.js";

export interface Download {
  url: string; // the bridge's base URL
  source: string;
  store: ReplicaStore;
  batchSize: number;
  numbers: NumberPolicy;
  signal: AbortSignal;
}

/**
 * Loads the source's snapshot into `store` and returns the inbox row as stored. Throws
 * SnapshotRejected (nothing kept) for a snapshot that does not check out, RetryableError when
 * the bridge cannot be reached, and an AbortError when `signal` fires.
 */
export async function download(d: Download): Promise<InboxRow> {
  const url = `${d.url}/v1/sources/${encodeURIComponent(d.source)}/control-snapshot`;
  const res = await get(url, d.signal).catch((e: Error) => {
    if (d.signal.aborted) throw e;
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
        writing ??= await d.store.beginBootstrap(d.source, header);
        await writing.records(columns, batch);
      },
      { batchSize: d.batchSize, numbers: d.numbers },
    );
    writing ??= await d.store.beginBootstrap(d.source, summary);
  } catch (e) {
    res.destroy();
    await (writing as Bootstrap | null)?.abort().catch(() => undefined);
    throw e;
  }
  if (d.signal.aborted) {
    await (writing as Bootstrap).abort().catch(() => undefined);
    throw d.signal.reason;
  }
  return (writing as Bootstrap).commit({
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
  });
}

/** Resolves after `ms`, or at once when `signal` fires; leaves no listener on `signal`. */
export function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise<void>((resolve) => {
    if (signal.aborted) return resolve();
    const done = () => {
      clearTimeout(timer);
      signal.removeEventListener("abort", done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal.addEventListener("abort", done);
  });
}
