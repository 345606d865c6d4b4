// The producer helper against the stack's MariaDB, on a mysql2 connection: it appends in the
// caller's transaction and never ends it, takes the key's text from the row, and refuses what is
// no open transaction or what the bridge would refuse. The ORMs: producer_examples.test.ts.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";

import knexFactory from "knex";
import mysql from "mysql2/promise";
import { DataSource } from "typeorm";

import { OutboxProducer, ProducerRuleError } from "../src/index.js";
import { mysqlOptions, outboxSchema, suffix } from "./support.js";

const database = "t_ts_producer_" + suffix();
const table = "account_control_outbox";
let conn: mysql.Connection;
let other: mysql.Connection;

before(async () => {
  const admin = await mysql.createConnection(mysqlOptions());
  await admin.query(`CREATE DATABASE ${database}`);
  await admin.end();
  conn = await mysql.createConnection(mysqlOptions(database));
  other = await mysql.createConnection(mysqlOptions(database));
  for (const statement of outboxSchema(table)) await conn.query(statement);
  await conn.query("CREATE TABLE accounts (id BIGINT PRIMARY KEY, display_name VARCHAR(64) NOT NULL)");
  // Keys whose text is not what JavaScript's String() makes of the value the application holds.
  await conn.query("CREATE TABLE prices (code DECIMAL(12,2) PRIMARY KEY, label VARCHAR(64))");
  await conn.query("CREATE TABLE parts (no INT(6) ZEROFILL PRIMARY KEY, label VARCHAR(64))");
  await conn.query("CREATE TABLE skus (sku CHAR(8) PRIMARY KEY, label VARCHAR(64))");
  await conn.query("CREATE TABLE ledgers (id BIGINT UNSIGNED PRIMARY KEY, label VARCHAR(64))");
  await conn.query("CREATE TABLE tags (tag VARBINARY(16) PRIMARY KEY, label VARCHAR(64))");
});

after(async () => {
  await conn.query(`DROP DATABASE IF EXISTS ${database}`);
  await conn.end();
  await other.end();
});

const producer = (from: string, key: string) =>
  // CONCAT: MariaDB writes a ZEROFILL column into JSON_OBJECT as 000042, which is no JSON.
  new OutboxProducer({ table, entityType: "account", from, key, payload: `JSON_OBJECT('key', CONCAT(${key}))` });
const accounts = new OutboxProducer({
  table,
  entityType: "account",
  from: "accounts",
  key: "id",
  payload: "JSON_OBJECT('id', id, 'displayName', display_name)",
});

// A JSON column as mysql2 hands it over: parsed already (MariaDB's JSON type info), or as text.
const json = (value: unknown): unknown => (typeof value === "string" ? JSON.parse(value) : value);

async function outboxRows(): Promise<mysql.RowDataPacket[]> {
  const [rows] = await other.query<mysql.RowDataPacket[]>(`SELECT entity_key, op, payload, headers FROM ${table} ORDER BY id`);
  return rows;
}

/** Runs `work` in a transaction the test begins, and commits it (or rolls back when it throws). */
async function inTransaction<T>(work: () => Promise<T>): Promise<T> {
  await conn.beginTransaction();
  try {
    const result = await work();
    await conn.commit();
    return result;
  } catch (e) {
    await conn.rollback();
    throw e;
  }
}

test("the producer appends in the caller's transaction and never ends it", async () => {
  const before = (await outboxRows()).length;
  const traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
  await conn.beginTransaction();
  await conn.execute("INSERT INTO accounts VALUES (42, 'Acme')");
  const key = await accounts.upsert(conn, { where: "id = ?", params: [42], headers: { traceparent, tracestate: "congo=t61rcWkgMzE" } });
  assert.equal(key, "42");
  // Nothing committed: another connection sees neither row (the old transaction() committed here).
  assert.equal((await outboxRows()).length, before);
  await conn.rollback();
  assert.equal((await outboxRows()).length, before, "the caller's ROLLBACK takes the outbox row back");

  // The seam for any other library: a function that runs a statement on the transaction.
  const run = (sql: string, params: unknown[]) => conn.query(sql, params);
  await inTransaction(async () => {
    await conn.execute("INSERT INTO accounts VALUES (42, 'Acme')");
    await accounts.upsert(run, { where: "id = ?", params: [42], headers: { traceparent } });
  });
  await inTransaction(async () => {
    await accounts.delete(conn, { where: "id = ?", params: [42] });
    await conn.execute("DELETE FROM accounts WHERE id = 42");
  });
  const rows = (await outboxRows()).slice(before);
  assert.deepEqual(rows.map((r) => [r.entity_key, r.op]), [["42", "upsert"], ["42", "delete"]]);
  assert.deepEqual(json(rows[0].payload), { id: 42, displayName: "Acme" });
  assert.deepEqual(json(rows[0].headers), { traceparent });
  assert.equal(rows[1].payload, null);
  assert.equal(rows[1].headers, null);
});

test("the key's text is the row's as the server renders it, not what JavaScript made of a value", async () => {
  const cases: [string, string, string, unknown][] = [
    ["prices", "code", "12.5", 12.5], // DECIMAL(12,2): "12.50"
    ["parts", "no", "42", 42], // INT(6) ZEROFILL: "000042", where INSERT ... SELECT no would store "42"
    ["skus", "sku", "'00042'", 42], // zero-padded text, where the application held 42
    ["ledgers", "id", "9007199254740993", 9007199254740992], // beyond 2^53: the number's neighbour
  ];
  for (const [from, column, literal, held] of cases) {
    await inTransaction(async () => {
      await conn.query(`INSERT INTO ${from} (${column}) VALUES (${literal})`);
      await producer(from, column).upsert(conn, { where: `${column} = ${literal}` });
    });
    const [rendered] = await other.query<mysql.RowDataPacket[]>({
      sql: `SELECT ${column} AS k FROM ${from} WHERE ${column} = ${literal}`,
      typeCast: false, // the text protocol's bytes, as a snapshot reads them
    });
    const text = String(rendered[0].k);
    const [stored] = await other.query<mysql.RowDataPacket[]>(`SELECT entity_key FROM ${table} WHERE entity_key = ?`, [text]);
    assert.deepEqual(stored.map((r) => r.entity_key), [text], `${from}.${column}`);
    assert.notEqual(String(held), text, `String(${String(held)}) is not the snapshot's key ${text}`);
  }
  // Why CONCAT: a number stored into entity_key as it is loses a ZEROFILL's zeros.
  await conn.beginTransaction();
  await conn.query(`INSERT INTO ${table} (entity_type, entity_key, payload) SELECT 'part', no, NULL FROM parts`);
  const [plain] = await conn.query<mysql.RowDataPacket[]>(`SELECT entity_key FROM ${table} WHERE entity_type = 'part'`);
  await conn.rollback();
  assert.deepEqual(plain.map((r) => r.entity_key), ["42"]);
});

test("what is no open transaction on one connection is refused before anything is appended", async () => {
  const before = (await outboxRows()).length;
  const refused = (why: RegExp) => (e: unknown) => e instanceof ProducerRuleError && why.test(e.message);
  const change = { where: "id = ?", params: [7] };

  const pool = mysql.createPool({ ...mysqlOptions(database), connectionLimit: 1 });
  // @ts-expect-error a Pool is no transaction: the type says so before the run does
  await assert.rejects(accounts.upsert(pool, change), refused(/pool/));
  await pool.end();

  await conn.execute("INSERT INTO accounts VALUES (7, 'autocommitted')");
  await assert.rejects(accounts.upsert(conn, change), refused(/no transaction is open/));
  await assert.rejects(accounts.upsert(async () => [], change), refused(/does not say whether a transaction is open/));

  const o = mysqlOptions(database);
  const connection = { host: o.host, port: o.port, user: o.user, password: o.password, database };
  const knex = knexFactory({ client: "mysql2", connection, pool: { min: 0, max: 1 } });
  await assert.rejects(accounts.upsert(knex, change), refused(/Knex instance/));
  await knex.destroy();

  const dataSource = new DataSource({ type: "mysql", host: o.host, port: o.port, username: o.user, password: o.password, database });
  await dataSource.initialize();
  await assert.rejects(accounts.upsert(dataSource, change), refused(/DataSource/));
  await assert.rejects(accounts.upsert(dataSource.manager, change), refused(/in no transaction/));
  const runner = dataSource.createQueryRunner();
  await assert.rejects(accounts.upsert(runner, change), refused(/startTransaction/));
  await runner.release();
  await dataSource.destroy();
  assert.equal((await outboxRows()).length, before);

  // autocommit=0 opens a transaction with the first statement: that is one, and ROLLBACK ends it.
  await conn.query("SET autocommit = 0");
  try {
    await conn.execute("UPDATE accounts SET display_name = 'x' WHERE id = 7");
    await accounts.upsert(conn, change);
    await conn.query("ROLLBACK");
  } finally {
    await conn.query("SET autocommit = 1");
  }
  assert.equal((await outboxRows()).length, before);
});

test("the producer rule and the bridge's poison rules are enforced before anything is appended", async () => {
  const before = (await outboxRows()).length;
  const refused = (why: RegExp) => (e: unknown) => e instanceof ProducerRuleError && why.test(e.message);
  await conn.execute("INSERT INTO accounts VALUES (8, 'Initech')");
  const cases: [() => Promise<unknown>, RegExp][] = [
    [() => accounts.upsert(conn, { where: "id = ?", params: [404] }), /found no row in accounts where id = \?; upsert\(\) reads/],
    [() => accounts.upsert(conn, { where: "id > ?", params: [0] }), /more than one row/],
    [() => accounts.delete(conn, { where: "id = ?", params: [404] }), /delete\(\) comes before the business DELETE/],
    [() => accounts.upsert(conn, { where: "id = ?", params: [2 ** 60] }), /beyond 2\^53/],
    [() => accounts.upsert(conn, { where: "display_name = ?", params: ["Init\uD800"] }), /params\[0\] holds a lone surrogate/],
    [() => accounts.upsert(conn, { where: "id = 8", headers: { traceparent: "a\uDC00b" } }), /lone surrogate/],
    [() => accounts.upsert(conn, { where: "id = 8", headers: { "Nats-Msg-Id": "forged" } }), /reserved/],
    [() => accounts.upsert(conn, { where: "id = 8", headers: { traceparent: "a\r\nInjected: 1" } }), /control character/],
    [() => accounts.upsert(conn, { where: "id = 8", headers: { Status: "404" } }), /server status/],
    [() => producer("accounts", "CONCAT(' ', id)").upsert(conn, { where: "id = 8" }), /begins or ends/],
    [() => producer("accounts", "NULL").upsert(conn, { where: "id = 8" }), /entity_key is NULL/],
  ];
  await conn.beginTransaction();
  await conn.query("INSERT INTO tags VALUES (X'FF41', 'not UTF-8')");
  cases.push([() => producer("tags", "tag").upsert(conn, { where: "label = 'not UTF-8'" }), /not valid UTF-8/]);
  for (const [append, why] of cases) await assert.rejects(append(), refused(why));
  // None of them ended the caller's transaction: its write is still there to roll back.
  const [tags] = await conn.query<mysql.RowDataPacket[]>("SELECT COUNT(*) AS n FROM tags");
  assert.equal(Number(tags[0].n), 1);
  await conn.rollback();
  assert.equal((await outboxRows()).length, before);
});

test("names that could reach SQL are checked", () => {
  const ok = { table, entityType: "account", from: "accounts", key: "id", payload: "JSON_OBJECT('id', id)" };
  assert.throws(() => new OutboxProducer({ ...ok, table: "x; DROP TABLE y" }), ProducerRuleError);
  assert.throws(() => new OutboxProducer({ ...ok, from: "a b" }), ProducerRuleError);
  assert.throws(() => new OutboxProducer({ ...ok, entityType: "a.b" }), ProducerRuleError);
  assert.throws(() => new OutboxProducer({ ...ok, key: " " }), ProducerRuleError);
  assert.throws(() => new OutboxProducer({ ...ok, payload: "JSON_OBJECT('id', ?)" }), /holds a '\?'/);
});
