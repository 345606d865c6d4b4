// Where a replica keeps what it has applied (docs/consumers.md section 5): the inbox row — the
// source's epoch, the last version applied and where to resume — changed together with the
// change it records, so a consumer stopped at any moment applies no version twice and skips none.

import { recordHash } from "./checksum.js";
import type { SnapshotHeader } from "./snapshot.js";

/** A record as the application's type: its fields by name (typed.ts says how numbers read). */
export type Fields = Record<string, unknown>;

const MOD = 1n << 64n;

/** The inbox row of one source, with what keeping the checksum needs. */
export interface InboxRow {
  epoch: number;
  appliedVersion: number;
  streamName: string;
  streamSeq: number; // the stream sequence of appliedVersion's message: resume from streamSeq + 1
  key: string; // the snapshot's key field
  columns: string[]; // the records' fields, in the snapshot's order (empty until known)
  numeric: boolean[]; // per column: written as a JSON number
  sum: bigint; // the sum of the records' hashes, mod 2^64 (the checksum)
  recordCount: number;
  generation: number; // bootstraps of this source in the store: one that happened meanwhile moves the row
}

/** One change, handed to the application with its version; `T`: its record's type. */
export interface Change<T = Fields> {
  source: string;
  epoch: number;
  version: number;
  streamSeq: number;
  subject: string;
  entityType: string;
  key: string; // Outbox-Entity-Key
  op: "upsert" | "delete";
  columns: readonly string[];
  values: (string | null)[] | null; // an upsert's record in column order; null for a delete
  payload: string; // the body as the producer built it ("" for a delete)
  /** An upsert's record by field name, decoded from `payload` when first read; null for a delete. */
  readonly record: T | null;
  headers: ReadonlyMap<string, string>; // every header of the message, e.g. traceparent
}

/** A record of a snapshot or an upsert: its key and values (their text) in column order. */
export interface ReplicaRecord {
  key: string;
  values: (string | null)[];
}

/** A record as a snapshot holds it, also by field name: `record` is decoded when first read. */
export interface SnapshotRecord<T = Fields> extends ReplicaRecord {
  readonly record: T;
}

/** A bootstrap being written: records in batches, then commit (all of it counts) or abort (none). */
export interface Bootstrap {
  records(columns: readonly string[], batch: readonly ReplicaRecord[]): Promise<void>;
  /** Makes `row` (its generation aside) and the records the store's; returns the row as stored. */
  commit(row: InboxRow): Promise<InboxRow>;
  abort(): Promise<void>;
}

/** What a Replica keeps its state in. */
export interface ReplicaStore {
  /** The source's inbox row, or null when there is none (nothing bootstrapped yet). */
  load(source: string): Promise<InboxRow | null>;
  /** Begins replacing what the store holds of `source` with a snapshot's records. */
  beginBootstrap(source: string, header: SnapshotHeader): Promise<Bootstrap>;
  /**
   * Applies `change` (change.version = from.appliedVersion + 1) and moves the inbox row on, in
   * one step: returns the new row, or null — having changed nothing — when the stored row is
   * no longer `from` (its epoch, version or generation: another consumer moved it).
   */
  apply(change: Change, from: InboxRow): Promise<InboxRow | null>;
  /**
   * Optional: applies consecutive `changes` (the first from.appliedVersion + 1) and moves the inbox
   * row on, in one step; returns the row after each change, or null — having changed nothing —
   * as apply() does. Without it, a Replica with batchVersions applies them one by one.
   */
  applyBatch?(changes: readonly Change[], from: InboxRow): Promise<InboxRow[] | null>;
  /**
   * Optional (Replica's `lease`: one active pod per source): takes or renews the lease of `source`
   * for `holder` for `ttlMs` on the store's clock, if it is free, expired or already `holder`'s;
   * true when `holder` has it.
   */
  lease?(source: string, holder: string, ttlMs: number): Promise<boolean>;
  /** Gives the lease up, if `holder` has it, for another pod to take at once. */
  releaseLease?(source: string, holder: string): Promise<void>;
}

/** The row after `change`, given the hash of the record it replaces or removes (if any). */
export function nextRow(from: InboxRow, change: Change, oldHash: bigint | null, newHash: bigint | null): InboxRow {
  let sum = from.sum;
  let recordCount = from.recordCount;
  if (oldHash !== null) {
    sum = (sum - oldHash + MOD) % MOD;
    recordCount--;
  }
  if (newHash !== null) {
    sum = (sum + newHash) % MOD;
    recordCount++;
  }
  return { ...from, appliedVersion: change.version, streamSeq: change.streamSeq, sum, recordCount };
}

/**
 * Records in memory, for caches and the CLI: a new process starts empty and bootstraps. The
 * same store handed to a new Replica in one process resumes where the last one stopped.
 */
export class MemoryStore implements ReplicaStore {
  private readonly sources = new Map<string, { row: InboxRow; records: Map<string, (string | null)[]> }>();

  /** The records of `source`, by key. */
  records(source: string): ReadonlyMap<string, (string | null)[]> {
    return this.sources.get(source)?.records ?? new Map();
  }

  async load(source: string): Promise<InboxRow | null> {
    const held = this.sources.get(source);
    return held ? { ...held.row } : null;
  }

  async beginBootstrap(source: string): Promise<Bootstrap> {
    const records = new Map<string, (string | null)[]>();
    return {
      records: async (_columns, batch) => {
        for (const r of batch) records.set(r.key, r.values);
      },
      commit: async (row) => {
        const stored = { ...row, generation: (this.sources.get(source)?.row.generation ?? 0) + 1 };
        this.sources.set(source, { row: stored, records });
        return { ...stored };
      },
      abort: async () => {
        records.clear();
      },
    };
  }

  async apply(change: Change, from: InboxRow): Promise<InboxRow | null> {
    const held = this.sources.get(change.source);
    if (
      !held ||
      held.row.epoch !== from.epoch ||
      held.row.appliedVersion !== from.appliedVersion ||
      held.row.generation !== from.generation
    ) {
      return null;
    }
    const old = held.records.get(change.key);
    const oldHash = old ? recordHash(old) : null;
    const newHash = change.values ? recordHash(change.values) : null;
    if (change.values) held.records.set(change.key, change.values);
    else held.records.delete(change.key);
    held.row = nextRow(from, change, oldHash, newHash);
    return { ...held.row };
  }
}
