// Subjects as the bridge makes them (docs/consumers.md section 1): the escaping of an entity key
// into one subject token, its reverse, and the partition hash of {partition:N}.

const HEX = "0123456789ABCDEF";

function mustEscape(byte: number): boolean {
  return byte <= 0x20 || byte === 0x7f || byte === 0x2e /* . */ || byte === 0x2a /* * */ ||
    byte === 0x3e /* > */ || byte === 0x25 /* % */;
}

/** The token the bridge puts in a subject for `key`: each byte 0x00-0x20, 0x7f, '.', '*', '>' and
 * '%' as '%' and two upper-case hex digits, other bytes as they are; the empty key as "%". */
export function escapeSubjectToken(key: string): string {
  if (key === "") return "%";
  const bytes = Buffer.from(key, "utf8");
  const out: number[] = [];
  for (const b of bytes) {
    if (mustEscape(b)) {
      out.push(0x25, HEX.charCodeAt(b >> 4), HEX.charCodeAt(b & 0xf));
    } else {
      out.push(b);
    }
  }
  return Buffer.from(out).toString("utf8");
}

/** The key escapeSubjectToken made `token` from, or undefined when no key escapes to it. */
export function unescapeSubjectToken(token: string): string | undefined {
  if (token === "%") return "";
  if (token === "") return undefined;
  const bytes = Buffer.from(token, "utf8");
  const out: number[] = [];
  for (let i = 0; i < bytes.length; i++) {
    const b = bytes[i];
    if (b !== 0x25) {
      if (mustEscape(b)) return undefined;
      out.push(b);
      continue;
    }
    if (i + 2 >= bytes.length) return undefined;
    const high = HEX.indexOf(String.fromCharCode(bytes[i + 1]));
    const low = HEX.indexOf(String.fromCharCode(bytes[i + 2]));
    if (high < 0 || low < 0) return undefined;
    const byte = high * 16 + low;
    if (!mustEscape(byte)) return undefined;
    out.push(byte);
    i += 2;
  }
  return Buffer.from(out).toString("utf8");
}

/** FNV-1a, 32 bits, over `bytes` (a string is taken as its UTF-8 bytes). */
export function fnv1a32(bytes: string | Uint8Array): number {
  const data = typeof bytes === "string" ? Buffer.from(bytes, "utf8") : bytes;
  let h = 0x811c9dc5;
  for (const b of data) {
    h ^= b;
    h = Math.imul(h, 16777619) >>> 0;
  }
  return h >>> 0;
}

/** The partition of {partition:N} the bridge puts `key` in. */
export function keyPartition(key: string, partitions: number): number {
  if (!Number.isInteger(partitions) || partitions < 1) throw new RangeError("partitions must be a positive integer");
  return fnv1a32(key) % partitions;
}
