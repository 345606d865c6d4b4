// A bootstrap's download (docs/consumers.md section 2): the snapshot streamed into the store in
// batches, its count and checksum checked at the end, and only then committed. `signal` stops it
// anywhere: the HTTP request is destroyed and the store's half-written bootstrap aborted. With a
// spool, the body goes to a file at the network's pace first: the bridge's consistent read on
// the producer's database ends when the download does, not when a slow store has loaded it all.

import { mkdtemp, open, rm, type FileHandle } from "node:fs/promises";
import { join } from "node:path";
import { pipeline } from "node:stream/promises";

import { readSnapshot, type SnapshotSummary } from "./snapshot.js";
import type { Bootstrap, InboxRow, ReplicaStore } from "./store.js";
import type { NumberPolicy } from "./typed.js";
import { bodyText, get, shown } from "./verify.js";
import { RetryableError } from "./replica_events.js";

export interface Download {
  url: string; // the bridge's base URL
  source: string;
  store: ReplicaStore;
  batchSize: number;
  numbers: NumberPolicy;
  signal: AbortSignal;
  spool?: string; // a directory: the body is written to a file in it, then loaded from there
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
    throw new RetryableError(`GET ${shown(url)}: ${e.message}`);
  });
  if (res.statusCode !== 200) {
    throw new RetryableError(`GET ${shown(url)}: HTTP ${res.statusCode}: ${await bodyText(res)}`);
  }
  let writer: FileHandle | null = null;
  let reader: FileHandle | null = null;
  let body: AsyncIterable<Uint8Array | string> & { destroy(): void } = res;
  try {
    if (d.spool) {
      // Opened to write and to read, then its name removed at once: the file lives as long as
      // these handles, so a process killed meanwhile (SIGKILL, the OOM killer) leaves nothing in
      // the spool. Each stream closes its handle at its end.
      const dir = await mkdtemp(join(d.spool, "outbox-snapshot-"));
      try {
        writer = await open(join(dir, "snapshot.json"), "w");
        reader = await open(join(dir, "snapshot.json"), "r");
      } finally {
        await rm(dir, { recursive: true, force: true });
      }
      await pipeline(res, writer.createWriteStream(), { signal: d.signal });
      body = reader.createReadStream({ highWaterMark: 256 * 1024 });
    }
    return await load(d, body);
  } finally {
    res.destroy();
    await writer?.close(); // closing a closed FileHandle does nothing
    await reader?.close();
  }
}

async function load(d: Download, body: AsyncIterable<Uint8Array | string> & { destroy(): void }): Promise<InboxRow> {
  let writing: Bootstrap | null = null;
  let summary: SnapshotSummary;
  const stop = () => body.destroy();
  d.signal.addEventListener("abort", stop);
  try {
    summary = await readSnapshot(
      body,
      async (header, columns, batch) => {
        // The signal destroys the body, but the batches of a chunk already read still come here.
        if (d.signal.aborted) throw d.signal.reason;
        writing ??= await d.store.beginBootstrap(d.source, header);
        await writing.records(columns, batch);
      },
      { batchSize: d.batchSize, numbers: d.numbers },
    );
    writing ??= await d.store.beginBootstrap(d.source, summary);
  } catch (e) {
    body.destroy();
    await (writing as Bootstrap | null)?.abort().catch(() => undefined);
    throw d.signal.aborted ? d.signal.reason : e;
  } finally {
    d.signal.removeEventListener("abort", stop);
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
