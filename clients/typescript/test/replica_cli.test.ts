// bin/outbox-replica.mjs and `outbox-bridge replica`, side by side on one source: the same lines
// and the same --dump, byte for byte.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, test } from "node:test";

import { AccountsSource, clientRoot, env, Process, suffix, tmp, until } from "./support.js";

let source: AccountsSource;

before(async () => {
  source = await AccountsSource.create();
});

after(async () => {
  await source.close();
});

test("the CLI and the C++ replica write the same --dump", async () => {
  // Values that test the text and escaping: unicode, quotes, control characters, NULL.
  await source.seed(40);
  await source.change(41, 'quote " and \\ backslash');
  await source.change(42, "ключ 🔑 tab\tnewline\n");
  await source.change(43, null);
  await source.startBridge();
  await source.drained();

  const args = (dump: string) => [
    "--url",
    source.url,
    "--source",
    source.name,
    "--nats",
    env("OUTBOX_TEST_NATS_URL"),
    "--dump",
    dump,
    "--verify-interval",
    "0.1",
  ];
  const cppDump = join(tmp, `dump-cpp-${suffix()}.json`);
  const tsDump = join(tmp, `dump-ts-${suffix()}.json`);
  const cpp = new Process([env("OUTBOX_TEST_BRIDGE_BIN"), "replica", ...args(cppDump)], join(tmp, `cpp-${suffix()}.log`));
  const ts = new Process(
    [process.execPath, join(clientRoot, "bin", "outbox-replica.mjs"), ...args(tsDump)],
    join(tmp, `ts-${suffix()}.log`),
  );
  try {
    for (const p of [cpp, ts]) {
      await until(() => p.log().includes("bootstrapped: epoch 1, watermark 43, 43 records"), 20_000, p.log());
    }
    // Changes while both follow: updates, deletes, new keys.
    for (let i = 1; i <= 20; ++i) await source.change(i, `Renamed ${i}`);
    for (let i = 21; i <= 25; ++i) await source.change(i, null, true);
    for (let i = 100; i <= 110; ++i) await source.change(i, `New ${i} é`);
    const published = await source.drained();
    assert.equal(published, 43 + 20 + 5 + 11);
    for (const p of [cpp, ts]) {
      await until(() => p.log().includes(`] verified at version ${published}: 49 records`), 20_000, p.log());
    }
    assert.equal(await cpp.stop(), 0, cpp.log());
    assert.equal(await ts.stop(), 0, ts.log());
    for (const p of [cpp, ts]) {
      assert.match(p.log(), new RegExp(`\\[${source.name}\\] stopped at version ${published} \\(49 records`));
      assert.match(p.log(), /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ \[/m);
    }
    const fromCpp = readFileSync(cppDump, "utf8");
    const fromTs = readFileSync(tsDump, "utf8");
    assert.ok(fromCpp.includes(`"appliedVersion":${published}`), fromCpp.slice(0, 300));
    assert.ok(fromCpp.includes('{"id":100,"displayName":"New 100 é"}'));
    assert.equal(fromTs, fromCpp);
    // The same bootstrap and stop lines, timestamps aside (when each verifies on the way depends
    // on timing).
    const lines = (p: Process) =>
      p
        .log()
        .split("\n")
        .filter((l) => /\] (bootstrapped|stopped)/.test(l))
        .map((l) => l.slice(l.indexOf("[")));
    assert.deepEqual(lines(ts), lines(cpp));
  } finally {
    for (const p of [cpp, ts]) if (p.child.exitCode === null) await p.kill();
  }
});

test("the CLI refuses bad flags with exit 2, naming the flag", async () => {
  const cli = join(clientRoot, "bin", "outbox-replica.mjs");
  const cases: [string[], string][] = [
    [["--url", "http://127.0.0.1:1"], "--source"],
    [["--url", "ftp://127.0.0.1:1", "--source", "a"], "--url"],
    [["--url", "http://u:sekrit@127.0.0.1:1", "--source", "a"], "--url"],
    [["--url", "http://127.0.0.1:1", "--source", "../../admin"], "--source"],
    [["--url", "http://127.0.0.1:1", "--source", "a", "--duration", "-1"], "--duration"],
    [["--url", "http://127.0.0.1:1", "--source", "a", "--verify-interval", "inf"], "--verify-interval"],
    [["--url", "http://127.0.0.1:1", "--source", "a", "--dump", join(tmp, "missing", "d.json")], "--dump"],
    [["--url", "http://127.0.0.1:1", "--source", "a", "--bogus"], "--bogus"],
  ];
  for (const [argv, flag] of cases) {
    const p = new Process([process.execPath, cli, ...argv], join(tmp, `cli-bad-${suffix()}.log`));
    assert.equal(await p.exited, 2, `${argv.join(" ")}: ${p.log()}`);
    assert.ok(p.log().includes(flag), `${argv.join(" ")}: ${p.log()}`);
    assert.ok(!p.log().includes("sekrit"), p.log());
  }
  const help = new Process([process.execPath, cli, "--help"], join(tmp, `cli-help-${suffix()}.log`));
  assert.equal(await help.exited, 0);
  assert.ok(help.log().includes("--verify-interval"));
});
