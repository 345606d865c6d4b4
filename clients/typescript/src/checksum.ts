// The snapshot checksum (docs/consumers.md section 4): order-independent, kept current change by
// change. A record is its values in the snapshot's column order, each a value's text or null.

import { createHash } from "node:crypto";

export type RecordValues = ReadonlyArray<string | null>;

const MOD = 1n << 64n;

/** The record's canonical bytes: per value 0x00 for null, else 0x01, the UTF-8 length as 4-byte
 * big-endian, then the UTF-8 bytes. */
export function canonical(record: RecordValues): Buffer {
  const parts: Buffer[] = [];
  for (const value of record) {
    if (value === null) {
      parts.push(Buffer.from([0]));
      continue;
    }
    const bytes = Buffer.from(value, "utf8");
    const head = Buffer.alloc(5);
    head[0] = 1;
    head.writeUInt32BE(bytes.length, 1);
    parts.push(head, bytes);
  }
  return Buffer.concat(parts);
}

/** h(record): the first 8 bytes of SHA-256(canonical(record)) as a big-endian unsigned 64-bit. */
export function recordHash(record: RecordValues): bigint {
  return createHash("sha256").update(canonical(record)).digest().readBigUInt64BE(0);
}

/** A running sum of record hashes, mod 2^64. */
export class Checksum {
  private sum = 0n;

  static parse(text: string): Checksum {
    const match = /^sha256-sum64:([0-9a-f]{16})$/.exec(text);
    if (!match) throw new Error(`not a sha256-sum64 checksum: ${JSON.stringify(text)}`);
    const c = new Checksum();
    c.sum = BigInt("0x" + match[1]);
    return c;
  }

  add(record: RecordValues): void {
    this.sum = (this.sum + recordHash(record)) % MOD;
  }

  remove(record: RecordValues): void {
    this.sum = (this.sum - recordHash(record) + MOD) % MOD;
  }

  equals(other: Checksum): boolean {
    return this.sum === other.sum;
  }

  toString(): string {
    return "sha256-sum64:" + this.sum.toString(16).padStart(16, "0");
  }
}
