// A message of the stream as the change it carries (docs/consumers.md sections 1 and 3): its op,
// its record in the inbox row's column order, and every header, for the store and the application.

import type { JsMsg } from "nats";

import { parseRecord } from "./json.js";
import type { Change, InboxRow } from "./store.js";
import { decodeJson, type NumberPolicy } from "./typed.js";

/** What the rules of section 3 say of message `m` to a replica at `row`. */
export type Rule =
  | { kind: "unreadable"; why: string } // not a message of the bridge, or a version past 2^53
  | { kind: "epoch"; epoch: number; version: number } // a new epoch: bootstrap
  | { kind: "old" } // already reflected in the replica
  | { kind: "gap"; version: number } // a version skipped: bootstrap
  | { kind: "next" }; // row.appliedVersion + 1: apply it

export function ruleOf(m: JsMsg, row: InboxRow): Rule {
  const header = (name: string) => m.headers?.get(name) ?? "";
  const epoch = Number(header("Outbox-Epoch"));
  const version = Number(header("Outbox-Version"));
  if (!Number.isSafeInteger(epoch) || !Number.isSafeInteger(version) || epoch < 1 || version < 1) {
    return {
      kind: "unreadable",
      why:
        `sequence ${m.seq} of the stream has Outbox-Epoch '${header("Outbox-Epoch")}' and Outbox-Version ` +
        `'${header("Outbox-Version")}': not a change this client can apply`,
    };
  }
  if (epoch > row.epoch) return { kind: "epoch", epoch, version };
  if (epoch < row.epoch || version <= row.appliedVersion) return { kind: "old" };
  if (version !== row.appliedVersion + 1) return { kind: "gap", version };
  return { kind: "next" };
}

/**
 * The change `m` carries, applied on top of `row` (whose epoch and version the rules of section 3
 * have already checked): `from` is `row`, with the columns the first change tells when the
 * snapshot was empty. A payload that is not a JSON object is a `problem`.
 */
export function changeOf(
  m: JsMsg,
  source: string,
  row: InboxRow,
  numbers: NumberPolicy = "auto",
): { change: Change; from: InboxRow } | { problem: string } {
  const header = (name: string) => m.headers?.get(name) ?? "";
  const op = header("Outbox-Op") === "delete" ? "delete" : "upsert";
  const payload = m.data.length > 0 ? new TextDecoder().decode(m.data) : "";
  let from = row;
  let values: (string | null)[] | null = null;
  if (op === "upsert") {
    let fields;
    try {
      fields = parseRecord(payload);
    } catch (e) {
      return { problem: `payload is ${(e as Error).message}` };
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
  let record: Change["record"] | undefined;
  const headersOf = (): Map<string, string> => {
    headers = new Map();
    for (const [k, v] of m.headers ?? []) headers.set(k, v.join(","));
    return headers;
  };
  const change: Change = {
    source,
    epoch: Number(header("Outbox-Epoch")),
    version: Number(header("Outbox-Version")),
    streamSeq: m.seq,
    subject: m.subject,
    entityType: header("Outbox-Entity-Type"),
    key: header("Outbox-Entity-Key"),
    op,
    columns: from.columns,
    values,
    payload,
    record: null, // replaced below by a getter
    get headers() {
      return headers ?? headersOf();
    },
  };
  // Not enumerable: JSON.stringify and loggers see the change as before (a bigint would throw).
  Object.defineProperty(change, "record", {
    get: () => {
      if (record === undefined) record = values ? decodeJson<Change["record"]>(payload, numbers) : null;
      return record;
    },
    enumerable: false,
  });
  return { change, from };
}
