import assert from "node:assert/strict";
import { test } from "node:test";

import { headersProblem, keyProblem } from "../src/index.js";

// The same rules as the bridge's poison check (tests/unit/relay_test.cpp, poison_rules).
test("keys the Outbox-Entity-Key header could not carry", () => {
  assert.match(keyProblem("") ?? "", /empty/);
  assert.match(keyProblem(" 42") ?? "", /begins or ends/);
  assert.match(keyProblem("42\t") ?? "", /begins or ends/);
  assert.match(keyProblem("x\x01y") ?? "", /control character/);
  assert.equal(keyProblem("4 2"), undefined);
  assert.equal(keyProblem("tab\there"), undefined);
  assert.equal(keyProblem("ключ.1"), undefined);
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
  assert.match(headersProblem({ "x-count": 3 } as unknown as Record<string, string>) ?? "", /not a string/);
});
