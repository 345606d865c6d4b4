import assert from "node:assert/strict";
import { test } from "node:test";

import { hasLoneSurrogate, headersProblem, keyProblem } from "../src/index.js";

// The same rules as the bridge's poison check (tests/unit/relay_poison_test.cpp, poison_rules).
test("keys the Outbox-Entity-Key header could not carry", () => {
  assert.match(keyProblem("") ?? "", /empty/);
  assert.match(keyProblem(" 42") ?? "", /begins or ends/);
  assert.match(keyProblem("42\t") ?? "", /begins or ends/);
  assert.match(keyProblem("x\x01y") ?? "", /control character/);
  assert.equal(keyProblem("4 2"), undefined);
  assert.equal(keyProblem("tab\there"), undefined);
  assert.equal(keyProblem("ключ.1"), undefined);
  // A lone surrogate has no UTF-8 form: drivers send U+FFFD, so it would merge with that key.
  assert.equal(Buffer.from("a\uD800").toString(), Buffer.from("a\uFFFD").toString());
  assert.match(keyProblem("a\uD800") ?? "", /lone surrogate/);
  assert.match(keyProblem("\uDC00a") ?? "", /lone surrogate/);
  assert.match(keyProblem("a\uDBFF\uDBFF\uDC00") ?? "", /lone surrogate/);
  assert.equal(keyProblem("emoji \uD83D\uDE00"), undefined, "a pair is one character");
  assert.equal(hasLoneSurrogate("\uD83D\uDE00\uD83D\uDE00"), false);
});

test("headers that could not travel", () => {
  assert.equal(headersProblem({ traceparent: "00-1-2-01", "x-tenant": "acme", tracestate: "" }), undefined);
  assert.match(headersProblem({ "Nats-Msg-Id": "x" }) ?? "", /reserved/);
  assert.match(headersProblem({ "outbox-version": "9" }) ?? "", /reserved/);
  assert.match(headersProblem({ "content-type": "text/plain" }) ?? "", /reserved/);
  assert.match(headersProblem({ description: "x" }) ?? "", /server status/);
  assert.match(headersProblem({ traceparent: "a", TraceParent: "b" }) ?? "", /given twice/);
  assert.match(headersProblem({ "bad name": "v" }) ?? "", /not a header name/);
  assert.match(headersProblem({ "x-note": "a\nb" }) ?? "", /control character/);
  assert.match(headersProblem({ "x-note": " a" }) ?? "", /begins or ends/);
  assert.match(headersProblem({ "x-note": "a\uDFFFb" }) ?? "", /lone surrogate/);
  assert.match(headersProblem({ "x-count": 3 } as unknown as Record<string, string>) ?? "", /not a string/);
});
