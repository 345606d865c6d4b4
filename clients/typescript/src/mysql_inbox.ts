// The inbox in MySQL/MariaDB (docs/consumers.md section 5): the application's change and the
// source's one inbox row in one transaction. Besides the row, a table of one hash per record
// keeps the checksum current (the replica verifies against ?summary=true without holding the
// records in memory); the records themselves are the application's, in its own tables.

import type { Pool, PoolConnection, RowDataPacket, ResultSetHeader } from "mysql2/promise";

import { recordHash } from "./checksum.js";
import { handlerCall } from "./replica_events.js";
import type { Bootstrap, Change, Fields, InboxRow, ReplicaRecord, ReplicaStore, SnapshotRecord } from "./store.js";
import { nextRow } from "./store.js";

/** What the application does with the replica's data, inside the inbox's transaction; `T`: a record's type. */
export interface InboxHandler<T = Fields> {
  /** A bootstrap begins: remove what the application holds of this source. */
  reset(conn: PoolConnection, source: string): Promise<void>;
  /** Records of the snapshot, in batches (columns in the snapshot's order). */
  load(conn: PoolConnection, columns: readonly string[], records: readonly SnapshotRecord<T>[]): Promise<void>;
  /** One change, with its version. */
  apply(conn: PoolConnection, change: Change<T>): Promise<void>;
  /** Consecutive changes in one transaction (Replica's batchVersions); without it, apply for each. */
  applyBatch?(conn: PoolConnection, changes: readonly Change<T>[]): Promise<void>;
}

export interface MysqlInboxOptions<T = Fields> {
  pool: Pool;
  handler: InboxHandler<T>;
  inboxTable?: string; // default outbox_inbox
  hashTable?: string; // default outbox_inbox_record
  leaseTable?: string; // default outbox_inbox_lease (Replica's lease option)
}

const NAME = /^[A-Za-z_][A-Za-z0-9_$]{0,63}$/;

function identifier(name: string, what: string): string {
  if (!NAME.test(name)) throw new Error(`${what} '${name}' is not a plain table name`);
  return "`" + name + "`";
}

const hex = (n: bigint) => n.toString(16).padStart(16, "0");

// A record handed to Bootstrap.records without its JSON (by code of the application's own, not a
// snapshot read here): its record is its texts by field name.
function withRecord<T>(columns: readonly string[], r: ReplicaRecord): SnapshotRecord<T> {
  if ("record" in r) return r as SnapshotRecord<T>;
  return { ...r, record: Object.fromEntries(columns.map((c, i) => [c, r.values[i]])) as T };
}

export class MysqlInbox<T = Fields> implements ReplicaStore {
  private readonly pool: Pool;
  private readonly handler: InboxHandler<T>;
  private readonly inbox: string;
  private readonly hashes: string;
  private readonly leases: string;

  constructor(options: MysqlInboxOptions<T>) {
    this.pool = options.pool;
    this.handler = options.handler;
    this.inbox = identifier(options.inboxTable ?? "outbox_inbox", "inboxTable");
    this.hashes = identifier(options.hashTable ?? "outbox_inbox_record", "hashTable");
    this.leases = identifier(options.leaseTable ?? "outbox_inbox_lease", "leaseTable");
  }

  /** Creates the tables if they are missing (or run the statements of the README yourself). */
  async createTables(): Promise<void> {
    await this.pool.query(
      `CREATE TABLE IF NOT EXISTS ${this.inbox} (
         source VARCHAR(64) NOT NULL PRIMARY KEY,
         epoch BIGINT UNSIGNED NOT NULL,
         applied_version BIGINT UNSIGNED NOT NULL,
         stream_seq BIGINT UNSIGNED NOT NULL,
         stream_name VARCHAR(255) NOT NULL,
         record_key VARCHAR(255) NOT NULL,
         columns_json TEXT NOT NULL,
         checksum CHAR(16) NOT NULL,
         record_count BIGINT UNSIGNED NOT NULL,
         generation BIGINT UNSIGNED NOT NULL
       ) ENGINE = InnoDB`,
    );
    await this.pool.query(
      `CREATE TABLE IF NOT EXISTS ${this.hashes} (
         source VARCHAR(64) NOT NULL,
         entity_key VARBINARY(2048) NOT NULL,
         record_hash CHAR(16) NOT NULL,
         PRIMARY KEY (source, entity_key)
       ) ENGINE = InnoDB`,
    );
    await this.pool.query(
      `CREATE TABLE IF NOT EXISTS ${this.leases} (
         source VARCHAR(64) NOT NULL PRIMARY KEY,
         holder VARBINARY(255) NOT NULL,
         expires_at TIMESTAMP(6) NOT NULL
       ) ENGINE = InnoDB`,
    );
  }

  async lease(source: string, holder: string, ttlMs: number): Promise<boolean> {
    // On the database's clock, one statement: taken when free or expired, renewed when ours.
    // The assignments run left to right: expires_at sees the holder just decided. Holders compare
    // byte for byte: a table made before holder was VARBINARY has a collation where 'POD-A' and
    // 'pod-a ' are 'pod-a', and two pods would both hold the lease.
    await this.pool.query(
      `INSERT INTO ${this.leases} (source, holder, expires_at) VALUES (?, ?, NOW(6) + INTERVAL ? MICROSECOND)
       ON DUPLICATE KEY UPDATE
         holder = IF(BINARY holder = BINARY VALUES(holder) OR expires_at < NOW(6), VALUES(holder), holder),
         expires_at = IF(BINARY holder = BINARY VALUES(holder), VALUES(expires_at), expires_at)`,
      [source, holder, Math.round(ttlMs * 1000)],
    );
    const [rows] = await this.pool.query<RowDataPacket[]>(
      `SELECT BINARY holder = BINARY ? AS mine FROM ${this.leases} WHERE source = ?`,
      [holder, source],
    );
    return rows.length > 0 && Number(rows[0].mine) === 1;
  }

  async releaseLease(source: string, holder: string): Promise<void> {
    await this.pool.query(`DELETE FROM ${this.leases} WHERE source = ? AND BINARY holder = BINARY ?`, [source, holder]);
  }

  async load(source: string): Promise<InboxRow | null> {
    const [rows] = await this.pool.query<RowDataPacket[]>(
      `SELECT CAST(epoch AS CHAR) AS epoch, CAST(applied_version AS CHAR) AS applied, CAST(stream_seq AS CHAR) AS seq,
              stream_name, record_key, columns_json, checksum, CAST(record_count AS CHAR) AS records,
              CAST(generation AS CHAR) AS generation
         FROM ${this.inbox} WHERE source = ?`,
      [source],
    );
    if (rows.length === 0) return null;
    const r = rows[0];
    const columns = JSON.parse(r.columns_json) as { columns: string[]; numeric: boolean[] };
    return {
      epoch: Number(r.epoch),
      appliedVersion: Number(r.applied),
      streamSeq: Number(r.seq),
      streamName: r.stream_name,
      key: r.record_key,
      columns: columns.columns,
      numeric: columns.numeric,
      sum: BigInt("0x" + r.checksum),
      recordCount: Number(r.records),
      generation: Number(r.generation),
    };
  }

  async beginBootstrap(source: string): Promise<Bootstrap> {
    const conn = await this.pool.getConnection();
    let open = true;
    const end = async (how: "COMMIT" | "ROLLBACK") => {
      if (!open) return;
      open = false;
      let lost = false;
      try {
        await conn.query(how);
      } catch (e) {
        lost = isLost(e);
        throw e;
      } finally {
        if (lost) conn.destroy();
        else conn.release();
      }
    };
    try {
      await conn.query("START TRANSACTION");
      // The inbox row's lock first, for the whole bootstrap: another pod's applyBatch then waits
      // for it and, once it commits, finds the generation moved and rolls back. Without it, under
      // READ COMMITTED (the DELETEs below take no gap locks) an apply of a key that is not there
      // yet commits meanwhile, and the snapshot committed after it leaves that record behind with
      // a checksum that still matches. Only a row that exists is locked: a first bootstrap's
      // FOR UPDATE would lock, under REPEATABLE READ, the gap where other sources' rows go.
      const [held] = await conn.query<RowDataPacket[]>(`SELECT 1 FROM ${this.inbox} WHERE source = ?`, [source]);
      if (held.length > 0) await conn.query(`SELECT 1 FROM ${this.inbox} WHERE source = ? FOR UPDATE`, [source]);
      await conn.query(`DELETE FROM ${this.hashes} WHERE source = ?`, [source]);
      await handlerCall("the handler's reset", () => this.handler.reset(conn, source));
    } catch (e) {
      await end("ROLLBACK").catch(() => undefined);
      throw e;
    }
    return {
      records: async (columns, batch) => {
        if (batch.length === 0) return;
        await conn.query(`INSERT INTO ${this.hashes} (source, entity_key, record_hash) VALUES ?`, [
          batch.map((r) => [source, Buffer.from(r.key, "utf8"), hex(recordHash(r.values))]),
        ]);
        await handlerCall("the handler's load", () =>
          this.handler.load(conn, columns, batch.map((r) => withRecord<T>(columns, r))),
        );
      },
      commit: async (row) => {
        let stored: InboxRow;
        try {
          await conn.query(
            `INSERT INTO ${this.inbox} (source, epoch, applied_version, stream_seq, stream_name, record_key, columns_json,
                                       checksum, record_count, generation)
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 1)
             ON DUPLICATE KEY UPDATE epoch = VALUES(epoch), applied_version = VALUES(applied_version),
               stream_seq = VALUES(stream_seq), stream_name = VALUES(stream_name), record_key = VALUES(record_key),
               columns_json = VALUES(columns_json), checksum = VALUES(checksum), record_count = VALUES(record_count),
               generation = generation + 1`,
            [source, ...this.rowValues(row)],
          );
          const [rows] = await conn.query<RowDataPacket[]>(
            `SELECT CAST(generation AS CHAR) AS generation FROM ${this.inbox} WHERE source = ?`,
            [source],
          );
          stored = { ...row, generation: Number(rows[0].generation) };
        } catch (e) {
          await end("ROLLBACK").catch(() => undefined);
          throw e;
        }
        await end("COMMIT");
        return stored;
      },
      abort: () => end("ROLLBACK"),
    };
  }

  async apply(change: Change, from: InboxRow): Promise<InboxRow | null> {
    return (await this.applyBatch([change], from))?.at(-1) ?? null;
  }

  /**
   * Applies consecutive `changes` in one transaction: the handler's applyBatch (or apply for each),
   * the records' hashes, then one UPDATE of the inbox row, conditional on `from`.
   */
  async applyBatch(changes: readonly Change[], from: InboxRow): Promise<InboxRow[] | null> {
    const conn = await this.pool.getConnection();
    let committed = false;
    let lost = false; // the server closed the connection: not given back to the pool (cli_inbox.ts)
    try {
      await conn.query("START TRANSACTION");
      const rows: InboxRow[] = [];
      const hashes = new Map<string, bigint | null>(); // what this batch wrote, by key
      const writes: { key: Buffer; hash: bigint | null }[] = [];
      let row = from;
      for (const change of changes) {
        const key = Buffer.from(change.key, "utf8");
        let oldHash = hashes.get(change.key);
        if (oldHash === undefined) {
          const [old] = await conn.query<RowDataPacket[]>(
            `SELECT record_hash FROM ${this.hashes} WHERE source = ? AND entity_key = ?`,
            [change.source, key],
          );
          oldHash = old.length > 0 ? BigInt("0x" + old[0].record_hash) : null;
        }
        const newHash = change.values ? recordHash(change.values) : null;
        hashes.set(change.key, newHash);
        writes.push({ key, hash: newHash });
        row = nextRow(row, change, oldHash, newHash);
        rows.push(row);
      }
      const versions = `${changes[0].version}..${changes[changes.length - 1].version}`;
      const handler = this.handler;
      if (handler.applyBatch && changes.length > 1) {
        await handlerCall(`the handler's applyBatch of versions ${versions}`, () =>
          handler.applyBatch?.(conn, changes as readonly Change<T>[]),
        );
      } else {
        for (const change of changes) {
          await handlerCall(`the handler's apply of version ${change.version}`, () => handler.apply(conn, change as Change<T>));
        }
      }
      const source = changes[0].source;
      for (const { key, hash } of writes) {
        if (hash !== null) {
          await conn.query(
            `INSERT INTO ${this.hashes} (source, entity_key, record_hash) VALUES (?, ?, ?)
             ON DUPLICATE KEY UPDATE record_hash = VALUES(record_hash)`,
            [source, key, hex(hash)],
          );
        } else {
          await conn.query(`DELETE FROM ${this.hashes} WHERE source = ? AND entity_key = ?`, [source, key]);
        }
      }
      // Last, and only from the row this consumer knows: when another moved it, all of this is
      // rolled back (its lock makes the two take turns).
      const [moved] = await conn.query<ResultSetHeader>(
        `UPDATE ${this.inbox} SET applied_version = ?, stream_seq = ?, checksum = ?, record_count = ?, columns_json = ?
          WHERE source = ? AND epoch = ? AND applied_version = ? AND generation = ?`,
        [
          row.appliedVersion,
          row.streamSeq,
          hex(row.sum),
          row.recordCount,
          JSON.stringify({ columns: row.columns, numeric: row.numeric }),
          source,
          from.epoch,
          from.appliedVersion,
          from.generation,
        ],
      );
      if (moved.affectedRows !== 1) return null;
      await conn.query("COMMIT");
      committed = true;
      return rows;
    } catch (e) {
      lost = isLost(e);
      throw e;
    } finally {
      if (lost) {
        conn.destroy();
      } else {
        if (!committed) await conn.query("ROLLBACK").catch(() => undefined);
        conn.release();
      }
    }
  }

  private rowValues(row: InboxRow): unknown[] {
    return [
      row.epoch,
      row.appliedVersion,
      row.streamSeq,
      row.streamName,
      row.key,
      JSON.stringify({ columns: row.columns, numeric: row.numeric }),
      hex(row.sum),
      row.recordCount,
    ];
  }
}

/** A connection the server closed (a restart): mysql2 would hand it out again if released. */
function isLost(e: unknown): boolean {
  return (e as { fatal?: boolean } | null)?.fatal === true;
}
