// README's producer examples (examples/*.ts), each in the transaction its library gives: a change
// that commits, one that throws inside the transaction after its outbox row was appended, and a
// delete. producer_examples.test.ts runs them here; package.test.ts copies this file and the
// examples into an empty project that installed the tarball, and runs them from there
// (`node example_units.js DATABASE ID...` prints what each step did as JSON).
import { DataSource } from "typeorm";
import knexFactory from "knex";
import mysql from "mysql2/promise";
import { fileURLToPath } from "node:url";

import * as withKnex from "../examples/knex.js";
import * as withMysql2 from "../examples/mysql2.js";
import * as withTypeOrm from "../examples/typeorm.js";

export interface Connect {
  host: string;
  port: number;
  user: string;
  password: string;
  database: string;
}

/** One example, in its library's own transaction. */
export interface ExampleUnit {
  name: string;
  open(id: string, name: string): Promise<void>;
  /** Opens `id`, then throws inside the same transaction, after the outbox row was appended. */
  openThenThrow(id: string, name: string): Promise<void>;
  close(id: string): Promise<void>;
  end(): Promise<void>;
}

export const AFTER_THE_APPEND = "thrown inside the transaction, after the outbox append";

async function thenThrow(): Promise<never> {
  throw new Error(AFTER_THE_APPEND);
}

export async function exampleUnits(c: Connect): Promise<ExampleUnit[]> {
  const pool = mysql.createPool({ ...c, connectionLimit: 2 });
  const knex = knexFactory({ client: "mysql2", connection: { ...c }, pool: { min: 0, max: 2 } });
  const dataSource = new DataSource({ type: "mysql", ...c, username: c.user, entities: [withTypeOrm.Account] });
  await dataSource.initialize();
  return [
    {
      name: "mysql2",
      open: (id, name) => withMysql2.inTransaction(pool, (conn) => withMysql2.openAccount(conn, id, name)),
      openThenThrow: (id, name) =>
        withMysql2.inTransaction(pool, async (conn) => {
          await withMysql2.openAccount(conn, id, name);
          await thenThrow();
        }),
      close: (id) => withMysql2.inTransaction(pool, (conn) => withMysql2.closeAccount(conn, id)),
      end: () => pool.end(),
    },
    {
      name: "typeorm",
      open: (id, name) => dataSource.transaction((manager) => withTypeOrm.openAccount(manager, id, name)),
      openThenThrow: (id, name) =>
        dataSource.transaction(async (manager) => {
          await withTypeOrm.openAccount(manager, id, name);
          await thenThrow();
        }),
      close: (id) => dataSource.transaction((manager) => withTypeOrm.closeAccount(manager, id)),
      end: () => dataSource.destroy(),
    },
    {
      name: "knex",
      open: (id, name) => knex.transaction((trx) => withKnex.openAccount(trx, id, name)),
      openThenThrow: (id, name) =>
        knex.transaction(async (trx) => {
          await withKnex.openAccount(trx, id, name);
          await thenThrow();
        }),
      close: (id) => knex.transaction((trx) => withKnex.closeAccount(trx, id)),
      end: () => knex.destroy(),
    },
  ];
}

/** For each example: opens ids[0], opens ids[1] and throws, closes ids[2] after opening it. */
async function main(database: string, ids: string[]): Promise<void> {
  const c = {
    host: process.env.OUTBOX_TEST_MYSQL_HOST ?? "",
    port: Number(process.env.OUTBOX_TEST_MYSQL_PORT),
    user: process.env.OUTBOX_TEST_MYSQL_USER ?? "",
    password: process.env.OUTBOX_TEST_MYSQL_PASSWORD ?? "",
    database,
  };
  const report: Record<string, string[]> = {};
  const units = await exampleUnits(c);
  for (const [i, unit] of units.entries()) {
    const [opened, thrown, closed] = ids.slice(3 * i, 3 * i + 3);
    const steps: string[] = [];
    await unit.open(opened, `${unit.name} opened`);
    steps.push(`opened ${opened}`);
    const error = await unit.openThenThrow(thrown, `${unit.name} thrown`).catch((e: Error) => e);
    steps.push(`threw ${thrown}: ${error instanceof Error ? error.message : "nothing"}`);
    await unit.open(closed, `${unit.name} closed`);
    await unit.close(closed);
    steps.push(`closed ${closed}`);
    report[unit.name] = steps;
  }
  for (const unit of units) await unit.end();
  console.log(JSON.stringify(report));
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  await main(process.argv[2], process.argv.slice(3));
}
