// The stack the tests run against (tools/test starts it and exports where it is; a missing
// service fails, never skips): a database of their own, a bridge process with a config of its
// own, and an `accounts` table kept by the producer rule.
import assert from "node:assert/strict";
import { spawn, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { appendFileSync, closeSync, mkdirSync, openSync, readFileSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { performance } from "node:perf_hooks";
import { fileURLToPath } from "node:url";

import mysql from "mysql2/promise";

export function env(name: string): string {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set: run this suite through tools/test, which starts the stack`);
  return value;
}

const here = dirname(fileURLToPath(import.meta.url));
export const clientRoot = join(here, "..", "..");
export const repoRoot = join(clientRoot, "..", "..");
export const tmp = process.env.OUTBOX_TEST_TMP ?? join(tmpdir(), "outbox-ts-test");
mkdirSync(tmp, { recursive: true });

export const suffix = () => randomBytes(3).toString("hex");

export function mysqlOptions(database?: string): mysql.PoolOptions {
  return {
    host: env("OUTBOX_TEST_MYSQL_HOST"),
    port: Number(env("OUTBOX_TEST_MYSQL_PORT")),
    user: env("OUTBOX_TEST_MYSQL_USER"),
    password: env("OUTBOX_TEST_MYSQL_PASSWORD"),
    database,
  };
}

/**
 * Waits for `done`; `what` says what for, a function when it is a log read at the time out. On a
 * monotonic clock: a step of the machine's wall clock (seen once, about 20 s forward) must not
 * end the wait early.
 */
export async function until(
  done: () => boolean | Promise<boolean>,
  ms: number,
  what: string | (() => string),
): Promise<void> {
  const deadline = performance.now() + ms;
  while (!(await done())) {
    if (performance.now() > deadline) {
      throw new Error(`timed out after ${ms} ms waiting for ${typeof what === "string" ? what : what()}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Notes a secret a test uses: the secrets suite fails if any log of the run holds it. */
export function registerSecret(secret: string): void {
  appendFileSync(join(tmp, "secrets.txt"), secret + "\n");
}

/** A free TCP port on 127.0.0.1. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.on("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const port = (server.address() as { port: number }).port;
      server.close(() => resolve(port));
    });
  });
}

/** A process whose output goes to a log file. */
export class Process {
  readonly child: ChildProcess;
  readonly exited: Promise<number | null>;
  constructor(
    readonly argv: string[],
    readonly logPath: string,
    extraEnv: Record<string, string> = {},
  ) {
    const fd = openSync(logPath, "a");
    this.child = spawn(argv[0], argv.slice(1), { stdio: ["ignore", fd, fd], env: { ...process.env, ...extraEnv } });
    closeSync(fd);
    this.exited = new Promise((resolve) => this.child.on("exit", (code, signal) => resolve(signal ? null : code)));
  }
  log(): string {
    return readFileSync(this.logPath, "utf8");
  }
  async stop(): Promise<number | null> {
    this.child.kill("SIGTERM");
    const timer = setTimeout(() => this.child.kill("SIGKILL"), 20_000);
    const code = await this.exited;
    clearTimeout(timer);
    return code;
  }
  async kill(): Promise<void> {
    this.child.kill("SIGKILL");
    await this.exited;
  }
}

/** A source over an `accounts` table in a database of its own, and the bridge that serves it. */
export class AccountsSource {
  readonly database = "t_ts_" + suffix();
  readonly name = "ts" + suffix();
  readonly outbox = `${this.name}_control_outbox`;
  readonly stream = `CONTROL_${this.name.toUpperCase()}`;
  readonly config = join(tmp, `config-${this.name}.toml`);
  pool!: mysql.Pool;
  bridge: Process | null = null;
  port = 0;

  /** `natsToml`: the config's [nats] section, the stack's nats-server when not given;
   * `sourceToml`: more keys of the [[source]], with {name} for the source's name. */
  static async create(natsToml?: string, sourceToml = ""): Promise<AccountsSource> {
    const s = new AccountsSource();
    const admin = await mysql.createConnection(mysqlOptions());
    await admin.query(`CREATE DATABASE ${s.database}`);
    await admin.end();
    s.pool = mysql.createPool({ ...mysqlOptions(s.database), connectionLimit: 8 });
    try {
      await s.setUp(natsToml, sourceToml);
    } catch (e) {
      await s.close(); // an open pool would keep the test process alive
      throw e;
    }
    return s;
  }

  private async setUp(natsToml: string | undefined, sourceToml: string): Promise<void> {
    await this.pool.query(
      "CREATE TABLE accounts (id BIGINT UNSIGNED PRIMARY KEY, display_name VARCHAR(191) NULL) DEFAULT CHARSET=utf8mb4",
    );
    writeFileSync(
      this.config,
      (natsToml ?? `[nats]\nurl = "${env("OUTBOX_TEST_NATS_URL")}"\n`) +
        `\n[log]\nlevel = "info"\n\n[http]\nlisten = "127.0.0.1:0"\n\n` +
        `[[source]]\nname = "${this.name}"\n` +
        `dsn = "mysql://${env("OUTBOX_TEST_MYSQL_USER")}@${env("OUTBOX_TEST_MYSQL_HOST")}:` +
        `${env("OUTBOX_TEST_MYSQL_PORT")}/${this.database}"\npassword = "${env("OUTBOX_TEST_MYSQL_PASSWORD")}"\n` +
        `poll_interval = "20ms"\nsnapshot_query = "SELECT id, display_name AS displayName FROM accounts"\n` +
        `snapshot_key = "id"\nbatch_size = 500\n` +
        // The tests wait for a replica to verify at the version they wrote last: a summary kept
        // for the default minute would hold that back (a test that wants one sets its own).
        (sourceToml.includes("summary_interval") ? "" : `summary_interval = "0"\n`) +
        sourceToml.replaceAll("{name}", this.name),
    );
    await this.run(["migrate", "--config", this.config]);
  }

  /** Runs the bridge's command `args` to its end; throws unless it exits 0. */
  async run(args: string[]): Promise<string> {
    const p = new Process([env("OUTBOX_TEST_BRIDGE_BIN"), ...args], join(tmp, `cmd-${this.name}-${suffix()}.log`));
    const code = await p.exited;
    if (code !== 0) throw new Error(`outbox-bridge ${args.join(" ")} exited ${code}:\n${p.log()}`);
    return p.log();
  }

  async startBridge(): Promise<void> {
    this.bridge = new Process(
      [env("OUTBOX_TEST_BRIDGE_BIN"), "run", "--config", this.config],
      join(tmp, `bridge-${this.name}.log`),
    );
    const marker = "http: listening on http://";
    await until(() => this.bridge!.log().lastIndexOf(marker) >= 0, 20_000, "the bridge's HTTP port");
    const log = this.bridge.log();
    const at = log.lastIndexOf(marker) + marker.length;
    this.port = Number(log.slice(log.indexOf(":", at) + 1).match(/^[0-9]+/)![0]);
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  /** One business change and its outbox row, in one transaction (the producer rule). */
  async change(id: number, name: string | null, remove = false, conn?: mysql.PoolConnection): Promise<void> {
    const c = conn ?? (await this.pool.getConnection());
    try {
      await c.query("START TRANSACTION");
      if (remove) {
        await c.query("DELETE FROM accounts WHERE id = ?", [id]);
        await c.query(
          `INSERT INTO ${this.outbox} (entity_type, entity_key, op, payload) VALUES ('account', ?, 'delete', NULL)`,
          [String(id)],
        );
      } else {
        await c.query("INSERT INTO accounts VALUES (?, ?) ON DUPLICATE KEY UPDATE display_name = VALUES(display_name)", [
          id,
          name,
        ]);
        await c.query(
          `INSERT INTO ${this.outbox} (entity_type, entity_key, op, payload) SELECT 'account', id, 'upsert',
             JSON_OBJECT('id', id, 'displayName', display_name) FROM accounts WHERE id = ?`,
          [id],
        );
      }
      await c.query("COMMIT");
    } finally {
      if (!conn) c.release();
    }
  }

  /** Accounts 1..count at once, with their outbox rows, in transactions of 5,000. */
  async seed(count: number): Promise<void> {
    for (let from = 1; from <= count; from += 5000) {
      const to = Math.min(count, from + 4999);
      const rows = [];
      for (let id = from; id <= to; ++id) rows.push([id, `Account ${id}`]);
      const c = await this.pool.getConnection();
      try {
        await c.query("START TRANSACTION");
        await c.query("INSERT INTO accounts VALUES ?", [rows]);
        await c.query(
          `INSERT INTO ${this.outbox} (entity_type, entity_key, op, payload) SELECT 'account', id, 'upsert',
             JSON_OBJECT('id', id, 'displayName', display_name) FROM accounts WHERE id BETWEEN ? AND ? ORDER BY id`,
          [from, to],
        );
        await c.query("COMMIT");
      } finally {
        c.release();
      }
    }
  }

  async state(): Promise<{ epoch: number; assigned: number; published: number; seq: number }> {
    const [rows] = await this.pool.query<mysql.RowDataPacket[]>(
      `SELECT epoch, assigned_through, published_through, published_stream_seq FROM outbox_source_state
        WHERE source = ?`,
      [this.name],
    );
    if (rows.length === 0) return { epoch: 0, assigned: 0, published: 0, seq: 0 };
    const r = rows[0];
    return {
      epoch: Number(r.epoch),
      assigned: Number(r.assigned_through),
      published: Number(r.published_through),
      seq: Number(r.published_stream_seq),
    };
  }

  /** Waits until everything written so far is published. */
  async drained(ms = 60_000): Promise<number> {
    let published = 0;
    await until(
      async () => {
        const [rows] = await this.pool.query<mysql.RowDataPacket[]>(`SELECT COUNT(*) AS n FROM ${this.outbox}`);
        const s = await this.state();
        published = s.published;
        return s.assigned === s.published && Number(rows[0].n) === s.published && s.published > 0;
      },
      ms,
      `source ${this.name} to publish everything\n${this.bridge?.log().slice(-3000) ?? ""}`,
    );
    return published;
  }

  /** The table as a replica should hold it: id -> display_name. */
  async table(): Promise<Map<string, string | null>> {
    const [rows] = await this.pool.query<mysql.RowDataPacket[]>("SELECT CAST(id AS CHAR) AS id, display_name FROM accounts");
    return new Map(rows.map((r) => [r.id as string, r.display_name as string | null]));
  }

  async close(): Promise<void> {
    if (this.bridge) await this.bridge.stop();
    await this.pool.query(`DROP DATABASE IF EXISTS ${this.database}`).catch(() => undefined);
    await this.pool.end();
  }
}

/** The statements that make outbox table `table` as `outbox-bridge migrate` does: the project's own
 * schema files (sql/outbox/001, the table; 003, its headers column). */
export function outboxSchema(table: string): string[] {
  return ["001_outbox_table.sql", "003_headers_column.sql"].flatMap((file) =>
    readFileSync(join(repoRoot, "sql", "outbox", file), "utf8")
      .replaceAll("{{outbox_table}}", table)
      .split("\n")
      .filter((line) => !line.trimStart().startsWith("--"))
      .join("\n")
      .split(/;\s*(?:\n|$)/)
      .map((s) => s.trim())
      .filter((s) => s.length > 0),
  );
}

/** A database for a consumer's own tables. */
export async function consumerDatabase(): Promise<{ name: string; pool: mysql.Pool }> {
  const name = "t_ts_consumer_" + suffix();
  const admin = await mysql.createConnection(mysqlOptions());
  await admin.query(`CREATE DATABASE ${name}`);
  await admin.end();
  return { name, pool: mysql.createPool({ ...mysqlOptions(name), connectionLimit: 2 }) };
}

/** consumer_fixture.ts on `source`, keeping its tables in `database`. */
export function startConsumer(source: AccountsSource, database: string, log: string): Process {
  return new Process([process.execPath, join(clientRoot, "dist", "test", "consumer_fixture.js")], log, {
    CONSUMER_URL: source.url,
    CONSUMER_SOURCE: source.name,
    CONSUMER_DATABASE: database,
  });
}

/** Kills `consumer` if it still runs, drops the consumer's database and the source. */
export async function cleanUp(
  consumerProcess: Process | null,
  consumer: { name: string; pool: mysql.Pool },
  source: AccountsSource,
): Promise<void> {
  if (consumerProcess && consumerProcess.child.exitCode === null) await consumerProcess.kill();
  await consumer.pool.query(`DROP DATABASE IF EXISTS ${consumer.name}`).catch(() => undefined);
  await consumer.pool.end();
  await source.close();
}

/** What consumer_fixture.ts holds: id -> display_name. */
export async function replicaTable(pool: mysql.Pool): Promise<Map<string, string | null>> {
  const [rows] = await pool.query<mysql.RowDataPacket[]>(
    "SELECT CAST(id AS CHAR) AS id, display_name FROM accounts_replica",
  );
  return new Map(rows.map((r) => [r.id as string, r.display_name as string | null]));
}

export function assertSameTable(replica: Map<string, string | null>, table: Map<string, string | null>): void {
  assert.equal(replica.size, table.size, "the replica holds as many records as the table");
  for (const [id, name] of table) assert.equal(replica.get(id), name, `record ${id}`);
}
