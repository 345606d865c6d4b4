// One active pod per source (ReplicaOptions.lease): the store's lease, asked every third of its
// time to live while held, and about every second while another pod holds it. The lease saves the
// work of the pods that would lose; it is not what keeps a version from being applied twice (the
// inbox row's conditional UPDATE is), so a pod that holds it a moment too long does no harm.

import { hostname } from "node:os";
import { randomBytes } from "node:crypto";

import { monotonicMs } from "./clock.js";
import { RetryableError } from "./replica_events.js";
import type { ReplicaStore } from "./store.js";

export class PodLease {
  readonly holder: string;
  private readonly ttlMs: number;
  private holding = false;
  private askAt = 0;

  constructor(
    private readonly store: ReplicaStore,
    private readonly source: string,
    options: { holder?: string; ttlMs?: number },
  ) {
    if (!store.lease || !store.releaseLease) throw new Error("the lease option needs a store with a lease (MysqlInbox)");
    this.holder = options.holder ?? `${hostname()}:${process.pid}:${randomBytes(4).toString("hex")}`;
    this.ttlMs = options.ttlMs ?? 15_000;
  }

  /** Whether this pod holds the lease now, taking or renewing it when due. */
  async held(): Promise<boolean> {
    const now = monotonicMs();
    if (now < this.askAt) return this.holding;
    this.holding = await (this.store.lease as NonNullable<ReplicaStore["lease"]>)(this.source, this.holder, this.ttlMs);
    this.askAt = now + (this.holding ? this.ttlMs / 3 : Math.min(1000, this.ttlMs / 3));
    return this.holding;
  }

  /**
   * Runs `work` (a bootstrap, which can outlast the lease) with a signal that fires with `signal`,
   * or when a renewal, due as in held(), finds the lease gone: then `work` stops where it is and
   * this throws a RetryableError, and the next step stands by. A renewal that fails is tried again.
   */
  async during<T>(signal: AbortSignal, work: (signal: AbortSignal) => Promise<T>): Promise<T> {
    const lost = new AbortController();
    const stop = () => lost.abort(signal.reason);
    signal.addEventListener("abort", stop);
    if (signal.aborted) stop();
    let asking = false;
    const timer = setInterval(async () => {
      if (asking || lost.signal.aborted) return;
      asking = true;
      try {
        if (!(await this.held())) {
          lost.abort(new RetryableError(`another pod took the lease of ${this.source}: bootstrap stopped`));
        }
      } catch {
        // the store did not answer: asked again at the next tick, the lease runs meanwhile
      } finally {
        asking = false;
      }
    }, Math.max(10, this.ttlMs / 6));
    try {
      return await work(lost.signal);
    } finally {
      clearInterval(timer);
      signal.removeEventListener("abort", stop);
    }
  }

  /**
   * A pod failing since `since` whose failures would outlast the time to live by the end of its
   * next wait (`waitMs`) gives the lease up and asks again only a time to live later: a healthy
   * standing-by pod takes over, where the failing one would renew it between retries for ever (its
   * backoff, at most 10 s, is shorter than the default 15 s). True when it gave it up.
   */
  async failing(since: number, waitMs: number): Promise<boolean> {
    if (!this.holding || monotonicMs() + waitMs - since <= this.ttlMs) return false;
    await this.release().catch(() => undefined); // not given up: it runs out, not renewed
    this.askAt = monotonicMs() + this.ttlMs;
    return true;
  }

  async release(): Promise<void> {
    if (!this.holding) return;
    this.holding = false;
    this.askAt = 0;
    await (this.store.releaseLease as NonNullable<ReplicaStore["releaseLease"]>)(this.source, this.holder);
  }
}
