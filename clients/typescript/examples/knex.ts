import type { Knex } from "knex";

import { accountsOutbox } from "./accounts_outbox.js";

// `trx` is the one knex.transaction() hands its callback.
export async function openAccount(trx: Knex.Transaction, id: string, name: string) {
  await trx("accounts").insert({ id, display_name: name }); // the business write first
  await accountsOutbox.upsert(trx, { where: "id = ?", params: [id] }); // then its outbox row
}

export async function closeAccount(trx: Knex.Transaction, id: string) {
  await accountsOutbox.delete(trx, { where: "id = ?", params: [id] }); // a delete's row first: it reads the key
  await trx("accounts").where({ id }).delete();
}

// await knex.transaction((trx) => openAccount(trx, "9007199254740993", "Acme"));
