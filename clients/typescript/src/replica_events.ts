// What a Replica tells the service running it: a logger hook (pino's call shape), typed events,
// and status() for a health check. A listener or logger that throws is the service's bug, not the
// replica's: it is caught, so it cannot stop the replica or skip a version.

/** pino's shape, which winston's child loggers and console wrappers fit too: (fields, message). */
export interface ReplicaLogger {
  debug?(fields: object, message: string): void;
  info(fields: object, message: string): void;
  warn(fields: object, message: string): void;
  error(fields: object, message: string): void;
}

export type LogLevel = "debug" | "info" | "warn" | "error";

/** Why a bootstrap happened. */
export type BootstrapReason = "first" | "gap" | "epoch" | "stream" | "mismatch" | "payload";

export interface ReplicaEvents {
  /** A snapshot was loaded and committed; `reason`: what made this one needed. */
  bootstrapped: { epoch: number; version: number; recordCount: number; checksum: string; reason: BootstrapReason };
  /** A version was skipped by the stream (a message deleted or lost): a bootstrap follows. */
  gap: { expected: number; got: number; streamSeq: number };
  /** The source's epoch moved on: a bootstrap follows. */
  epoch: { from: number; to: number };
  /** The replica's checksum matched the source's at `version`. */
  verified: { version: number; recordCount: number; checksum: string };
  /** It did not; `rebootstrap`: the difference persisted over enough reads of the table. */
  mismatch: { version: number; replica: string; source: string; inARow: number; rebootstrap: boolean };
  /** A failure: retried after `retryInMs`, or null when the replica stops on it (onHandlerError). */
  error: { error: Error; retryInMs: number | null };
}

export type ReplicaEventName = keyof ReplicaEvents;
type Listener<E extends ReplicaEventName> = (event: ReplicaEvents[E]) => void;

// standby: another pod holds the source's lease (ReplicaOptions.lease).
export type ReplicaState = "idle" | "standby" | "bootstrapping" | "following" | "retrying" | "stopped" | "failed";

/** For a health check: where the replica is, how far behind, and its last failure. */
export interface ReplicaStatus {
  source: string;
  state: ReplicaState;
  epoch: number | null; // null before the first bootstrap
  appliedVersion: number;
  lastVerifiedVersion: number;
  /** Messages the stream holds past the last one taken (nats' pending count); null until one is taken. */
  pendingMessages: number | null;
  /** 0 when caught up; else how old the oldest change not yet applied is, at most (ms). */
  lagMs: number;
  lastAppliedAt: Date | null;
  lastError: { message: string; at: Date } | null;
  /** Failures in a row (0 after a step that succeeded). */
  failures: number;
}

/**
 * The application's code threw. The store's handler: the change or snapshot it was given is not
 * applied (rolled back), and is tried again. onApplied: the change is applied (committed) and is
 * not handed to it again, at most once (the rest of its batch still is). `cause` is what it
 * threw (onApplied's first). With onHandlerError: "stop", run() rejects with it instead of retrying.
 */
export class HandlerError extends Error {
  constructor(message: string, cause: unknown) {
    super(message, { cause });
    this.name = "HandlerError";
  }
}

/**
 * Whether what a handler threw is its database's passing trouble, retried even under
 * onHandlerError: "stop": a deadlock (1213), a lock wait timeout (1205), a lost connection.
 */
export function transient(cause: unknown): boolean {
  const e = cause as { errno?: unknown; code?: unknown } | null;
  if (!e || typeof e !== "object") return false;
  if (e.errno === 1213 || e.errno === 1205) return true;
  return ["PROTOCOL_CONNECTION_LOST", "ECONNRESET", "ECONNREFUSED", "ETIMEDOUT", "EPIPE"].includes(String(e.code));
}

/** A failure the replica retries (with backoff, in run()). */
export class RetryableError extends Error {}

/** Runs the application's `work`; what it throws becomes a HandlerError saying `what`. */
export async function handlerCall<T>(what: string, work: () => T | Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (e) {
    if (e instanceof HandlerError) throw e;
    throw new HandlerError(`${what}: ${e instanceof Error ? e.message : String(e)}`, e);
  }
}

/** The listeners of each event; on() returns what removes the listener. */
export class EventHub {
  private readonly listeners = new Map<ReplicaEventName, Set<(event: never) => void>>();

  constructor(private readonly log: (level: LogLevel, fields: object, message: string) => void) {}

  on<E extends ReplicaEventName>(name: E, listener: Listener<E>): () => void {
    let set = this.listeners.get(name);
    if (!set) this.listeners.set(name, (set = new Set()));
    set.add(listener as (event: never) => void);
    return () => set?.delete(listener as (event: never) => void);
  }

  emit<E extends ReplicaEventName>(name: E, event: ReplicaEvents[E]): void {
    for (const listener of this.listeners.get(name) ?? []) {
      try {
        (listener as Listener<E>)(event);
      } catch (e) {
        this.log("error", { event: name, err: e }, `a listener of '${name}' threw: ${(e as Error)?.message ?? e}`);
      }
    }
  }
}

/** The logger's method for `level`, called so that a logger that throws is ignored. */
export function logTo(logger: ReplicaLogger | undefined, level: LogLevel, fields: object, message: string): void {
  if (!logger) return;
  try {
    if (level === "debug") logger.debug?.(fields, message);
    else logger[level](fields, message);
  } catch {
    // the logger's own failure: nothing better to tell it to
  }
}
