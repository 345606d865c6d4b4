// The snapshot (docs/consumers.md section 2), read as it streams: records are handed on in
// batches while the body arrives, so a snapshot of millions of records needs the memory of one
// batch, and the count and checksum are checked at its end, before anything read counts.

import { StringDecoder } from "node:string_decoder";

import { recordHash } from "./checksum.js";
import { Incomplete, scanObject, scanString, scanValue, skipSpace } from "./json.js";
import type { SnapshotRecord } from "./store.js";
import { decodeJson, type NumberPolicy } from "./typed.js";

/** What the snapshot says before its records. */
export interface SnapshotHeader {
  source: string;
  epoch: number; // sourceEpoch
  watermark: number;
  streamName: string;
  streamSeq: number;
  key: string; // the record field whose text equals Outbox-Entity-Key
}

/** A whole snapshot's facts, or a summary (?summary=true). */
export interface SnapshotSummary extends SnapshotHeader {
  recordCount: number;
  checksum: string; // "sha256-sum64:<16 hex digits>"
  sum: bigint; // the checksum as a number
  columns: string[]; // from the first record; empty when there is none
  numeric: boolean[]; // per column: written as a JSON number
}

export type { SnapshotRecord } from "./store.js";

/**
 * A record read from a snapshot: its JSON text kept for `record`, decoded only when asked for.
 * Only key and values are its own enumerable fields: JSON.stringify and loggers see what they
 * saw before (a bigint in `record` would make JSON.stringify throw).
 */
class ReadRecord<T> implements SnapshotRecord<T> {
  readonly #json: string;
  readonly #numbers: NumberPolicy;
  #decoded: T | undefined;
  constructor(
    readonly key: string,
    readonly values: (string | null)[],
    json: string,
    numbers: NumberPolicy,
  ) {
    this.#json = json;
    this.#numbers = numbers;
  }
  get record(): T {
    if (this.#decoded === undefined) this.#decoded = decodeJson<T>(this.#json, this.#numbers);
    return this.#decoded;
  }
}

/** A snapshot that does not check out: it is retried, never used. */
export class SnapshotRejected extends Error {}

const CHECKSUM = /^sha256-sum64:([0-9a-f]{16})$/;
const MOD = 1n << 64n;

function u64(text: string | null, numeric: boolean, field: string): number {
  const n = numeric && text !== null && /^[0-9]+$/.test(text) ? Number(text) : NaN;
  if (!Number.isSafeInteger(n)) throw new SnapshotRejected(`${field} is not a whole number this client can hold`);
  return n;
}

type Batch = (header: SnapshotHeader, columns: string[], records: SnapshotRecord[]) => Promise<void>;

/**
 * Reads a snapshot or summary from `body` (the HTTP response's chunks), handing its records to
 * `onRecords` in batches of up to `batchSize`, and returns its facts once the count and checksum
 * match what came. Throws SnapshotRejected for a snapshot cut short, malformed or not matching.
 */
export async function readSnapshot(
  body: AsyncIterable<Uint8Array | string>,
  onRecords: Batch,
  options: { expectRecords?: boolean; batchSize?: number; numbers?: NumberPolicy } = {},
): Promise<SnapshotSummary> {
  const reader = new SnapshotReader(onRecords, options.batchSize ?? 1000, options.numbers ?? "auto");
  const decoder = new StringDecoder("utf8");
  try {
    for await (const chunk of body) {
      await reader.feed(typeof chunk === "string" ? chunk : decoder.write(Buffer.from(chunk)), false);
    }
    await reader.feed(decoder.end(), true);
  } catch (e) {
    if (e instanceof SyntaxError) throw new SnapshotRejected(`malformed snapshot (${e.message})`);
    throw e;
  }
  return reader.finish(options.expectRecords ?? true);
}

class SnapshotReader {
  private text = "";
  private at = 0;
  private state: "start" | "name" | "value" | "next" | "records" | "record" | "afterRecord" | "end" = "start";
  private name = "";
  private readonly header: Partial<SnapshotHeader> = {};
  private recordCount: number | undefined;
  private checksum: string | undefined;
  private haveRecords = false;
  private columns: string[] = [];
  private numeric: boolean[] = [];
  private keyIndex = -1;
  private count = 0;
  private sum = 0n;
  private batch: SnapshotRecord[] = [];

  constructor(
    private readonly onRecords: Batch,
    private readonly batchSize: number,
    private readonly numbers: NumberPolicy,
  ) {}

  async feed(more: string, final: boolean): Promise<void> {
    this.text = this.at > 0 ? this.text.slice(this.at) + more : this.text + more;
    this.at = 0;
    try {
      while (this.step(final)) {
        if (this.batch.length >= this.batchSize) await this.flush();
      }
    } catch (e) {
      if (!(e instanceof Incomplete)) throw e;
      if (final) throw new SnapshotRejected("snapshot cut short");
    }
    await this.flush();
  }

  finish(expectRecords: boolean): SnapshotSummary {
    if (this.state !== "end") throw new SnapshotRejected("snapshot cut short");
    if (skipSpace(this.text, this.at) !== this.text.length) throw new SnapshotRejected("text after the snapshot");
    this.requireHeader("");
    const h = this.header;
    if (this.recordCount === undefined || this.checksum === undefined) {
      throw new SnapshotRejected("snapshot cut short: no recordCount or checksum");
    }
    const match = CHECKSUM.exec(this.checksum);
    if (!match) throw new SnapshotRejected(`bad checksum '${this.checksum}'`);
    const sum = BigInt("0x" + match[1]);
    if (expectRecords) {
      if (!this.haveRecords) throw new SnapshotRejected("snapshot has no records");
      if (this.count !== this.recordCount) {
        throw new SnapshotRejected(`recordCount says ${this.recordCount} but ${this.count} records came`);
      }
      if (this.sum !== sum) {
        const computed = "sha256-sum64:" + this.sum.toString(16).padStart(16, "0");
        throw new SnapshotRejected(`checksum says ${this.checksum} but the records sum to ${computed}`);
      }
    }
    return {
      ...(h as SnapshotHeader),
      source: h.source ?? "",
      recordCount: this.recordCount,
      checksum: this.checksum,
      sum,
      columns: this.columns,
      numeric: this.numeric,
    };
  }

  private requireHeader(where: string): void {
    const h = this.header;
    if (h.epoch === undefined || h.watermark === undefined || !h.streamName || !h.key) {
      throw new SnapshotRejected(`snapshot lacks sourceEpoch, watermark, stream or key${where}`);
    }
  }

  private async flush(): Promise<void> {
    if (this.batch.length === 0) return;
    const batch = this.batch;
    this.batch = [];
    await this.onRecords(this.header as SnapshotHeader, this.columns, batch);
  }

  // Takes one step through the document; false at its end. Throws Incomplete when it needs more.
  private step(final: boolean): boolean {
    const s = this.text;
    let i = skipSpace(s, this.at);
    if (i >= s.length && this.state !== "end") throw new Incomplete();
    switch (this.state) {
      case "start":
        if (s[i] !== "{") throw new SyntaxError("not a JSON object");
        this.at = i + 1;
        this.state = "name";
        i = skipSpace(s, this.at);
        if (i >= s.length) throw new Incomplete();
        if (s[i] === "}") {
          this.at = i + 1;
          this.state = "end";
        }
        return this.state !== "end";
      case "name": {
        if (s[i] !== '"') throw new SyntaxError(`a field name expected at character ${i}`);
        const name = scanString(s, i);
        const colon = skipSpace(s, name.end);
        if (colon >= s.length) throw new Incomplete();
        if (s[colon] !== ":") throw new SyntaxError(`':' expected at character ${colon}`);
        this.name = name.value;
        this.at = colon + 1;
        this.state = this.name === "records" ? "records" : "value";
        return true;
      }
      case "value": {
        const value = scanValue(s, i, final);
        this.take(this.name, value.text, value.numeric);
        this.at = value.end;
        this.state = "next";
        return true;
      }
      case "next":
        if (s[i] === "}") {
          this.at = i + 1;
          this.state = "end";
          return false;
        }
        if (s[i] !== ",") throw new SyntaxError(`',' or '}' expected at character ${i}`);
        this.at = i + 1;
        this.state = "name";
        return true;
      case "records": {
        if (s[i] !== "[") throw new SyntaxError("records is not an array");
        this.requireHeader(" before its records");
        this.haveRecords = true;
        const j = skipSpace(s, i + 1);
        if (j >= s.length) throw new Incomplete();
        this.at = s[j] === "]" ? j + 1 : i + 1;
        this.state = s[j] === "]" ? "next" : "record";
        return true;
      }
      case "record": {
        const { end, fields } = scanObject(s, i, false);
        this.takeRecord(fields, s.slice(skipSpace(s, i), end));
        this.at = end;
        this.state = "afterRecord";
        return true;
      }
      case "afterRecord":
        if (s[i] === "]") this.state = "next";
        else if (s[i] === ",") this.state = "record";
        else throw new SyntaxError(`',' or ']' expected at character ${i}`);
        this.at = i + 1;
        return true;
      case "end":
        return false;
    }
  }

  private take(name: string, text: string | null, numeric: boolean): void {
    const h = this.header;
    switch (name) {
      case "schemaVersion":
        if (text !== "1") throw new SnapshotRejected("unsupported schemaVersion");
        break;
      case "source":
        h.source = text ?? "";
        break;
      case "sourceEpoch":
        h.epoch = u64(text, numeric, "sourceEpoch");
        break;
      case "watermark":
        h.watermark = u64(text, numeric, "watermark");
        break;
      case "stream": {
        const stream = JSON.parse(text ?? "null") as { name?: unknown; seq?: unknown } | null;
        if (typeof stream?.name !== "string") throw new SnapshotRejected("stream has no name");
        h.streamName = stream.name;
        h.streamSeq = u64(String(stream.seq ?? 0), typeof stream.seq === "number", "stream.seq");
        break;
      }
      case "key":
        h.key = text ?? "";
        break;
      case "recordCount":
        this.recordCount = u64(text, numeric, "recordCount");
        break;
      case "checksum":
        this.checksum = text ?? "";
        break;
    }
  }

  private takeRecord(fields: { name: string; text: string | null; numeric: boolean }[], json: string): void {
    if (this.count === 0) {
      this.columns = fields.map((f) => f.name);
      this.numeric = fields.map((f) => f.numeric);
      this.keyIndex = this.columns.indexOf(this.header.key as string);
      if (this.keyIndex < 0) throw new SnapshotRejected(`snapshot key '${this.header.key}' is not a field of its records`);
    } else {
      if (fields.length !== this.columns.length) {
        throw new SnapshotRejected(
          `record ${this.count + 1} has ${fields.length} fields, the first has ${this.columns.length}`,
        );
      }
      for (let c = 0; c < fields.length; ++c) {
        if (fields[c].name !== this.columns[c]) {
          throw new SnapshotRejected(`record ${this.count + 1} has fields other than the first record's`);
        }
      }
    }
    const values = fields.map((f) => f.text);
    this.sum = (this.sum + recordHash(values)) % MOD;
    this.count++;
    this.batch.push(new ReadRecord(values[this.keyIndex] ?? "", values, json, this.numbers));
  }
}
