// README's producer examples (examples/*.ts: mysql2, TypeORM, Knex) against the stack's MariaDB,
// each in its library's own transaction: a commit leaves the business row and its outbox row, the
// key's text the one a snapshot reads; a throw after the append leaves neither; a delete reads
// the key before the row goes. README quotes the example files whole, so the two cannot drift.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, test } from "node:test";

import mysql from "mysql2/promise";

import { AFTER_THE_APPEND, exampleUnits, type ExampleUnit } from "./example_units.js";
import { clientRoot, mysqlOptions, outboxSchema, suffix } from "./support.js";

const database = "t_ts_examples_" + suffix();
const outbox = "account_control_outbox";
let admin: mysql.Connection;
let units: ExampleUnit[] = [];

before(async () => {
  admin = await mysql.createConnection(mysqlOptions());
  await admin.query(`CREATE DATABASE ${database}`);
  await admin.query(`USE ${database}`);
  await admin.query("CREATE TABLE accounts (id BIGINT UNSIGNED PRIMARY KEY, display_name VARCHAR(64) NOT NULL)");
  for (const statement of outboxSchema(outbox)) await admin.query(statement);
  const o = mysqlOptions(database);
  units = await exampleUnits({ host: o.host!, port: o.port!, user: o.user!, password: o.password!, database });
});

after(async () => {
  for (const unit of units) await unit.end();
  await admin.query(`DROP DATABASE IF EXISTS ${database}`);
  await admin.end();
});

/** The business row's key as the server's text protocol renders it (what a snapshot reads), and
 * the outbox rows whose entity_key is `id`. */
async function rowsOf(
  conn: mysql.Connection,
  id: string,
): Promise<{ accountKeys: string[]; outbox: { key: string; op: string; payload: string | null }[] }> {
  const [accounts] = await conn.query<mysql.RowDataPacket[]>({
    sql: "SELECT id FROM accounts WHERE id = ?",
    values: [id],
    typeCast: false, // the bytes the server sent
  });
  const [rows] = await conn.query<mysql.RowDataPacket[]>(
    `SELECT entity_key, op, CAST(payload AS CHAR) AS payload FROM ${outbox} WHERE entity_key = ? ORDER BY id`,
    [id],
  );
  return {
    accountKeys: accounts.map((r) => String(r.id)),
    outbox: rows.map((r) => ({ key: r.entity_key as string, op: r.op as string, payload: r.payload as string | null })),
  };
}

// Beyond 2^53 and odd: a JavaScript number would hold its neighbour (String(2 ** 53 + 1) is "...992").
const base = 2n ** 53n + 1n;

for (const [i, name] of ["mysql2", "typeorm", "knex"].entries()) {
  test(`${name}: a commit keeps both rows with the key's text, a throw after the append neither, a delete reads the key`, async () => {
    const unit = units.find((u) => u.name === name)!;
    const [opened, thrown, closed] = [0n, 1n, 2n].map((k) => String(base + BigInt(10 * i) + 2n * k));
    assert.notEqual(String(Number(opened)), opened, "the key is one a JavaScript number cannot hold");

    await unit.open(opened, "Acme");
    const committed = await rowsOf(admin, opened);
    assert.deepEqual(committed.accountKeys, [opened]);
    assert.deepEqual(
      committed.outbox.map((r) => [r.key, r.op]),
      [[opened, "upsert"]],
      "one upsert whose key is the business row's key as SQL renders it",
    );
    assert.match(committed.outbox[0].payload ?? "", new RegExp(`"id": ?${opened}\\b.*"displayName": ?"Acme"`));

    await assert.rejects(unit.openThenThrow(thrown, "Initech"), new RegExp(AFTER_THE_APPEND));
    assert.deepEqual(await rowsOf(admin, thrown), { accountKeys: [], outbox: [] }, "neither the business row nor the outbox row");

    await unit.open(closed, "Umbrella");
    await unit.close(closed);
    const gone = await rowsOf(admin, closed);
    assert.deepEqual(gone.accountKeys, []);
    assert.deepEqual(
      gone.outbox.map((r) => [r.key, r.op, r.payload]),
      [
        [closed, "upsert", gone.outbox[0].payload],
        [closed, "delete", null],
      ],
    );
  });
}

test("README quotes every example file whole", () => {
  const readme = readFileSync(join(clientRoot, "README.md"), "utf8");
  for (const file of ["accounts_outbox.ts", "mysql2.ts", "typeorm.ts", "knex.ts"]) {
    const text = readFileSync(join(clientRoot, "examples", file), "utf8");
    assert.ok(readme.includes("```ts\n// examples/" + file + "\n" + text + "```"), `README shows examples/${file} as it is`);
  }
});
