// Records typed by field name: the number policies of decodeJson, and a Replica<Account> over
// the real bridge, MariaDB and nats-server whose handler reads `record` (a BIGINT id beyond 2^53
// exact), while the checksum, kept from the records' text, still verifies.
import assert from "node:assert/strict";
import { test } from "node:test";

import type mysql from "mysql2/promise";

import { decodeJson, MemoryStore, MysqlInbox, Replica, type Change } from "../src/index.js";
import { AccountsSource, consumerDatabase, env, until } from "./support.js";

const text =
  '{"id": 9007199254740993, "amount": 12.50, "big": 1e3, "small": -42, "neg": -9007199254740993, ' +
  '"nested": {"a": [1, 9007199254740993, "s", 0.1]}, "t": true, "z": null, "__proto__": {"x": 1}, ' +
  '"s": "caf\\u00e9 \\"q\\"", "e": {}, "l": []}';

test("decodeJson: each number policy, and every other value as JSON.parse reads it", () => {
  const plain = JSON.parse(text);
  const auto = decodeJson<Record<string, unknown>>(text);
  assert.equal(auto.id, 9007199254740993n);
  assert.equal(auto.neg, -9007199254740993n);
  assert.equal(auto.amount, 12.5);
  assert.equal(auto.big, 1000);
  assert.equal(auto.small, -42);
  assert.deepEqual(auto.nested, { a: [1, 9007199254740993n, "s", 0.1] });
  const strings = decodeJson<Record<string, unknown>>(text, "string");
  assert.deepEqual([strings.id, strings.amount, strings.big, strings.small], ["9007199254740993", "12.50", "1e3", "-42"]);
  assert.deepEqual(strings.nested, { a: ["1", "9007199254740993", "s", "0.1"] });
  assert.deepEqual(decodeJson(text, "number"), plain, "'number' reads as JSON.parse does");
  for (const name of ["t", "z", "s", "e", "l"]) assert.deepEqual(auto[name], plain[name], name);
  // "__proto__" is a field, as with JSON.parse, not the object's prototype.
  assert.equal(Object.getPrototypeOf(auto), Object.prototype);
  assert.deepEqual(Object.getOwnPropertyDescriptor(auto, "__proto__")?.value, { x: 1 });
  assert.deepEqual(Object.keys(auto), Object.keys(plain));
});

interface Account {
  id: number | bigint;
  displayName: string | null;
}

test("Replica<Account>: the handler reads typed records of the snapshot and the changes; it still verifies", async () => {
  const source = await AccountsSource.create();
  const consumer = await consumerDatabase();
  let replica: Replica<Account> | null = null;
  const big = "9007199254740993"; // 2^53 + 1: a Number would read 9007199254740992
  try {
    await source.seed(3);
    await insertBig(source, big, "Big in the snapshot");
    await source.startBridge();
    await source.drained();
    await consumer.pool.query("CREATE TABLE replica (id BIGINT UNSIGNED PRIMARY KEY, name TEXT, id_type TEXT)");
    const seen: Change<Account>[] = [];
    const inbox = new MysqlInbox<Account>({
      pool: consumer.pool,
      handler: {
        reset: async (conn) => void (await conn.query("DELETE FROM replica")),
        load: async (conn, _columns, records) => {
          const rows = records.map(({ record }) => [String(record.id), record.displayName, typeof record.id]);
          await conn.query("INSERT INTO replica VALUES ?", [rows]);
        },
        apply: async (conn, change) => {
          if (!change.record) return void (await conn.query("DELETE FROM replica WHERE id = ?", [change.key]));
          const { id, displayName } = change.record;
          await conn.query("REPLACE INTO replica VALUES (?, ?, ?)", [String(id), displayName, typeof id]);
        },
      },
    });
    await inbox.createTables();
    replica = new Replica<Account>({
      url: source.url,
      source: source.name,
      nats: { servers: env("OUTBOX_TEST_NATS_URL") },
      store: inbox,
      verifyIntervalMs: 50,
      onApplied: (change) => void seen.push(change),
    });
    const r = replica;
    const running = r.run();
    await until(() => r.appliedVersion >= 4, 30_000, "the bootstrap");
    await source.change(2, "Renamed");
    await source.pool.query("UPDATE accounts SET display_name = 'Big, changed' WHERE id = ?", [big]);
    await insertOutbox(source, big);
    const final = await source.drained();
    await until(() => r.lastVerifiedVersion === final, 30_000, `verified at ${final}`);
    const [rows] = await consumer.pool.query<mysql.RowDataPacket[]>(
      "SELECT CAST(id AS CHAR) AS id, name, id_type FROM replica ORDER BY id",
    );
    assert.deepEqual(
      rows.map((x) => [x.id, x.name, x.id_type]),
      [
        ["1", "Account 1", "number"],
        ["2", "Renamed", "number"],
        ["3", "Account 3", "number"],
        [big, "Big, changed", "bigint"],
      ],
    );
    assert.equal(seen.at(-1)?.record?.id, BigInt(big));
    assert.equal(seen.at(-1)?.values?.[0], big, "the text form, which the checksum hashes, as written");
    assert.doesNotThrow(() => JSON.stringify(seen.at(-1)), "a change with a bigint in its record still serialises");
    await r.close();
    await running;

    // "string": every number as written, for an application that keeps ids as text.
    const store = new MemoryStore();
    const texts: unknown[] = [];
    const strings = new Replica<{ id: string }>({
      url: source.url,
      source: source.name,
      nats: { servers: env("OUTBOX_TEST_NATS_URL") },
      store,
      numbers: "string",
      onApplied: (change) => void texts.push(change.record?.id),
    });
    const ended = strings.run();
    await until(() => strings.appliedVersion === final, 30_000, "the second replica");
    await source.change(3, "Once more");
    await until(() => texts.length === 1, 30_000, "a change");
    assert.deepEqual(texts, ["3"]);
    await strings.close();
    await ended;
  } finally {
    await replica?.close();
    await consumer.pool.query(`DROP DATABASE IF EXISTS ${consumer.name}`).catch(() => undefined);
    await consumer.pool.end();
    await source.close();
  }
});

async function insertBig(source: AccountsSource, id: string, name: string): Promise<void> {
  await source.pool.query("INSERT INTO accounts VALUES (?, ?)", [id, name]);
  await insertOutbox(source, id);
}

/** The outbox row of account `id` as the producer rule writes it (the key's text taken in SQL). */
async function insertOutbox(source: AccountsSource, id: string): Promise<void> {
  await source.pool.query(
    `INSERT INTO ${source.outbox} (entity_type, entity_key, op, payload) SELECT 'account', id, 'upsert',
       JSON_OBJECT('id', id, 'displayName', display_name) FROM accounts WHERE id = ?`,
    [id],
  );
}
