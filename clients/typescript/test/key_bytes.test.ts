// A key that is not valid UTF-8 (issue 34): what the bridge does with one, against the real
// bridge, MariaDB and nats-server.
import assert from "node:assert/strict";
import { test } from "node:test";

import type mysql from "mysql2/promise";

import { AccountsSource, until } from "./support.js";

test("an outbox table made by migrate refuses a key that is not UTF-8 (strict mode), before the bridge sees it", async () => {
  // Its entity_key is utf8mb4: the server refuses the bytes (without strict mode it stores '?' for
  // them, with a warning: a valid key, not the one meant — the producer's business).
  const source = await AccountsSource.create();
  try {
    await assert.rejects(
      source.pool.query(
        `INSERT INTO ${source.outbox} (entity_type, entity_key, op, payload) VALUES ('account', X'61FF62', 'upsert', '{}')`,
      ),
      /Incorrect string value/,
    );
  } finally {
    await source.close();
  }
});

test("an outbox table whose entity_key holds bytes: the bridge halts on a key that is not UTF-8, as poison", async () => {
  // Before the rule (issue 34) the bridge published it: published_through reached 2, and a
  // consumer read the key as "a\uFFFDb".
  const source = await AccountsSource.create();
  try {
    await source.pool.query(`ALTER TABLE ${source.outbox} MODIFY entity_key VARBINARY(191) NOT NULL`);
    await source.change(1, "Good");
    await source.pool.query(
      `INSERT INTO ${source.outbox} (entity_type, entity_key, op, payload) VALUES ('account', X'61FF62', 'upsert', '{"id": 2}')`,
    );
    await source.startBridge();
    let reason = "";
    await until(
      async () => {
        const [rows] = await source.pool.query<mysql.RowDataPacket[]>(
          "SELECT halted_reason FROM outbox_source_state WHERE source = ?",
          [source.name],
        );
        reason = rows[0]?.halted_reason ?? "";
        return reason !== "";
      },
      20_000,
      () => source.bridge!.log(),
    );
    assert.match(reason, /^poison row id=2: entity_key is not valid UTF-8/);
    // The good row's mark may come after the halt (marks are written in rounds): waited for.
    await until(async () => (await source.state()).published >= 1, 10_000, "the good row's mark");
    assert.equal((await source.state()).published, 1, "the good row before it is published, not the bad one");
  } finally {
    await source.close();
  }
});
