import assert from "node:assert/strict";
import { test } from "node:test";

import { escapeSubjectToken, fnv1a32, keyPartition, unescapeSubjectToken } from "../src/index.js";

// The same cases as tests/unit/subject_template_test.cpp: the two sides must agree byte for byte.
test("every bad key class escapes to one token and back exactly", () => {
  const keys = ["", "a.b", "*", ">", "a b", "tab\there", "line\nbreak", "nul\0x", "del\x7f", "50%", "%", "%41", "..",
    "a*b>c", "ключ.1", "plain-key_1", "\x01\x1f", ".".repeat(300)];
  const tokens = new Set<string>();
  for (const key of keys) {
    const token = escapeSubjectToken(key);
    assert.ok(token.length > 0 && !/[\x00-\x20\x7f.*>]/.test(token), `${JSON.stringify(key)} -> ${token}`);
    assert.equal(unescapeSubjectToken(token), key);
    tokens.add(token);
  }
  assert.equal(tokens.size, keys.length);
  assert.equal(escapeSubjectToken(""), "%");
  assert.equal(escapeSubjectToken("a.b"), "a%2Eb");
  assert.equal(escapeSubjectToken("50%"), "50%25");
  assert.equal(escapeSubjectToken("a b"), "a%20b");
  assert.equal(escapeSubjectToken("ключ"), "ключ");
});

test("a token no key escapes to is refused", () => {
  for (const token of ["", "a%", "a%4", "a%zz", "a%2e", "a%41", "a.b", "a b", "%%"]) {
    assert.equal(unescapeSubjectToken(token), undefined, token);
  }
});

test("the partition hash is FNV-1a 32 of the key's UTF-8 bytes", () => {
  assert.equal(fnv1a32(""), 0x811c9dc5);
  assert.equal(fnv1a32("a"), 0xe40c292c);
  assert.equal(fnv1a32("foobar"), 0xbf9cf968);
  assert.equal(fnv1a32("account-42"), 0x7a3b6bc5);
  assert.equal(keyPartition("account-42", 8), 5);
  assert.equal(keyPartition("foobar", 8), 0);
  assert.equal(keyPartition("ключ", 8), 1);
  assert.equal(keyPartition("anything", 1), 0);
  assert.throws(() => keyPartition("k", 0));
});
