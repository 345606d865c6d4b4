// A record as the application's type, by field name: the JSON object of a change's payload or a
// snapshot's record, decoded with a stated policy for numbers. The text form (json.ts) is what
// the checksum hashes; this is only the application's view of it, built when asked for.

import { scanString, skipSpace } from "./json.js";

/**
 * How a JSON number becomes a JavaScript value:
 * - "auto" (the default): an integer within ±(2^53 - 1) is a number, an integer beyond is a
 *   bigint (a BIGINT id stays exact), anything with a fraction or exponent a number (a double:
 *   a DECIMAL "12.50" is 12.5);
 * - "string": every number as its text as written ("12.50", "9007199254740993", "1e3"), for
 *   DECIMAL amounts and ids an application keeps as text;
 * - "number": every number as a double, as JSON.parse does (beyond 2^53 it is rounded).
 */
export type NumberPolicy = "auto" | "string" | "number";

const NUMBER = /-?(?:0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?/y;

function number(text: string, fraction: boolean, policy: NumberPolicy): number | bigint | string {
  if (policy === "string") return text;
  if (policy === "number" || fraction) return Number(text);
  const n = Number(text);
  return Number.isSafeInteger(n) ? n : BigInt(text);
}

function value(s: string, i: number, policy: NumberPolicy): { end: number; value: unknown } {
  i = skipSpace(s, i);
  const c = s[i];
  if (c === '"') {
    const { end, value: text } = scanString(s, i);
    return { end, value: text };
  }
  if (c === "{" || c === "[") {
    const object = c === "{";
    const out: Record<string, unknown> | unknown[] = object ? {} : [];
    let j = skipSpace(s, i + 1);
    if (s[j] === (object ? "}" : "]")) return { end: j + 1, value: out };
    for (;;) {
      let name = "";
      if (object) {
        const key = scanString(s, j);
        name = key.value;
        j = skipSpace(s, key.end) + 1; // past ':'
      }
      const v = value(s, j, policy);
      // As JSON.parse: "__proto__" is a field like any other, never the object's prototype.
      if (object) Object.defineProperty(out, name, { value: v.value, enumerable: true, writable: true, configurable: true });
      else (out as unknown[]).push(v.value);
      j = skipSpace(s, v.end);
      if (s[j] === (object ? "}" : "]")) return { end: j + 1, value: out };
      j = skipSpace(s, j + 1); // past ','
    }
  }
  if (c === "t" || c === "f" || c === "n") {
    const word = c === "t" ? "true" : c === "f" ? "false" : "null";
    return { end: i + word.length, value: c === "t" ? true : c === "f" ? false : null };
  }
  NUMBER.lastIndex = i;
  const m = NUMBER.exec(s);
  if (!m) throw new SyntaxError(`no JSON value at offset ${i}`);
  return { end: i + m[0].length, value: number(m[0], m[1] !== undefined || m[2] !== undefined, policy) };
}

/**
 * The JSON text `json` (already checked: a change's payload or a snapshot's record) as a value,
 * numbers by `policy`. A name given twice: the last one counts, as in the text's record.
 */
export function decodeJson<T = unknown>(json: string, policy: NumberPolicy = "auto"): T {
  return value(json, 0, policy).value as T;
}
