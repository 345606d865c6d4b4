import { EntitySchema, type EntityManager } from "typeorm";

import { accountsOutbox } from "./accounts_outbox.js";

export const Account = new EntitySchema<{ id: string; displayName: string }>({
  name: "Account",
  tableName: "accounts",
  columns: {
    id: { type: "bigint", unsigned: true, primary: true }, // TypeORM reads a BIGINT as a string
    displayName: { type: "varchar", length: 64, name: "display_name" },
  },
});

// `manager` is the one dataSource.transaction() hands its callback: its queries run on that
// transaction's connection.
export async function openAccount(manager: EntityManager, id: string, name: string) {
  await manager.insert(Account, { id, displayName: name }); // the business write first
  await accountsOutbox.upsert(manager, { where: "id = ?", params: [id] }); // then its outbox row
}

export async function closeAccount(manager: EntityManager, id: string) {
  await accountsOutbox.delete(manager, { where: "id = ?", params: [id] }); // a delete's row first: it reads the key
  await manager.delete(Account, { id });
}

// In a NestJS service, with the DataSource injected:
// await this.dataSource.transaction((manager) => openAccount(manager, "9007199254740993", "Acme"));
