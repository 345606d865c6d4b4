// `--dump`: the replica as `outbox-bridge replica --dump` writes it (src/replica/replica.cpp,
// Replica::dumpJson), for comparing a consumer with the database.

import type { InboxRow } from "./store.js";

const formatChecksum = (sum: bigint) => "sha256-sum64:" + sum.toString(16).padStart(16, "0");

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
