// The snapshot read as it streams: any split of the body gives the same records; values keep
// their text; a snapshot that does not check out is rejected; a million records pass in bounded
// memory.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";

import { parseRecord, readSnapshot, recordHash, SnapshotRejected, type SnapshotRecord } from "../src/index.js";
import { repoRoot } from "./support.js";

const vectors = JSON.parse(readFileSync(join(repoRoot, "tests", "vectors", "checksum_vectors.json"), "utf8")) as {
  sets: Record<string, { records: (string | null)[][]; hashes: string[]; checksum: string }>;
};

// A snapshot document of string/null records under columns c0, c1, ... (c0 is the key).
function document(records: (string | null)[][], checksum: string, count = records.length): string {
  const body = records
    .map((r) => "{" + r.map((v, i) => `"c${i}":` + (v === null ? "null" : JSON.stringify(v))).join(", ") + "}")
    .join(",\n ");
  return (
    `{"schemaVersion":1,"source":"s","sourceEpoch":3,"watermark":41,"stream":{"name":"CONTROL_S","seq":77},` +
    `"key":"c0","records":[${body}],"recordCount":${count},"checksum":"${checksum}"}`
  );
}

async function read(chunks: (string | Uint8Array)[], expectRecords = true) {
  const records: SnapshotRecord[] = [];
  const summary = await readSnapshot(
    (async function* () {
      yield* chunks;
    })(),
    async (_header, _columns, batch) => {
      records.push(...batch);
    },
    { expectRecords, batchSize: 2 },
  );
  return { summary, records };
}

test("every checksum vector set, as a snapshot split anywhere, reads the same", async () => {
  let used = 0;
  for (const [name, set] of Object.entries(vectors.sets)) {
    const rows = set.records.filter((r) => r.length > 0 && r[0] !== null); // c0 is the key
    if (rows.length === 0 || new Set(rows.map((r) => r.length)).size !== 1) continue;
    ++used;
    let sum = 0n;
    for (const r of rows) sum = (sum + recordHash(r)) % (1n << 64n);
    const text = document(rows, "sha256-sum64:" + sum.toString(16).padStart(16, "0"));
    const bytes = Buffer.from(text, "utf8");
    const whole = await read([bytes]);
    assert.equal(whole.records.length, rows.length, name);
    assert.deepEqual(
      whole.records.map((r) => r.values),
      rows,
      name,
    );
    assert.equal(whole.summary.watermark, 41);
    assert.equal(whole.summary.streamSeq, 77);
    assert.equal(whole.summary.epoch, 3);
    assert.equal(whole.summary.streamName, "CONTROL_S");
    for (let at = 1; at < bytes.length; at += Math.max(1, Math.floor(bytes.length / 300))) {
      const split = await read([bytes.subarray(0, at), bytes.subarray(at)]);
      assert.deepEqual(split.records, whole.records, `${name} split at byte ${at}`);
    }
  }
  assert.ok(used >= 5, `${used} vector sets`);
});

test("numbers, literals, escapes and nested values split at every byte read the same", async () => {
  const records = [
    '{"id":-12,"x":-0.25e+10,"y":3.5,"z":1E-7,"b":true,"n":null,"o":{"a": [1, -2.5e3]},"s":"a\\"b\\\\c\\u00e9"}',
    '{"id":7,"x":0,"y":-0.0,"z":12345678901234567890,"b":false,"n":null,"o":[],"s":"ключ 🔑"}',
  ];
  const texts = records.map((r) => parseRecord(r).map((f) => f.text));
  let sum = 0n;
  for (const t of texts) sum = (sum + recordHash(t)) % (1n << 64n);
  const text =
    '{"schemaVersion":1,"source":"s","sourceEpoch":1,"watermark":2,"stream":{"name":"CONTROL_S","seq":2},' +
    `"key":"id","records":[${records.join(",")}],"recordCount":2,"checksum":"sha256-sum64:` +
    sum.toString(16).padStart(16, "0") +
    '"}';
  const bytes = Buffer.from(text, "utf8");
  for (let at = 1; at < bytes.length; ++at) {
    const split = await read([bytes.subarray(0, at), bytes.subarray(at)]);
    assert.deepEqual(
      split.records.map((r) => r.values),
      texts,
      `split at byte ${at}: ${JSON.stringify(text.slice(Math.max(0, at - 10), at))}`,
    );
  }
  // One byte at a time, too.
  const bytewise = await read([...bytes].map((b) => Uint8Array.of(b)));
  assert.deepEqual(
    bytewise.records.map((r) => r.values),
    texts,
  );
});

test("values keep their text: numbers as written, objects and arrays as their JSON", () => {
  const fields = parseRecord(
    '{"id":1e3, "x":0.10,"n":-0,"big":12345678901234567890,"o":{"a": [1, 2]} ,"b":true,"f":false,"z":null,' +
      '"s":"tab\\tquote\\"é\\u00e9"}',
  );
  assert.deepEqual(
    fields.map((f) => [f.name, f.text, f.numeric]),
    [
      ["id", "1e3", true],
      ["x", "0.10", true],
      ["n", "-0", true],
      ["big", "12345678901234567890", true],
      ["o", '{"a": [1, 2]}', false],
      ["b", "true", false],
      ["f", "false", false],
      ["z", null, false],
      ["s", 'tab\tquote"éé', false],
    ],
  );
  for (const bad of ["[1]", "{", '{"a":}', '{"a":1,}', '{"a":01}', '{"a":"x\ny"}', '{"a":tru}', '{"a":1} x']) {
    assert.throws(() => parseRecord(bad), SyntaxError, bad);
  }
});

test("a snapshot that does not check out is rejected, saying why", async () => {
  const rows = [
    ["1", "a"],
    ["2", null],
  ];
  let sum = 0n;
  for (const r of rows) sum = (sum + recordHash(r)) % (1n << 64n);
  const checksum = "sha256-sum64:" + sum.toString(16).padStart(16, "0");
  const good = document(rows, checksum);
  assert.equal((await read([good])).records.length, 2);
  const cases: [string, string][] = [
    [document(rows, checksum, 3), "recordCount says 3 but 2 records came"],
    [document([["1", "a"], ["2", "b"]], checksum), "checksum says"],
    [good.slice(0, good.length - 40), "cut short"],
    [document([["1", "a"], ["2"]], checksum), "record 2 has 1 fields"],
    [good.replace('"c1":null', '"c9":null'), "fields other than the first record's"],
    [good.replace('"key":"c0"', '"key":"id"'), "snapshot key 'id' is not a field"],
    [good.replace('"records":[', '"records":[}'), "malformed snapshot"],
    [good.replace('"schemaVersion":1', '"schemaVersion":2'), "unsupported schemaVersion"],
    [good.replace('"checksum":"sha256-sum64:', '"checksum":"md5:'), "bad checksum"],
    [good.replace('"watermark":41,', ""), "lacks sourceEpoch, watermark, stream or key"],
  ];
  for (const [text, why] of cases) {
    await assert.rejects(read([text]), (e: Error) => e instanceof SnapshotRejected && e.message.includes(why), why);
  }
  // A summary has no records: its facts only.
  const summary = good.replace(/"records":\[.*\],/s, "");
  assert.equal((await read([summary], false)).summary.recordCount, 2);
  await assert.rejects(read([summary], true), /snapshot has no records/);
});

test("a 1,000,000-record snapshot streams through in bounded memory", async () => {
  const count = 1_000_000;
  let sum = 0n;
  async function* body(): AsyncGenerator<Uint8Array> {
    yield Buffer.from(
      '{"schemaVersion":1,"source":"big","sourceEpoch":1,"watermark":1000000,' +
        '"stream":{"name":"CONTROL_BIG","seq":1000000},"key":"id","records":[',
    );
    let chunk: string[] = [];
    for (let i = 1; i <= count; ++i) {
      const name = `Account ${i} with some padding to make the record longer`;
      sum = (sum + recordHash([String(i), name])) % (1n << 64n);
      chunk.push(`${i > 1 ? "," : ""}{"id":${i},"displayName":${JSON.stringify(name)}}`);
      if (chunk.length === 1000) {
        yield Buffer.from(chunk.join(""));
        chunk = [];
      }
    }
    yield Buffer.from(chunk.join("") + `],"recordCount":${count},"checksum":"`);
    yield Buffer.from("sha256-sum64:" + sum.toString(16).padStart(16, "0") + '"}');
  }
  global.gc?.();
  const before = process.memoryUsage().rss;
  let seen = 0;
  let peak = before;
  const summary = await readSnapshot(body(), async (_h, _c, batch) => {
    seen += batch.length;
    if (seen % 100_000 < batch.length) peak = Math.max(peak, process.memoryUsage().rss);
  });
  assert.equal(seen, count);
  assert.equal(summary.recordCount, count);
  const grew = (peak - before) / 1048576;
  console.log(`1,000,000 records (~80 MB of JSON): RSS grew ${grew.toFixed(1)} MiB while reading`);
  assert.ok(grew < 120, `RSS grew ${grew.toFixed(1)} MiB: the snapshot is held, not streamed`);
});
