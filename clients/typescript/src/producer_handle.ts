// The producer's one seam: "run this statement, with these values, on the caller's transaction".
// The caller hands over what its code already holds inside a transaction — a mysql2 connection on
// which it began one, TypeORM's EntityManager or QueryRunner inside `dataSource.transaction()`,
// Knex's `trx` — or a function of its own; `sqlOf` turns it into a `RunSql`. What runs statements
// on any connection of a pool is refused here: the business write, the outbox row and the commit
// would go to different connections.

/** Runs one statement on the caller's transaction and resolves to what the driver returns:
 * the rows of a SELECT (an array, or mysql2's `[rows, fields]`), and for any other statement an
 * object with `affectedRows` and `serverStatus` (mysql2's ResultSetHeader, mysql's OkPacket). */
export type RunSql = (sql: string, params: unknown[]) => Promise<unknown>;

/** A mysql2/promise Connection or PoolConnection on which the caller began a transaction. A Pool
 * (whose type extends Connection's) does not fit: it has `getConnection`. */
export interface Mysql2Transaction {
  execute(sql: string, values: never[]): Promise<unknown>;
  beginTransaction(): Promise<void>;
  getConnection?: never;
}

/** TypeORM's QueryRunner after `startTransaction()`. */
export interface TypeOrmQueryRunner {
  readonly isTransactionActive: boolean;
  query(query: string, parameters?: never[]): Promise<unknown>;
}

/** The TypeORM EntityManager that `dataSource.transaction()` hands its callback (its
 * `queryRunner` is that transaction's). */
export interface TypeOrmEntityManager {
  readonly "@instanceof": symbol;
  readonly queryRunner?: TypeOrmQueryRunner;
}

/** Knex's `trx`, from `knex.transaction()`. */
export interface KnexTransaction {
  (...args: never[]): unknown;
  raw(...args: never[]): PromiseLike<unknown>;
  isTransaction?: boolean;
}

export type TransactionHandle = Mysql2Transaction | TypeOrmQueryRunner | TypeOrmEntityManager | KnexTransaction | RunSql;

/** A breach of the producer rule (README, "The producer rule"), or a row the bridge would refuse;
 * thrown before anything was appended. */
export class ProducerRuleError extends Error {}

type Fields = Record<string, unknown>;

/** The statement runner of `handle`; ProducerRuleError for one that is no transaction. */
export function sqlOf(handle: TransactionHandle): RunSql {
  if (typeof handle === "function") {
    const f = handle as unknown as Fields;
    if (typeof f.raw !== "function" && !("isTransaction" in f)) return handle as RunSql;
    if (f.isTransaction !== true) {
      throw new ProducerRuleError(
        "a Knex instance runs each query on a connection of its pool: pass the trx that knex.transaction() hands you",
      );
    }
    return (sql, params) => Promise.resolve((f.raw as (s: string, p: unknown[]) => PromiseLike<unknown>)(sql, params));
  }
  if (handle === null || typeof handle !== "object") throw new ProducerRuleError(`${String(handle)} is no transaction handle`);
  const h = handle as unknown as Fields;
  if (typeof h.getConnection === "function") {
    throw new ProducerRuleError(
      "a pool runs each statement on any of its connections (the business write, the outbox row and the commit " +
        "could go to three): take one with getConnection(), begin the transaction on it and pass that",
    );
  }
  if (h["@instanceof"] === Symbol.for("DataSource") || typeof h.createQueryRunner === "function") {
    throw new ProducerRuleError(
      "a TypeORM DataSource runs each query on a connection of its pool: pass the EntityManager that " +
        "dataSource.transaction() hands you",
    );
  }
  if (h["@instanceof"] === Symbol.for("EntityManager")) {
    const runner = h.queryRunner as Fields | undefined;
    if (!runner || runner.isTransactionActive !== true) {
      throw new ProducerRuleError(
        "this TypeORM EntityManager is in no transaction (each query takes a connection of the pool): pass " +
          "the one dataSource.transaction() hands you",
      );
    }
    return typeOrm(runner);
  }
  if (typeof h.isTransactionActive === "boolean" && typeof h.query === "function") {
    if (h.isTransactionActive !== true) {
      throw new ProducerRuleError("this TypeORM QueryRunner has no transaction: startTransaction() first");
    }
    return typeOrm(h);
  }
  if (typeof h.execute === "function" && typeof h.beginTransaction === "function") {
    return async (sql, params) => {
      const result = (h.execute as (s: string, p: unknown[]) => unknown)(sql, params);
      if (!(result instanceof Promise)) {
        throw new ProducerRuleError("this mysql2 connection is the callback API: pass its promise() wrapper");
      }
      return result;
    };
  }
  throw new ProducerRuleError(
    "not a handle the producer knows (a mysql2 connection, TypeORM's EntityManager or QueryRunner, Knex's trx): " +
      "pass a function (sql, params) => Promise<driver result> that runs on your transaction",
  );
}

function typeOrm(runner: Fields): RunSql {
  return (sql, params) => (runner.query as (s: string, p: unknown[]) => Promise<unknown>)(sql, params);
}

/** The driver's result of a statement without rows: mysql2's `[header, fields]` or the header. */
export function okPacket(result: unknown): { affectedRows: number; serverStatus?: number } | undefined {
  const r = Array.isArray(result) && result.length === 2 && !Array.isArray(result[0]) ? result[0] : result;
  if (r && typeof r === "object" && typeof (r as { affectedRows?: unknown }).affectedRows === "number") {
    return r as { affectedRows: number; serverStatus?: number };
  }
  return undefined;
}

/** The rows of a SELECT: mysql2's and Knex's `[rows, fields]`, or TypeORM's rows. */
export function rowsOf(result: unknown): Record<string, unknown>[] | undefined {
  if (!Array.isArray(result)) return undefined;
  if (result.length === 2 && Array.isArray(result[0]) && (result[1] === undefined || Array.isArray(result[1]))) {
    return result[0] as Record<string, unknown>[];
  }
  return result as Record<string, unknown>[];
}

// SERVER_STATUS_IN_TRANS, in the status flags of every OK packet of MySQL and MariaDB.
const IN_TRANSACTION = 0x0001;

/** Throws ProducerRuleError unless a transaction is open on the handle's connection.
 *
 * Asked by `DO 0`, whose OK packet carries the server's status flags: SERVER_STATUS_IN_TRANS is
 * set from START TRANSACTION/BEGIN (or, under autocommit=0, from the first statement) to the
 * COMMIT or ROLLBACK, on MySQL and MariaDB alike, with no privilege. MariaDB's @@in_transaction
 * says the same but MySQL has no such variable; information_schema.INNODB_TRX needs the PROCESS
 * privilege an application's account rarely has; `SET TRANSACTION` fails inside a transaction but
 * would put an error in every ORM's query log on the good path. */
export async function assertInTransaction(run: RunSql): Promise<void> {
  const ok = okPacket(await run("DO 0", []));
  if (!ok || typeof ok.serverStatus !== "number") {
    throw new ProducerRuleError(
      "the driver does not say whether a transaction is open (no serverStatus in its result of DO 0): " +
        "use mysql2, or return its result from your function",
    );
  }
  if ((ok.serverStatus & IN_TRANSACTION) === 0) {
    throw new ProducerRuleError(
      "no transaction is open on this connection: begin one (the business write and the outbox row commit together)",
    );
  }
}
