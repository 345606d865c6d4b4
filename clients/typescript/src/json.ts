// JSON values as a record's text (docs/consumers.md section 4): a number by its literal as written,
// a string unescaped, true/false, an object or array as its JSON text, null as null — what the
// C++ side reads with simdjson's raw tokens (src/snapshot/document.cpp). Written by hand: the
// checksum needs each value's text as it appears in the input, and neither JSON.parse nor the
// streaming parsers on npm give it (they turn 1e3 into 1000, or rebuild objects from tokens).

/** The text ends inside the value: more is needed (a streamed body). */
export class Incomplete extends Error {
  constructor() {
    super("the JSON text ends inside a value");
  }
}

/** A value scanned from a JSON text. */
export interface Scanned {
  end: number; // the index just after the value
  text: string | null; // its text in a record's terms; null for JSON null
  numeric: boolean; // written as a JSON number
}

/** One field of a JSON object, in a record's terms. */
export interface RecordField {
  name: string;
  text: string | null;
  numeric: boolean;
}

const NUMBER = /-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?/y;
const NUMBER_CHARS = /[-+.eE0-9]*/y;
// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u001f]/;

/** The index of the first character at or after `i` that is not JSON whitespace. */
export function skipSpace(s: string, i: number): number {
  for (; i < s.length; ++i) {
    const c = s.charCodeAt(i);
    if (c !== 0x20 && c !== 0x0a && c !== 0x0d && c !== 0x09) break;
  }
  return i;
}

function fail(s: string, i: number, what: string): never {
  throw new SyntaxError(`${what} at character ${i} (${JSON.stringify(s.slice(i, i + 20))})`);
}

/** The index just after the string literal that opens at s[i] (a '"'), and its value. */
export function scanString(s: string, i: number): { end: number; value: string } {
  let j = i + 1;
  for (;;) {
    const quote = s.indexOf('"', j);
    if (quote < 0) throw new Incomplete();
    let backslashes = 0;
    for (let k = quote - 1; k > i && s.charCodeAt(k) === 0x5c; --k) ++backslashes;
    if (backslashes % 2 === 0) {
      const literal = s.slice(i, quote + 1);
      if (!literal.includes("\\")) {
        if (CONTROL.test(literal)) fail(s, i, "a control character in a string");
        return { end: quote + 1, value: literal.slice(1, -1) };
      }
      try {
        return { end: quote + 1, value: JSON.parse(literal) as string };
      } catch {
        fail(s, i, "a malformed string");
      }
    }
    j = quote + 1;
  }
}

/** Scans the JSON value that begins at or after s[i]. `final`: no more text will follow. */
export function scanValue(s: string, i: number, final = true): Scanned {
  i = skipSpace(s, i);
  if (i >= s.length) {
    if (final) fail(s, i, "no value");
    throw new Incomplete();
  }
  const c = s[i];
  if (c === '"') {
    const { end, value } = scanString(s, i);
    return { end, text: value, numeric: false };
  }
  if (c === "{" || c === "[") {
    const end = skipComposite(s, i, final);
    return { end, text: s.slice(i, end), numeric: false };
  }
  if (c === "-" || (c >= "0" && c <= "9")) {
    // The whole run of characters a number can hold: when the text ends inside it, more may
    // follow ("-", "1.", "2e+" are prefixes of numbers), and it must all be one number.
    NUMBER_CHARS.lastIndex = i;
    const run = (NUMBER_CHARS.exec(s) as RegExpExecArray)[0];
    if (i + run.length >= s.length && !final) throw new Incomplete();
    NUMBER.lastIndex = i;
    const match = NUMBER.exec(s);
    if (!match || match[0].length !== run.length) fail(s, i, "a malformed number");
    return { end: i + run.length, text: run, numeric: true };
  }
  for (const [word, text] of [
    ["true", "true"],
    ["false", "false"],
    ["null", null],
  ] as const) {
    if (s.startsWith(word, i)) return { end: i + word.length, text, numeric: false };
    if (!final && word.startsWith(s.slice(i))) throw new Incomplete();
  }
  fail(s, i, "no JSON value");
}

/** The index just after the object or array that opens at s[i]; checks what it holds. */
function skipComposite(s: string, i: number, final: boolean): number {
  const close = s[i] === "{" ? "}" : "]";
  let j = skipSpace(s, i + 1);
  if (j >= s.length) throw new Incomplete();
  if (s[j] === close) return j + 1;
  for (;;) {
    if (close === "}") {
      if (s[j] !== '"') fail(s, j, "an object key expected");
      j = skipSpace(s, scanString(s, j).end);
      if (j >= s.length) throw new Incomplete();
      if (s[j] !== ":") fail(s, j, "':' expected");
      ++j;
    }
    j = skipSpace(s, scanValue(s, j, false).end);
    if (j >= s.length) throw new Incomplete();
    if (s[j] === close) return j + 1;
    if (s[j] !== ",") fail(s, j, `',' or '${close}' expected`);
    j = skipSpace(s, j + 1);
    if (j >= s.length) {
      if (final) fail(s, j, "a value expected");
      throw new Incomplete();
    }
  }
}

/** The fields of the JSON object at or after s[i], in order, and the index just after it. */
export function scanObject(s: string, i: number, final = true): { end: number; fields: RecordField[] } {
  i = skipSpace(s, i);
  if (i >= s.length) {
    if (final) fail(s, i, "no object");
    throw new Incomplete();
  }
  if (s[i] !== "{") fail(s, i, "not a JSON object");
  const fields: RecordField[] = [];
  let j = skipSpace(s, i + 1);
  if (j < s.length && s[j] === "}") return { end: j + 1, fields };
  for (;;) {
    if (j >= s.length) throw new Incomplete();
    if (s[j] !== '"') fail(s, j, "an object key expected");
    const key = scanString(s, j);
    j = skipSpace(s, key.end);
    if (j >= s.length) throw new Incomplete();
    if (s[j] !== ":") fail(s, j, "':' expected");
    const value = scanValue(s, j + 1, final);
    fields.push({ name: key.value, text: value.text, numeric: value.numeric });
    j = skipSpace(s, value.end);
    if (j >= s.length) throw new Incomplete();
    if (s[j] === "}") return { end: j + 1, fields };
    if (s[j] !== ",") fail(s, j, "',' or '}' expected");
    j = skipSpace(s, j + 1);
  }
}

/** A message body read as a record: the fields of one JSON object. Throws SyntaxError otherwise. */
export function parseRecord(json: string): RecordField[] {
  try {
    const { end, fields } = scanObject(json, 0, true);
    if (skipSpace(json, end) !== json.length) fail(json, end, "text after the object");
    return fields;
  } catch (e) {
    if (e instanceof Incomplete) throw new SyntaxError("not a JSON object (cut short)");
    throw e;
  }
}
