// The producer helper against the stack's MariaDB (tools/test exports where it is; a missing
// service fails, never skips).
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { after, before, test } from "node:test";
import { fileURLToPath } from "node:url";

import mysql from "mysql2/promise";

import { OutboxProducer, ProducerRuleError } from "../src/index.js";

const here = dirname(fileURLToPath(import.meta.url));
const repo = join(here, "..", "..", "..", "..");

function env(name: string): string {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set: run this suite through tools/test, which starts the stack`);
  return value;
}

const database = "ts_producer_" + randomBytes(4).toString("hex");
const table = "account_control_outbox";
let conn: mysql.Connection;

// The outbox table as `outbox-bridge migrate` makes it: the project's own schema files.
function schemaStatements(file: string): string[] {
  const text = readFileSync(join(repo, "sql", "outbox", file), "utf8").replaceAll("{{outbox_table}}", table);
  return text
    .split("\n")
    .filter((line) => !line.trimStart().startsWith("--"))
    .join("\n")
    .split(/;\s*(?:\n|$)/)
    .map((s) => s.trim())
    .filter((s) => s.length > 0);
}

before(async () => {
  conn = await mysql.createConnection({
    host: env("OUTBOX_TEST_MYSQL_HOST"),
    port: Number(env("OUTBOX_TEST_MYSQL_PORT")),
    user: env("OUTBOX_TEST_MYSQL_USER"),
    password: env("OUTBOX_TEST_MYSQL_PASSWORD"),
  });
  await conn.query(`CREATE DATABASE ${database}`);
  await conn.query(`USE ${database}`);
  for (const file of ["001_outbox_table.sql", "003_headers_column.sql"]) {
    for (const statement of schemaStatements(file)) await conn.query(statement);
  }
  await conn.query("CREATE TABLE accounts (id BIGINT PRIMARY KEY, display_name VARCHAR(64) NOT NULL)");
});

after(async () => {
  await conn.query(`DROP DATABASE IF EXISTS ${database}`);
  await conn.end();
});

const producer = new OutboxProducer({ table, entityType: "account" });
const payload = (id: number) => ({
  json: "JSON_OBJECT('id', id, 'displayName', display_name)",
  from: "accounts",
  where: "id = ?",
  params: [id],
});

// A JSON column as mysql2 hands it over: parsed already (MariaDB's JSON type info), or as text.
const json = (value: unknown): unknown => (typeof value === "string" ? JSON.parse(value) : value);

async function outboxRows(): Promise<mysql.RowDataPacket[]> {
  const [rows] = await conn.query<mysql.RowDataPacket[]>(
    `SELECT entity_type, entity_key, op, payload, headers FROM ${table} ORDER BY id`,
  );
  return rows;
}

test("an upsert after its business write carries the row just written, and the trace context", async () => {
  const traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
  await producer.transaction(conn, async (tx) => {
    await tx.write("INSERT INTO accounts VALUES (?, ?)", [42, "Acme"]);
    await tx.upsert(42, payload(42), { traceparent, tracestate: "congo=t61rcWkgMzE" });
  });
  await producer.transaction(conn, async (tx) => {
    assert.equal(await tx.write("DELETE FROM accounts WHERE id = ?", [42]), 1);
    await tx.delete(42);
  });
  const rows = await outboxRows();
  assert.equal(rows.length, 2);
  assert.deepEqual(
    { type: rows[0].entity_type, key: rows[0].entity_key, op: rows[0].op },
    { type: "account", key: "42", op: "upsert" },
  );
  assert.deepEqual(json(rows[0].payload), { id: 42, displayName: "Acme" });
  assert.deepEqual(json(rows[0].headers), { traceparent, tracestate: "congo=t61rcWkgMzE" });
  assert.equal(rows[1].op, "delete");
  assert.equal(rows[1].payload, null);
  assert.equal(rows[1].headers, null);
});

test("the producer rule is enforced, and a refused change leaves nothing behind", async () => {
  const before = (await outboxRows()).length;
  // No business write first.
  await assert.rejects(
    producer.transaction(conn, (tx) => tx.upsert(7, payload(7))),
    (e: unknown) => e instanceof ProducerRuleError && /after the business write/.test(e.message),
  );
  // The row it should read is not there: the write did not write it.
  await assert.rejects(
    producer.transaction(conn, async (tx) => {
      await tx.write("UPDATE accounts SET display_name = 'x' WHERE id = ?", [404]);
      await tx.upsert(404, payload(404));
    }),
    (e: unknown) => e instanceof ProducerRuleError && /found 0 rows in accounts/.test(e.message),
  );
  // What the bridge would refuse as poison is refused here, and the business write rolls back.
  for (const [key, headers, why] of [
    [" 8", undefined, /begins or ends/],
    [8, { "Nats-Msg-Id": "forged" }, /reserved/],
    [8, { traceparent: "a\r\nInjected: 1" }, /control character/],
    [8, { Status: "404" }, /server status/],
  ] as const) {
    await assert.rejects(
      producer.transaction(conn, async (tx) => {
        await tx.write("INSERT INTO accounts VALUES (?, ?)", [8, "Initech"]);
        await tx.upsert(key, payload(8), headers as Record<string, string> | undefined);
      }),
      (e: unknown) => e instanceof ProducerRuleError && why.test(e.message),
    );
  }
  const [accounts] = await conn.query<mysql.RowDataPacket[]>("SELECT COUNT(*) AS n FROM accounts WHERE id = 8");
  assert.equal(Number(accounts[0].n), 0);
  assert.equal((await outboxRows()).length, before);
});

test("names that could reach SQL are checked", () => {
  assert.throws(() => new OutboxProducer({ table: "x; DROP TABLE y", entityType: "account" }), ProducerRuleError);
  assert.throws(() => new OutboxProducer({ table: "t", entityType: "a.b" }), ProducerRuleError);
});
