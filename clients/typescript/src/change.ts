// A message of the stream as the change it carries (docs/consumers.md sections 1 and 3): its op,
// its record in the inbox row's column order, and every header, for the store and the application.

import type { JsMsg } from "nats";

import { parseRecord } from "./json.js";
import type { Change, InboxRow } from "./store.js";

/**
 * The change `m` carries, applied on top of `row` (whose epoch and version the rules of section 3
 * have already checked): `from` is `row`, with the columns the first change tells when the
 * snapshot was empty. A payload that is not a JSON object is a `problem`.
 */
export function changeOf(m: JsMsg, source: string, row: InboxRow): { change: Change; from: InboxRow } | { problem: string } {
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
    get headers() {
      return headers ?? headersOf();
    },
  };
  return { change, from };
}
