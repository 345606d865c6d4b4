import type { Pool, PoolConnection } from "mysql2/promise";

import { accountsOutbox } from "./accounts_outbox.js";

// Ids are strings: a BIGINT beyond 2^53 stays exact on its way to SQL.
export async function openAccount(conn: PoolConnection, id: string, name: string, trace?: Record<string, string>) {
  await conn.execute("INSERT INTO accounts (id, display_name) VALUES (?, ?)", [id, name]); // the business write first
  await accountsOutbox.upsert(conn, { where: "id = ?", params: [id], headers: trace }); // then its outbox row
}

export async function closeAccount(conn: PoolConnection, id: string) {
  await accountsOutbox.delete(conn, { where: "id = ?", params: [id] }); // a delete's row first: it reads the key
  await conn.execute("DELETE FROM accounts WHERE id = ?", [id]);
}

// One connection, one transaction: the producer appends inside it and never commits.
export async function inTransaction<T>(pool: Pool, work: (conn: PoolConnection) => Promise<T>): Promise<T> {
  const conn = await pool.getConnection();
  try {
    await conn.beginTransaction();
    const result = await work(conn);
    await conn.commit();
    return result;
  } catch (error) {
    await conn.rollback();
    throw error;
  } finally {
    conn.release();
  }
}

// await inTransaction(pool, (conn) => openAccount(conn, "9007199254740993", "Acme"));
