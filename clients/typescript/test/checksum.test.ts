import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";

import { Checksum, recordHash } from "../src/index.js";

// tests/vectors/checksum_vectors.json of the repository: the same vectors the C++ side passes.
const here = dirname(fileURLToPath(import.meta.url));
const vectorsPath = join(here, "..", "..", "..", "..", "tests", "vectors", "checksum_vectors.json");
const vectors = JSON.parse(readFileSync(vectorsPath, "utf8")) as {
  sets: Record<string, { records: (string | null)[][]; hashes: string[]; checksum: string }>;
};

test("every vector set: each record's hash and the sum", () => {
  assert.ok(Object.keys(vectors.sets).length >= 5);
  for (const [name, set] of Object.entries(vectors.sets)) {
    const sum = new Checksum();
    set.records.forEach((record, i) => {
      assert.equal(recordHash(record).toString(16).padStart(16, "0"), set.hashes[i], `${name} record ${i}`);
      sum.add(record);
    });
    assert.equal(sum.toString(), set.checksum, name);
    assert.ok(Checksum.parse(set.checksum).equals(sum), name);
  }
});

test("kept current change by change: order-independent, removal undoes addition", () => {
  const a = new Checksum();
  const b = new Checksum();
  const records = [["1", "Acme"], ["2", null], ["3", ""]];
  records.forEach((r) => a.add(r));
  [...records].reverse().forEach((r) => b.add(r));
  assert.equal(a.toString(), b.toString());
  a.remove(["2", null]);
  a.add(["2", "Globex"]);
  a.remove(["2", "Globex"]);
  a.add(["2", null]);
  assert.equal(a.toString(), b.toString());
  records.forEach((r) => a.remove(r));
  assert.equal(a.toString(), "sha256-sum64:0000000000000000");
});

test("a malformed checksum is refused", () => {
  for (const bad of ["", "sha256-sum64:", "sha256-sum64:00AB12CD34EF5678", "md5:0000000000000000"]) {
    assert.throws(() => Checksum.parse(bad));
  }
});
