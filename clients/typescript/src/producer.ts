// Appending outbox rows by the producer rule (README, "The producer rule"): in the caller's own
// transaction, after the business write, with the key and the payload built by SQL from the row
// just written — so both are what the snapshot query returns, and two changes of one entity are
// versioned in commit order. The producer never begins, commits or rolls back: the transaction is
// the caller's (a mysql2 connection, an ORM's transaction handle; producer_handle.ts).

import { assertInTransaction, okPacket, ProducerRuleError, rowsOf, sqlOf, type RunSql, type TransactionHandle } from "./producer_handle.js";
import { hasLoneSurrogate, headersProblem, keyProblem } from "./rules.js";

export { ProducerRuleError };

const IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_]{0,63}$/;

export interface OutboxProducerOptions {
  /** The source's outbox table, e.g. "account_control_outbox". */
  table: string;
  /** The entity type of the rows this producer appends (a subject token), e.g. "account". */
  entityType: string;
  /** The business table the rows are read from, e.g. "accounts". */
  from: string;
  /** SQL over a row of `from`: the entity's key, as the snapshot query's `snapshot_key` column
   * reads it, e.g. "id". Its text is taken as the server renders it (a DECIMAL's scale, a
   * ZEROFILL column's zeros, a BIGINT beyond 2^53 exactly). Code, not data. */
  key: string;
  /** SQL over a row of `from`: the payload, the snapshot query's fields as a JSON object, e.g.
   * "JSON_OBJECT('id', id, 'displayName', display_name)". Code, not data. */
  payload: string;
}

/** Which row of `from` a change is about. */
export interface RowChange {
  /** The condition that finds the one row (code, with `?` placeholders), e.g. "id = ?". */
  where: string;
  /** The values of its placeholders: strings, bigints or numbers up to 2^53. */
  params?: unknown[];
  /** Message headers, name → string (e.g. the W3C trace context); reserved names are refused. */
  headers?: Record<string, string>;
}

export class OutboxProducer {
  readonly table: string;
  readonly entityType: string;
  readonly from: string;
  readonly key: string;
  readonly payload: string;

  constructor(options: OutboxProducerOptions) {
    if (!IDENTIFIER.test(options.table)) throw new ProducerRuleError(`outbox table '${options.table}' is no identifier`);
    if (!IDENTIFIER.test(options.from)) throw new ProducerRuleError(`table '${options.from}' is no identifier`);
    if (!/^[^\s.*>\x00-\x1f\x7f]+$/.test(options.entityType)) {
      throw new ProducerRuleError(`entity type '${options.entityType}' is not a subject token`);
    }
    for (const name of ["key", "payload"] as const) {
      if (typeof options[name] !== "string" || options[name].trim() === "") throw new ProducerRuleError(`${name} is empty`);
      // The statements bind their own values ahead of where's: a placeholder here would take one
      // of them (and Knex reads a ? in a string literal as one too).
      if (options[name].includes("?")) throw new ProducerRuleError(`${name} holds a '?': values go in params, after where`);
    }
    this.table = options.table;
    this.entityType = options.entityType;
    this.from = options.from;
    this.key = options.key;
    this.payload = options.payload;
  }

  /** Appends the upsert of the row `change.where` finds, in the caller's transaction `tx`, AFTER
   * the business write that wrote it. Resolves to the entity key's text. */
  async upsert(tx: TransactionHandle, change: RowChange): Promise<string> {
    const { run, params, headers } = await this.prepare(tx, change);
    const key = await this.readKey(run, change, params, "", "upsert() reads the row the business write just wrote");
    const result = okPacket(
      await run(
        `INSERT INTO \`${this.table}\` (entity_type, entity_key, op, payload, headers) ` +
          `SELECT ?, CONCAT(${this.key}), 'upsert', ${this.payload}, ? FROM \`${this.from}\` WHERE ${change.where}`,
        [this.entityType, headers, ...params],
      ),
    );
    if (result?.affectedRows !== 1) {
      throw new ProducerRuleError(`the upsert of ${this.entityType} '${key}' appended ${result?.affectedRows} rows, not 1: roll back`);
    }
    return key;
  }

  /** Appends the delete of the row `change.where` finds, in the caller's transaction `tx`, BEFORE
   * the business DELETE: the key is read from the row while it is there, and the read locks it
   * (FOR UPDATE) as the DELETE would, so two changes of the entity keep their order. Resolves to
   * the entity key's text. */
  async delete(tx: TransactionHandle, change: RowChange): Promise<string> {
    const { run, params, headers } = await this.prepare(tx, change);
    const key = await this.readKey(
      run,
      change,
      params,
      " FOR UPDATE",
      "delete() comes before the business DELETE: it reads the key from the row and locks it",
    );
    await run(
      `INSERT INTO \`${this.table}\` (entity_type, entity_key, op, payload, headers) VALUES (?, ?, 'delete', NULL, ?)`,
      [this.entityType, key, headers],
    );
    return key;
  }

  /** Refuses before anything is appended: a handle that is no open transaction, values a driver
   * would send otherwise than JavaScript holds them, headers the bridge would refuse. */
  private async prepare(tx: TransactionHandle, change: RowChange): Promise<{ run: RunSql; params: unknown[]; headers: string | null }> {
    const run = sqlOf(tx);
    if (typeof change.where !== "string" || change.where.trim() === "") throw new ProducerRuleError("where is empty");
    const params = change.params ?? [];
    params.forEach((value, i) => {
      if (typeof value === "number" && Number.isInteger(value) && !Number.isSafeInteger(value)) {
        throw new ProducerRuleError(`params[${i}] (${value}) is beyond 2^53 and not exact: pass it as a string or a bigint`);
      }
      if (typeof value === "string" && hasLoneSurrogate(value)) {
        throw new ProducerRuleError(`params[${i}] holds a lone surrogate (it would be sent as U+FFFD, merging two keys)`);
      }
    });
    const headers = change.headers && Object.keys(change.headers).length > 0 ? change.headers : undefined;
    const problem = headers ? headersProblem(headers) : undefined;
    if (problem) throw new ProducerRuleError(problem);
    await assertInTransaction(run);
    return { run, params, headers: headers ? JSON.stringify(headers) : null };
  }

  /** The key's text of the one row `change.where` finds, as the server renders it (CONCAT: the
   * text a snapshot reads, where storing a number into entity_key would drop a ZEROFILL's zeros). */
  private async readKey(run: RunSql, change: RowChange, params: unknown[], lock: string, rule: string): Promise<string> {
    const rows = rowsOf(
      await run(`SELECT CONCAT(${this.key}) AS entity_key FROM \`${this.from}\` WHERE ${change.where} LIMIT 2${lock}`, params),
    );
    if (!rows || rows.length !== 1) {
      const found = rows ? (rows.length === 0 ? "no row" : "more than one row") : "no rows (the driver returned none)";
      throw new ProducerRuleError(`${this.entityType}: found ${found} in ${this.from} where ${change.where}; ${rule}`);
    }
    const key = keyText(rows[0].entity_key);
    const problem = keyProblem(key);
    if (problem) throw new ProducerRuleError(`${this.entityType}: ${problem}`);
    return key;
  }
}

// The key as the driver hands it over: a string, or bytes when the key expression is binary
// (VARBINARY, a BINARY collation), which must be UTF-8 to be a subject token and a header.
function keyText(value: unknown): string {
  if (typeof value === "string") return value;
  if (value instanceof Uint8Array) {
    try {
      return new TextDecoder("utf-8", { fatal: true }).decode(value);
    } catch {
      throw new ProducerRuleError("entity_key is not valid UTF-8");
    }
  }
  throw new ProducerRuleError(`entity_key is ${value === null ? "NULL" : typeof value}, not text`);
}
