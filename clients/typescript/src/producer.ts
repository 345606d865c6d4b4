// Appending outbox rows by the producer rule (README, "The producer rule"): in the same
// transaction as the business write, after it, with the payload built by SQL from the row just
// written — so the payload is what the snapshot query returns, and two changes of one entity are
// versioned in commit order.

import type { Connection, ExecuteValues, PoolConnection, ResultSetHeader } from "mysql2/promise";

import { headersProblem, keyProblem } from "./rules.js";

type Queryable = Pick<Connection | PoolConnection, "execute" | "query">;

const IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_]{0,63}$/;

/** A row of the business table, as SQL that reads it: `json` (a JSON_OBJECT(...) over its
 * columns), the table it is `from`, and the `where` clause (with `?` placeholders) that finds it.
 * These are code, not data: values go in `params`. */
export interface PayloadFrom {
  json: string;
  from: string;
  where: string;
  params?: ExecuteValues[];
}

/** A breach of the producer rule, or a row the bridge would refuse; nothing was appended. */
export class ProducerRuleError extends Error {}

export interface OutboxProducerOptions {
  /** The source's outbox table, e.g. "account_control_outbox". */
  table: string;
  /** The entity type of the rows this producer appends (a subject token), e.g. "account". */
  entityType: string;
}

export class OutboxProducer {
  readonly table: string;
  readonly entityType: string;

  constructor(options: OutboxProducerOptions) {
    if (!IDENTIFIER.test(options.table)) throw new ProducerRuleError(`outbox table '${options.table}' is no identifier`);
    if (!/^[^\s.*>\x00-\x1f\x7f]+$/.test(options.entityType)) {
      throw new ProducerRuleError(`entity type '${options.entityType}' is not a subject token`);
    }
    this.table = options.table;
    this.entityType = options.entityType;
  }

  /** Runs `work` in one transaction on `conn` (BEGIN ... COMMIT, ROLLBACK when it throws). */
  async transaction<T>(conn: Queryable, work: (tx: OutboxTransaction) => Promise<T>): Promise<T> {
    await conn.query("START TRANSACTION");
    try {
      const result = await work(new OutboxTransaction(this, conn));
      await conn.query("COMMIT");
      return result;
    } catch (error) {
      await conn.query("ROLLBACK").catch(() => undefined);
      throw error;
    }
  }
}

export class OutboxTransaction {
  private wrote = false;

  constructor(
    private readonly producer: OutboxProducer,
    private readonly conn: Queryable,
  ) {}

  /** The business write (INSERT, UPDATE or DELETE): it comes first, so its row lock orders two
   * changes of one entity. Returns the rows it affected. */
  async write(sql: string, params: ExecuteValues[] = []): Promise<number> {
    const [result] = await this.conn.execute<ResultSetHeader>(sql, params);
    this.wrote = true;
    return result.affectedRows;
  }

  /** Appends the upsert of entity `key`, its payload read from the row just written. Throws
   * ProducerRuleError (and the transaction rolls back) before any business write, or when the row
   * is not there. `headers` become message headers (e.g. the W3C trace context). */
  async upsert(key: string | number | bigint, payload: PayloadFrom, headers?: Record<string, string>): Promise<void> {
    const entityKey = this.check(key, headers);
    if (!IDENTIFIER.test(payload.from)) throw new ProducerRuleError(`'${payload.from}' is no table name`);
    const [result] = await this.conn.execute<ResultSetHeader>(
      `INSERT INTO \`${this.producer.table}\` (entity_type, entity_key, op, payload, headers) ` +
        `SELECT ?, ?, 'upsert', ${payload.json}, ? FROM \`${payload.from}\` WHERE ${payload.where}`,
      [this.producer.entityType, entityKey, headersJson(headers), ...(payload.params ?? [])],
    );
    if (result.affectedRows !== 1) {
      throw new ProducerRuleError(
        `the upsert of ${this.producer.entityType} '${entityKey}' found ${result.affectedRows} rows in ${payload.from} ` +
          "where it should read the one just written",
      );
    }
  }

  /** Appends the delete of entity `key` (no payload). */
  async delete(key: string | number | bigint, headers?: Record<string, string>): Promise<void> {
    const entityKey = this.check(key, headers);
    await this.conn.execute(
      `INSERT INTO \`${this.producer.table}\` (entity_type, entity_key, op, payload, headers) VALUES (?, ?, 'delete', NULL, ?)`,
      [this.producer.entityType, entityKey, headersJson(headers)],
    );
  }

  private check(key: string | number | bigint, headers?: Record<string, string>): string {
    if (!this.wrote) {
      throw new ProducerRuleError("the outbox row comes after the business write, in the same transaction: write() first");
    }
    const entityKey = String(key);
    const problem = keyProblem(entityKey) ?? (headers ? headersProblem(headers) : undefined);
    if (problem) throw new ProducerRuleError(problem);
    return entityKey;
  }
}

function headersJson(headers?: Record<string, string>): string | null {
  return headers && Object.keys(headers).length > 0 ? JSON.stringify(headers) : null;
}
