// The CLI's --inbox (bin/outbox-replica.mjs): the replica and its inbox row in MySQL/MariaDB
// through MysqlInbox, the records in `outbox_replica_record` (each its values as a JSON array of
// strings and nulls, in the row's column order: columns_json says which are numbers), the tables `outbox-bridge replica --inbox` uses (src/replica/mysql_inbox.cpp): either
// consumer resumes from what the other left. The DSN is a source's of the bridge (README,
// "Sources"), read by the same rules (src/config/values.cpp, Dsn::parse); the password never in
// it (a flag shows in `ps`), from OUTBOX_REPLICA_INBOX_PASSWORD or _FILE.

import { once } from "node:events";
import { createWriteStream, readFileSync } from "node:fs";

import mysql from "mysql2/promise";
import type { Connection as CallbackConnection } from "mysql2";
import type { Pool, PoolConnection, PoolOptions, RowDataPacket } from "mysql2/promise";

import { dumpHead, dumpRecord, dumpTail } from "./dump.js";
import { MysqlInbox } from "./mysql_inbox.js";
import type { InboxRow, ReplicaRecord } from "./store.js";

export type SslMode = "DISABLED" | "PREFERRED" | "REQUIRED" | "VERIFY_CA" | "VERIFY_IDENTITY";

export interface MysqlDsn {
  user: string;
  password: string;
  host: string;
  port: number;
  database: string;
  socket?: string;
  sslMode: SslMode;
  sslCa?: string;
  sslCert?: string;
  sslKey?: string;
}

const MODES: SslMode[] = ["DISABLED", "PREFERRED", "REQUIRED", "VERIFY_CA", "VERIFY_IDENTITY"];
const FORM = "expected mysql://USER[:PASSWORD]@HOST[:PORT]/DATABASE[?PARAM=VALUE&...]";

function decode(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    throw new Error("a bad %XX escape");
  }
}

/** A DSN as the bridge reads a source's; throws saying why it is not one (never echoing a password). */
export function parseMysqlDsn(text: string): MysqlDsn {
  if (!text.startsWith("mysql://")) throw new Error(`must start with mysql:// (${FORM})`);
  let rest = text.slice("mysql://".length);
  const at = rest.indexOf("@");
  if (at < 0) throw new Error(`no USER@ (${FORM})`);
  const path = rest.indexOf("/", at);
  const query = rest.indexOf("?", path < 0 ? at : path);
  const firstSpecial = rest.search(/[/?#[\]]/);
  const secondAt = rest.indexOf("@", at + 1);
  if ((firstSpecial >= 0 && firstSpecial < at) || (secondAt >= 0 && (query < 0 || secondAt < query))) {
    throw new Error("the user or password holds an unescaped '@', '/', '?', '#', '[' or ']': %-escape them");
  }
  const userinfo = rest.slice(0, at);
  rest = rest.slice(at + 1);
  const colon = userinfo.indexOf(":");
  const user = decode(colon < 0 ? userinfo : userinfo.slice(0, colon));
  const password = colon < 0 ? "" : decode(userinfo.slice(colon + 1));
  if (user === "") throw new Error("the user is empty");
  const slash = rest.indexOf("/");
  if (slash < 0) throw new Error(`no /DATABASE (${FORM})`);
  const hostport = rest.slice(0, slash);
  let host: string;
  let port = "";
  if (hostport.startsWith("[")) {
    const close = hostport.indexOf("]");
    if (close < 0) throw new Error("an IPv6 host without its closing ']'");
    host = hostport.slice(1, close);
    const after = hostport.slice(close + 1);
    if (after !== "" && !after.startsWith(":")) throw new Error("text after the IPv6 host");
    port = after.slice(1);
  } else {
    const c = hostport.lastIndexOf(":");
    host = c < 0 ? hostport : hostport.slice(0, c);
    if (c >= 0) port = hostport.slice(c + 1);
    if (host.includes(":")) throw new Error("an IPv6 host must be in brackets: mysql://USER@[::1]:3306/DATABASE");
  }
  if (host === "") throw new Error("the host is empty");
  if (!/^[A-Za-z0-9_.:-]{1,253}$/.test(host)) throw new Error(`the host '${host}' is not a host name or an IP address`);
  let portNumber = 3306;
  if (port !== "" || hostport.endsWith(":")) {
    portNumber = Number(port);
    if (!/^[0-9]+$/.test(port) || portNumber < 1 || portNumber > 65535) throw new Error(`bad port '${port}'`);
  }
  const pathquery = rest.slice(slash + 1);
  const q = pathquery.indexOf("?");
  const database = q < 0 ? pathquery : pathquery.slice(0, q);
  if (!/^[A-Za-z_][A-Za-z0-9_]{0,63}$/.test(database)) {
    throw new Error(`database '${database}' must match ^[A-Za-z_][A-Za-z0-9_]{0,63}$`);
  }
  const dsn: MysqlDsn = { user, password, host, port: portNumber, database, sslMode: "PREFERRED" };
  let modeGiven = false;
  if (q >= 0) {
    const params = pathquery.slice(q + 1);
    if (params === "" || params.endsWith("&") || params.includes("&&")) throw new Error("an empty DSN parameter");
    const given = new Set<string>();
    for (const item of params.split("&")) {
      const eq = item.indexOf("=");
      const name = eq < 0 ? item : item.slice(0, eq);
      if (given.has(name)) throw new Error(`DSN parameter '${name}' given twice`);
      given.add(name);
      const value = eq < 0 ? "" : decode(item.slice(eq + 1));
      if (value === "") throw new Error(`DSN parameter '${name}' has no value`);
      if (name === "socket") dsn.socket = value;
      else if (name === "ssl-mode") {
        const mode = value.toUpperCase() as SslMode;
        if (!MODES.includes(mode)) throw new Error(`ssl-mode '${value}' is not one of ${MODES.join(", ")}`);
        dsn.sslMode = mode;
        modeGiven = true;
      } else if (name === "ssl-ca") dsn.sslCa = value;
      else if (name === "ssl-cert") dsn.sslCert = value;
      else if (name === "ssl-key") dsn.sslKey = value;
      else throw new Error(`unknown DSN parameter '${name}' (known: socket, ssl-mode, ssl-ca, ssl-cert, ssl-key)`);
    }
  }
  if (dsn.socket && dsn.host !== "localhost") throw new Error(`socket= needs the host localhost, not '${dsn.host}'`);
  const anyFile = Boolean(dsn.sslCa || dsn.sslCert || dsn.sslKey);
  if (!modeGiven) {
    dsn.sslMode = dsn.sslCa ? "VERIFY_CA" : dsn.sslCert || dsn.sslKey ? "REQUIRED" : dsn.socket ? "DISABLED" : "PREFERRED";
  }
  if (dsn.sslMode === "DISABLED" && anyFile) throw new Error("ssl-ca, ssl-cert and ssl-key need TLS, but ssl-mode is DISABLED");
  if (dsn.sslMode === "PREFERRED" && anyFile) {
    throw new Error("ssl-mode PREFERRED falls back to plain text: with ssl-ca, ssl-cert or ssl-key use REQUIRED, VERIFY_CA or VERIFY_IDENTITY");
  }
  if (!dsn.sslCert !== !dsn.sslKey) throw new Error("ssl-cert and ssl-key go together");
  if (dsn.sslMode === "VERIFY_CA" && !dsn.sslCa) throw new Error("ssl-mode VERIFY_CA needs ssl-ca=PATH");
  return dsn;
}

/** mysql2's options for `dsn`; `tls` false: PREFERRED against a server that offers no TLS. */
export function poolOptions(dsn: MysqlDsn, tls = true): PoolOptions {
  const options: PoolOptions = {
    user: dsn.user,
    password: dsn.password,
    database: dsn.database,
    connectionLimit: 2,
    supportBigNumbers: true,
    bigNumberStrings: true,
    ...(dsn.socket ? { socketPath: dsn.socket } : { host: dsn.host, port: dsn.port }),
  };
  if (dsn.sslMode === "DISABLED" || !tls) return options;
  const read = (file?: string) => (file ? readFileSync(file) : undefined);
  options.ssl = {
    ca: read(dsn.sslCa),
    cert: read(dsn.sslCert),
    key: read(dsn.sslKey),
    // REQUIRED and PREFERRED take any certificate; VERIFY_CA checks it against ssl-ca, not the
    // name it is for; VERIFY_IDENTITY both.
    rejectUnauthorized: dsn.sslMode === "VERIFY_CA" || dsn.sslMode === "VERIFY_IDENTITY",
    ...(dsn.sslMode === "VERIFY_CA" ? { checkServerIdentity: () => undefined } : {}),
  };
  return options;
}

const RECORDS = "outbox_replica_record";

/** The store of the CLI's --inbox and what --dump reads back from it. */
export class CliInbox {
  readonly store: MysqlInbox;

  private constructor(
    private readonly pool: Pool,
    private readonly source: string,
  ) {
    this.store = new MysqlInbox({
      pool,
      handler: {
        reset: async (conn: PoolConnection, s: string) => {
          await conn.query(`DELETE FROM ${RECORDS} WHERE source = ?`, [s]);
        },
        load: async (conn: PoolConnection, _columns: readonly string[], records: readonly ReplicaRecord[]) => {
          if (records.length === 0) return;
          await conn.query(`INSERT INTO ${RECORDS} (source, entity_key, record_values) VALUES ?`, [
            records.map((r) => [source, Buffer.from(r.key, "utf8"), Buffer.from(JSON.stringify(r.values))]),
          ]);
        },
        apply: async (conn: PoolConnection, change) => {
          const key = Buffer.from(change.key, "utf8");
          if (change.values === null) {
            await conn.query(`DELETE FROM ${RECORDS} WHERE source = ? AND entity_key = ?`, [change.source, key]);
            return;
          }
          await conn.query(
            `INSERT INTO ${RECORDS} (source, entity_key, record_values) VALUES (?, ?, ?)
             ON DUPLICATE KEY UPDATE record_values = VALUES(record_values)`,
            [change.source, key, Buffer.from(JSON.stringify(change.values))],
          );
        },
      },
    });
  }

  /** Connects (PREFERRED: TLS when the server offers it) and creates the tables when missing. */
  static async open(dsnText: string, password: string, source: string): Promise<CliInbox> {
    const dsn = { ...parseMysqlDsn(dsnText), password };
    let tls = true;
    if (dsn.sslMode === "PREFERRED") {
      const probe = await mysql.createConnection(poolOptions(dsn)).catch((e: { code?: string }) => e);
      if ((probe as { code?: string }).code === "HANDSHAKE_NO_SSL_SUPPORT") tls = false;
      else await (probe as mysql.Connection).end?.().catch(() => undefined);
    }
    const inbox = new CliInbox(mysql.createPool(poolOptions(dsn, tls)), source);
    return inbox;
  }

  /** Creates the tables when they are missing. */
  async createTables(): Promise<void> {
    await this.store.createTables();
    await this.pool.query(
      `CREATE TABLE IF NOT EXISTS ${RECORDS} (source VARCHAR(64) NOT NULL, entity_key VARBINARY(2048) NOT NULL,
         record_values LONGBLOB NOT NULL, PRIMARY KEY (source, entity_key)) ENGINE = InnoDB`,
    );
  }

  /**
   * Writes the replica to `file` as --dump does (dump.ts), as of one moment and streamed: the
   * records come in the byte order of their keys (entity_key is VARBINARY) and are written as they
   * come, so memory stays flat whatever their number (a read of them all into a map took the CLI
   * to 280 MB for 200,000 records). A pooled connection the server closed meanwhile (a restart)
   * is thrown away and the dump made on a new one: mysql2 hands out idle connections without
   * checking them, and one released after it failed came back again.
   */
  async writeDump(file: string): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.inSnapshot((conn) => this.writeDumpOn(conn, file));
      } catch (e) {
        if (!(e as { fatal?: boolean }).fatal || attempt > 2) throw e;
      }
    }
  }

  private async writeDumpOn(conn: PoolConnection, file: string): Promise<void> {
    const out = createWriteStream(file);
    const failed = once(out, "error").then(([e]) => Promise.reject(e as Error));
    failed.catch(() => undefined);
    let pending = "";
    const write = async (text: string, flush = false) => {
      pending += text;
      if (pending.length < 1 << 16 && !flush) return;
      const chunk = pending;
      pending = "";
      if (!out.write(chunk)) await Promise.race([once(out, "drain"), failed]);
    };
    try {
      const row = await this.readRow(conn);
      await write(dumpHead(this.source, row));
      let count = 0;
      if (row !== null) {
        // mysql2's promise wrapper holds the callback connection, whose query streams (its type
        // says otherwise).
        const records = (conn.connection as unknown as CallbackConnection)
          .query({ sql: `SELECT record_values FROM ${RECORDS} WHERE source = ? ORDER BY entity_key`, values: [this.source] })
          .stream({ highWaterMark: 256 });
        for await (const r of records as AsyncIterable<RowDataPacket>) {
          await write((count === 0 ? "" : ",") + dumpRecord(row, JSON.parse((r.record_values as Buffer).toString("utf8"))));
          count++;
        }
      }
      await write(dumpTail(row, count), true);
      out.end();
      await Promise.race([once(out, "finish"), failed]);
    } catch (e) {
      out.destroy();
      throw e;
    }
  }

  // The inbox row, or null.
  private async readRow(conn: PoolConnection): Promise<InboxRow | null> {
    const [rows] = await conn.query<RowDataPacket[]>(
      `SELECT CAST(epoch AS CHAR) AS epoch, CAST(applied_version AS CHAR) AS applied, columns_json, record_key, checksum
         FROM outbox_inbox WHERE source = ?`,
      [this.source],
    );
    if (rows.length === 0) return null;
    const { columns, numeric } = JSON.parse(rows[0].columns_json) as { columns: string[]; numeric: boolean[] };
    return {
      epoch: Number(rows[0].epoch),
      appliedVersion: Number(rows[0].applied),
      key: rows[0].record_key,
      columns,
      numeric,
      sum: BigInt("0x" + rows[0].checksum),
    } as InboxRow;
  }

  // `f` on a pooled connection inside one consistent snapshot; a connection the server closed is
  // destroyed, not released to the pool.
  private async inSnapshot<T>(f: (conn: PoolConnection) => Promise<T>): Promise<T> {
    const conn = await this.pool.getConnection();
    let lost = false;
    try {
      await conn.query("START TRANSACTION WITH CONSISTENT SNAPSHOT");
      return await f(conn);
    } catch (e) {
      lost = (e as { fatal?: boolean }).fatal === true;
      throw e;
    } finally {
      if (lost) {
        conn.destroy();
      } else {
        await conn.query("COMMIT").catch(() => undefined);
        conn.release();
      }
    }
  }

  async close(): Promise<void> {
    await this.pool.end().catch(() => undefined);
  }
}
