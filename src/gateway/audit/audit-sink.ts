// Where supervisors' audit records go: the audit table, apart from lifecycle
// events, in batches off the sessions' message path. Each sandbox's stream is
// rate-limited (token bucket) and the queue is bounded; what is dropped is counted
// and written as one `dropped` record per sandbox and flush, so a gap is visible.
// Retention (count per sandbox and age) runs on a timer.

import type { Logger } from "pino";
import type { WireAuditEvent } from "../../protocol/wire.js";
import type { AuditRecord, Retention, Store } from "../../store/contract.js";
import { DEFAULT_SETTINGS } from "../settings.js";

export interface AuditLimits {
  /** Records per second a sandbox may add (after the supervisor's aggregation). Default 50. */
  ratePerSecond: number;
  /** Burst above the rate. Default 200. */
  burst: number;
  /** Records waiting for the next flush, all sandboxes together. Default 5000. */
  maxQueued: number;
  /** Batch interval. Default 250 ms. */
  flushMs: number;
  /** Audit records kept. Default 10,000 per sandbox, 7 days. */
  audit: Retention;
  /** Lifecycle events kept. Default 10,000 per sandbox; a deleted sandbox's for 7 days. */
  events: Retention;
  /** How often retention runs. Default 60 s. */
  pruneMs: number;
}

export const DEFAULT_AUDIT_LIMITS: AuditLimits = {
  ratePerSecond: DEFAULT_SETTINGS.auditRate,
  burst: 200,
  maxQueued: 5000,
  flushMs: 250,
  audit: { perSandbox: DEFAULT_SETTINGS.auditKeep, maxAgeMs: DEFAULT_SETTINGS.auditMaxAgeS * 1000 },
  events: { perSandbox: 10_000, maxAgeMs: 7 * 24 * 3600_000 },
  pruneMs: 60_000,
};

interface Bucket {
  tokens: number;
  at: number;
  dropped: number;
  generation: number;
}

export interface AuditStats {
  accepted: number;
  dropped: number;
  written: number;
  pruned: { audit: number; events: number };
  /**
   * The proxies' decisions as they arrived, before the rate limit (a record stands for
   * `count` repeats; a tunnel's close record is not a decision), and the bytes they moved.
   */
  decisions: { allow: number; deny: number; would_deny: number };
  bytes: { out: number; in: number };
}

export class AuditSink {
  readonly #limits: AuditLimits;
  readonly #buckets = new Map<string, Bucket>();
  #queue: Omit<AuditRecord, "seq">[] = [];
  readonly #stats: AuditStats = { accepted: 0, dropped: 0, written: 0, pruned: { audit: 0, events: 0 }, decisions: { allow: 0, deny: 0, would_deny: 0 }, bytes: { out: 0, in: 0 } };
  readonly #flushTimer: NodeJS.Timeout;
  readonly #pruneTimer: NodeJS.Timeout;
  #closed = false;

  constructor(
    private readonly store: Store,
    private readonly log: Logger,
    limits: Partial<AuditLimits> = {},
    private readonly now: () => number = Date.now,
  ) {
    this.#limits = { ...DEFAULT_AUDIT_LIMITS, ...limits };
    this.#flushTimer = setInterval(() => void this.flush(), this.#limits.flushMs);
    this.#flushTimer.unref();
    this.#pruneTimer = setInterval(() => void this.prune(), this.#limits.pruneMs);
    this.#pruneTimer.unref();
  }

  /** One record from a supervisor's authenticated session. */
  accept(sandboxId: string, generation: number, event: WireAuditEvent): void {
    if (this.#closed) return;
    if (event.activity === undefined) this.#stats.decisions[event.decision] += event.count ?? 1;
    this.#stats.bytes.out += event.bytesOut ?? 0;
    this.#stats.bytes.in += event.bytesIn ?? 0;
    const now = this.now();
    let b = this.#buckets.get(sandboxId);
    if (!b) {
      b = { tokens: this.#limits.burst, at: now, dropped: 0, generation };
      this.#buckets.set(sandboxId, b);
    }
    b.tokens = Math.min(this.#limits.burst, b.tokens + ((now - b.at) / 1000) * this.#limits.ratePerSecond);
    b.at = now;
    b.generation = generation;
    if (b.tokens < 1 || this.#queue.length >= this.#limits.maxQueued) {
      b.dropped += event.count ?? 1;
      this.#stats.dropped += event.count ?? 1;
      return;
    }
    b.tokens -= 1;
    this.#stats.accepted++;
    this.#queue.push({ sandboxId, generation, time: event.time, decision: event.decision, count: event.count ?? 1, event });
  }

  /** Write what is queued, plus one `dropped` record per sandbox that lost some. */
  async flush(): Promise<void> {
    const batch = this.#queue;
    this.#queue = [];
    const time = new Date(this.now()).toISOString();
    for (const [sandboxId, b] of this.#buckets) {
      if (b.dropped > 0) {
        batch.push({ sandboxId, generation: b.generation, time, decision: "dropped", count: b.dropped, event: { type: "dropped", reason: "audit_rate_limit" } });
        b.dropped = 0;
      } else if (b.tokens >= this.#limits.burst) {
        this.#buckets.delete(sandboxId); // full again and nothing owed: forget it (bounded map)
      }
    }
    if (batch.length === 0) return;
    try {
      // A sandbox deleted since its records arrived keeps no trail.
      const live = new Map<string, boolean>();
      const kept = [];
      for (const r of batch) {
        let known = live.get(r.sandboxId);
        if (known === undefined) live.set(r.sandboxId, (known = (await this.store.get(r.sandboxId)) !== null));
        if (known) kept.push(r);
      }
      await this.store.appendAudit(kept);
      this.#stats.written += batch.length;
    } catch (err) {
      this.log.error({ err, records: batch.length }, "audit records could not be written");
    }
  }

  async prune(): Promise<void> {
    try {
      const r = await this.store.prune(this.#limits.audit, this.#limits.events);
      this.#stats.pruned.audit += r.audit;
      this.#stats.pruned.events += r.events;
    } catch (err) {
      this.log.error({ err }, "retention failed");
    }
  }

  /** The limits in force (GET /v1/status shows them). */
  limits(): { ratePerSecond: number; burst: number; keepPerSandbox: number; maxAgeS: number } {
    const l = this.#limits;
    return { ratePerSecond: l.ratePerSecond, burst: l.burst, keepPerSandbox: l.audit.perSandbox, maxAgeS: l.audit.maxAgeMs / 1000 };
  }

  stats(): AuditStats {
    return { ...this.#stats, pruned: { ...this.#stats.pruned }, decisions: { ...this.#stats.decisions }, bytes: { ...this.#stats.bytes } };
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    clearInterval(this.#flushTimer);
    clearInterval(this.#pruneTimer);
    await this.flush();
  }
}
