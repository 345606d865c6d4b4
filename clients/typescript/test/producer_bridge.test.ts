// The producer's key through the real bridge: a DECIMAL(12,2) key that the application holds as
// 12.5 is "12.50" in the snapshot and must be "12.50" in the change too, or a replica holds the
// entity twice until a verification fails and it bootstraps again (the 0.1 producer wrote
// String(12.5), "12.5").
import assert from "node:assert/strict";
import { test } from "node:test";

import mysql from "mysql2/promise";

import { MemoryStore, OutboxProducer, Replica } from "../src/index.js";
import { AccountsSource, env, mysqlOptions, until } from "./support.js";

test("a DECIMAL key the producer appends is the snapshot's key: the replica follows one record per entity, verified", async () => {
  const source = await AccountsSource.create();
  const conn = await mysql.createConnection(mysqlOptions(source.database));
  const store = new MemoryStore();
  const lines: string[] = [];
  const stop = new AbortController();
  let replica: Replica | null = null;
  let running: Promise<void> | null = null;
  try {
    await conn.query("ALTER TABLE accounts MODIFY id DECIMAL(12,2) NOT NULL");
    const accounts = new OutboxProducer({
      table: source.outbox,
      entityType: "account",
      from: "accounts",
      key: "id",
      payload: "JSON_OBJECT('id', id, 'displayName', display_name)",
    });
    const change = async (work: () => Promise<unknown>) => {
      await conn.beginTransaction();
      await work();
      await conn.commit();
    };
    // The keys as the application holds them: numbers, as mysql2 reads a DECIMAL with decimalNumbers.
    for (const [id, name] of [[12.5, "Acme"], [7.25, "Initech"]] as const) {
      await change(async () => {
        await conn.execute("INSERT INTO accounts VALUES (?, ?)", [id, name]);
        await accounts.upsert(conn, { where: "id = ?", params: [id] });
      });
    }
    await source.startBridge();
    await source.drained();

    replica = new Replica({
      url: source.url,
      source: source.name,
      nats: { servers: env("OUTBOX_TEST_NATS_URL") },
      store,
      verifyIntervalMs: 50,
      report: (line) => lines.push(line),
    });
    running = replica.run(stop.signal);
    const verifiedAt = (version: number) =>
      until(() => replica!.lastVerifiedVersion === version, 30_000, () => `verified at ${version}:\n${lines.join("\n")}`);
    await verifiedAt(2);
    assert.deepEqual([...store.records(source.name).keys()].sort(), ["12.50", "7.25"], "the snapshot's keys");

    await change(async () => {
      await conn.execute("UPDATE accounts SET display_name = 'Acme Ltd' WHERE id = ?", [12.5]);
      await accounts.upsert(conn, { where: "id = ?", params: [12.5] });
    });
    await change(async () => {
      await accounts.delete(conn, { where: "id = ?", params: [7.25] });
      await conn.execute("DELETE FROM accounts WHERE id = ?", [7.25]);
    });
    assert.equal(await source.drained(), 4);
    await verifiedAt(4);
    const records = store.records(source.name);
    assert.deepEqual([...records.keys()], ["12.50"], "one record per entity: the changes' keys are the snapshot's");
    assert.deepEqual(records.get("12.50"), ["12.50", "Acme Ltd"]);
    // Not by a second bootstrap: a change under another key would fail verification, and the
    // replica would heal itself from a new snapshot.
    assert.equal(lines.filter((l) => l.includes("bootstrapped:")).length, 1, lines.join("\n"));
  } finally {
    stop.abort();
    await running;
    await replica?.close();
    await conn.end();
    await source.close();
  }
});
