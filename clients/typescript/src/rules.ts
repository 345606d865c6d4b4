// What the bridge refuses as poison (src/relay/poison.cpp, src/relay/row_headers.cpp), checked
// where the row is written so that a producer learns it at once, not from a halted source.

const TOKEN_CHAR = /^[A-Za-z0-9!#$%&'*+\-.^_`|~]+$/;
const CONTROL = /[\x00-\x08\x0a-\x1f\x7f]/;
// A UTF-16 surrogate without its other half: it has no UTF-8 form, so a driver sends it as U+FFFD
// and "a\uD800" and "a\uFFFD" would become one key. (String.prototype.isWellFormed is Node 20's.)
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** Whether `text` holds a lone surrogate (it would reach the database as U+FFFD). */
export function hasLoneSurrogate(text: string): boolean {
  return LONE_SURROGATE.test(text);
}

/** Why `key` cannot be an entity key (the Outbox-Entity-Key header could not carry it). */
export function keyProblem(key: string): string | undefined {
  if (key === "") return "entity_key is empty";
  if (/^[ \t]|[ \t]$/.test(key)) return "entity_key begins or ends with a space or tab (NATS clients trim them)";
  if (CONTROL.test(key)) return "entity_key holds a control character";
  if (hasLoneSurrogate(key)) return "entity_key holds a lone surrogate (it would be stored as U+FFFD, merging two keys)";
  return undefined;
}

/** Why `headers` cannot travel as message headers; an empty value adds no header. */
export function headersProblem(headers: Record<string, string>): string | undefined {
  const seen = new Set<string>();
  for (const [name, value] of Object.entries(headers)) {
    const lower = name.toLowerCase();
    if (!TOKEN_CHAR.test(name)) return `headers: '${name}' is not a header name`;
    if (lower.startsWith("nats-") || lower.startsWith("outbox-") || lower === "content-type") {
      return `headers: '${name}' is reserved (the bridge sets Nats-*, Outbox-* and Content-Type)`;
    }
    if (lower === "status" || lower === "description") {
      return `headers: '${name}' is reserved (NATS clients read it as a server status)`;
    }
    if (seen.has(lower)) return `headers: '${name}' is given twice`;
    seen.add(lower);
    if (typeof value !== "string") return `headers: the value of '${name}' is not a string`;
    if (CONTROL.test(value)) return `headers: the value of '${name}' holds a control character`;
    if (hasLoneSurrogate(value)) return `headers: the value of '${name}' holds a lone surrogate (it would be sent as U+FFFD)`;
    if (/^[ \t]|[ \t]$/.test(value)) return `headers: the value of '${name}' begins or ends with a space or tab`;
  }
  return undefined;
}
