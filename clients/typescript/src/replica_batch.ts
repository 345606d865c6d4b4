// Batches (Replica's batchVersions): the changes that follow a version among the messages already
// received, and their way through the store, in one step when it can.

import type { JsMsg } from "nats";

import { ruleOf } from "./change.js";
import { HandlerError } from "./replica_events.js";
import type { Change, InboxRow, ReplicaStore } from "./store.js";
import type { Subscription } from "./subscription.js";

/**
 * Up to `limit` changes that follow `version` among the messages `following` already holds, read
 * by `read`; the first that does not (a gap, an epoch, a bad payload) is given back for the next
 * step. `last`: the last message taken; `from`: `from` with the columns the batch's first upsert
 * told, when the snapshot was empty (a delete before it knows none): what the rest are read with,
 * and what the store moves the row on from, as one by one.
 */
export function gather(
  following: Subscription | null,
  from: InboxRow,
  version: number,
  limit: number,
  read: (m: JsMsg, at: InboxRow) => { change: Change; from: InboxRow } | { problem: string },
): { changes: Change[]; last: JsMsg | null; from: InboxRow } {
  const changes: Change[] = [];
  let last: JsMsg | null = null;
  while (following && changes.length < limit) {
    const m = following.poll();
    if (!m) break;
    const at = { ...from, appliedVersion: version };
    const got = ruleOf(m, at).kind === "next" ? read(m, at) : null;
    if (!got || "problem" in got) {
      following.putBack(m);
      break;
    }
    changes.push(got.change);
    from = { ...from, columns: got.from.columns, numeric: got.from.numeric };
    last = m;
    version++;
  }
  return { changes, last, from };
}

/** The row after each change, or null when the store's row moved under the first. */
export async function applyAll(store: ReplicaStore, changes: Change[], from: InboxRow): Promise<InboxRow[] | null> {
  if (changes.length > 1 && store.applyBatch) return store.applyBatch(changes, from);
  const rows: InboxRow[] = [];
  for (const change of changes) {
    const next = await store.apply(change, rows[rows.length - 1] ?? from);
    if (next === null) return rows.length > 0 ? rows : null;
    rows.push(next);
  }
  return rows;
}

/**
 * Each committed change to onApplied once, after the commit, even when a call before it threw: a
 * service counting or forwarding them misses only what failed, and nothing is handed twice. Then
 * one HandlerError for those that threw.
 */
export async function tellApplied(changes: readonly Change[], onApplied: (c: Change) => void | Promise<void>): Promise<void> {
  const failed: { version: number; error: unknown }[] = [];
  for (const c of changes) {
    try {
      await onApplied(c);
    } catch (error) {
      failed.push({ version: c.version, error });
    }
  }
  if (failed.length === 0) return;
  const cause = failed[0].error;
  const versions = failed.map((f) => f.version).join(", ");
  const why = cause instanceof Error ? cause.message : String(cause);
  throw new HandlerError(`onApplied of version ${versions} (applied; not handed to it again): ${why}`, cause);
}
