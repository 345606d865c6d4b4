// `--dump`: the replica as `outbox-bridge replica --dump` writes it (src/replica/replica.cpp,
// Replica::dumpJson), for comparing a consumer with the database.

import type { InboxRow } from "./store.js";

const formatChecksum = (sum: bigint) => "sha256-sum64:" + sum.toString(16).padStart(16, "0");

/** The dump's text up to its first record. */
export function dumpHead(source: string, row: InboxRow | null): string {
  return (
    `{"source":${JSON.stringify(source)},"sourceEpoch":${row?.epoch ?? 0},"appliedVersion":${row?.appliedVersion ?? 0},` +
    `"key":${JSON.stringify(row?.key ?? "")},"records":[`
  );
}

/** One record of the dump: its fields in the row's column order. */
export function dumpRecord(row: InboxRow | null, values: readonly (string | null)[]): string {
  const columns = row?.columns ?? [];
  const numeric = row?.numeric ?? [];
  const fields: string[] = [];
  for (let i = 0; i < columns.length && i < values.length; ++i) {
    const v = values[i];
    fields.push(JSON.stringify(columns[i]) + ":" + (v === null ? "null" : numeric[i] ? v : JSON.stringify(v)));
  }
  return "{" + fields.join(",") + "}";
}

/** The dump's text after its last record. */
export function dumpTail(row: InboxRow | null, recordCount: number): string {
  return `],"recordCount":${recordCount},"checksum":"${formatChecksum(row?.sum ?? 0n)}"}`;
}

/**
 * The replica held by a MemoryStore as `outbox-bridge replica --dump` writes it: snapshot-shaped
 * JSON, records in the byte order of their keys. (CliInbox.writeDump streams the same from MySQL.)
 */
export function dumpJson(source: string, row: InboxRow | null, records: ReadonlyMap<string, (string | null)[]>): string {
  const keys = [...records.keys()].sort((a, b) => Buffer.compare(Buffer.from(a, "utf8"), Buffer.from(b, "utf8")));
  const parts = keys.map((key) => dumpRecord(row, records.get(key) as (string | null)[]));
  return dumpHead(source, row) + parts.join(",") + dumpTail(row, records.size);
}
