// The one owner of --ttl and --idle-stop timing in the gateway: a single timer set for
// the earliest deadline of all sandboxes (never one timer per sandbox), and a sweep
// that reads the live sandboxes that may expire, writes the activity seen since the
// last sweep in one transaction, and stops those whose time is up (lifecycle/expiry.ts
// decides). The TTL deadline is written when a generation's launch is committed, so a
// gateway restart keeps it; activity is written at most every `flushMs`.

import type { Logger } from "pino";
import { expiryVerdict } from "../../lifecycle/expiry.js";
import type { StopReason } from "../../lifecycle/phases.js";
import type { EventRecord, Store } from "../../store/contract.js";
import type { ActivityTracker } from "./activity.js";
import { InFlight } from "../../util/in-flight.js";

export interface SweeperClock {
  now(): number;
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

const realClock: SweeperClock = {
  now: () => Date.now(),
  setTimeout: (fn, ms) => setTimeout(fn, ms),
  clearTimeout: (h) => clearTimeout(h as NodeJS.Timeout),
};

/** Activity is written to the store at least this often while there is some to write. */
export const ACTIVITY_FLUSH_MS = 30_000;
/** A far deadline is looked at again after this long (timers cannot wait a year). */
const MAX_DELAY_MS = 3_600_000;

export interface SweeperDeps {
  store: Store;
  activity: ActivityTracker;
  log: Logger;
  /** Whether this gateway drives the sandbox (host-scope.ts; default: every one): another host's sandbox is its gateway's to time. */
  drives?: (s: { host: string }) => boolean;
  /** Stop the sandbox (a CAS on this generation; false when it lost the race or is no longer live). */
  expire(sandboxId: string, generation: number, reason: StopReason): Promise<boolean>;
  clock?: SweeperClock;
  flushMs?: number;
}

export class ExpirySweeper {
  readonly #clock: SweeperClock;
  readonly #flushMs: number;
  #timer: { handle: unknown; at: number } | null = null;
  /** --idle-stop (seconds) of the live sandboxes that have one, as of the last sweep. */
  readonly #idle = new Map<string, number>();
  #unsubscribe: (() => void) | undefined;
  #closed = false;
  readonly #inFlight = new InFlight();
  readonly stats = { sweeps: 0, stopped: 0 };

  constructor(private readonly d: SweeperDeps) {
    this.#clock = d.clock ?? realClock;
    this.#flushMs = d.flushMs ?? ACTIVITY_FLUSH_MS;
  }

  /** Follow launches and deletes, and sweep once now (a restarted gateway's deadlines). */
  async start(): Promise<void> {
    this.#unsubscribe = this.d.store.onEvent((e) => this.#track(this.#onEvent(e)));
    this.d.activity.onActivity((id, kind) => {
      const idle = this.#idle.get(id);
      if (idle === undefined) return;
      // A session's end starts the idle clock again; a touch owes a write.
      this.#at(this.#clock.now() + (kind === "sessionEnd" ? idle * 1000 : this.#flushMs));
    });
    await this.sweep();
  }

  /** Resolves once the event handling and sweeps started so far are done (tests, close). */
  idle(): Promise<void> {
    return this.#inFlight.idle();
  }

  /** Work started by an event or the timer: kept until it ends (each catches and logs its own errors). */
  #track(p: Promise<void>): void {
    this.#inFlight.track(p, (err) => this.d.log.error({ err }, "expiry: unexpected failure"));
  }

  /** When a timer is set for (ms since the epoch), or null: the leak checks and tests read it. */
  get nextAt(): number | null {
    return this.#timer?.at ?? null;
  }

  async #onEvent(e: EventRecord): Promise<void> {
    try {
      if (e.kind === "deleted") {
        this.d.activity.forget(e.sandboxId);
        this.#idle.delete(e.sandboxId);
        return;
      }
      if (e.kind !== "phase") return;
      const t = Date.parse(e.time);
      if (e.newPhase === "Provisioning" && e.oldPhase !== "Provisioning") {
        // A launch (create or start): this generation's TTL counts from now, and so does its idle clock.
        const s = await this.d.store.get(e.sandboxId);
        if (!s || this.d.drives?.(s) === false) return;
        const ttl = s.spec.ttlSeconds;
        await this.d.store.setTtlDeadline(s.id, e.generation, ttl === undefined ? null : new Date(t + ttl * 1000).toISOString());
        this.d.activity.touch(s.id, t);
        if (s.spec.idleStopSeconds !== undefined) this.#idle.set(s.id, s.spec.idleStopSeconds);
        const next = Math.min(ttl === undefined ? Infinity : t + ttl * 1000, s.spec.idleStopSeconds === undefined ? Infinity : t + s.spec.idleStopSeconds * 1000);
        if (next !== Infinity) this.#at(next);
      } else if (e.newPhase === "Ready" && e.oldPhase === "Provisioning") {
        // The idle clock starts when the sandbox can be used, not during its launch.
        this.d.activity.touch(e.sandboxId, t);
      }
    } catch (err) {
      this.d.log.error({ err, sandboxId: e.sandboxId }, "expiry: following a phase change failed");
    }
  }

  /** One pass: write the activity seen, stop what is due, set the timer for what is next. */
  async sweep(): Promise<void> {
    if (this.#closed) return;
    this.#clear();
    this.stats.sweeps++;
    const { store, activity } = this.d;
    const now = this.#clock.now();
    try {
      const dirty = activity.takeDirty();
      if (dirty.length > 0) await store.recordActivity(dirty.map(([id, ms]): [string, string] => [id, new Date(ms).toISOString()]));
      this.#idle.clear();
      let next = Infinity;
      for (const row of await store.expiringSandboxes()) {
        if (this.#closed) return;
        if (row.idleStopSeconds !== null) this.#idle.set(row.id, row.idleStopSeconds);
        // After a gateway restart the store's last activity (coalesced) is what is known.
        if (activity.lastActive(row.id) === undefined) activity.touch(row.id, row.lastActive === null ? now : Date.parse(row.lastActive));
        const v = expiryVerdict(now, {
          ttlDeadlineMs: row.ttlDeadline === null ? null : Date.parse(row.ttlDeadline),
          ...(row.ttlSeconds === null ? {} : { ttlSeconds: row.ttlSeconds }),
          idleStopSeconds: row.idleStopSeconds,
          lastActiveMs: activity.lastActive(row.id)!,
          openSessions: activity.openSessions(row.id),
        });
        if (v.stop !== null) {
          if (await this.d.expire(row.id, row.generation, v.stop)) {
            this.stats.stopped++;
            this.#idle.delete(row.id);
            this.d.log.info({ sandboxId: row.id, name: row.name, generation: row.generation, reason: v.stop }, "sandbox stopped: its time was up");
          } else {
            // It changed under the stop (a race with another intent): look again soon; a sandbox no longer live is not read then.
            next = Math.min(next, now + this.#flushMs);
          }
        } else if (v.nextMs !== null) {
          next = Math.min(next, v.nextMs);
        }
      }
      if (activity.dirty > 0) next = Math.min(next, now + this.#flushMs);
      if (next !== Infinity) this.#at(next);
    } catch (err) {
      // The store is closing or broken: look again later rather than never.
      this.d.log.error({ err }, "expiry sweep failed");
      this.#at(now + this.#flushMs);
    }
  }

  /** The timer fires at `ms` at the latest (an earlier one is kept). */
  #at(ms: number): void {
    if (this.#closed) return;
    if (this.#closed) return;
    const now = this.#clock.now();
    const at = Math.min(Math.max(ms, now), now + MAX_DELAY_MS);
    if (this.#timer && this.#timer.at <= at) return;
    this.#clear();
    this.#timer = {
      at,
      handle: this.#clock.setTimeout(() => {
        this.#timer = null;
        this.#track(this.sweep());
      }, at - now),
    };
  }

  #clear(): void {
    if (this.#timer) this.#clock.clearTimeout(this.#timer.handle);
    this.#timer = null;
  }

  /** No timer is left; the activity seen is written (a restart starts from it). */
  async close(): Promise<void> {
    if (this.#closed) return;
    // Closed first: a sweep or event still in flight sets no timer and stops nothing more.
    this.#closed = true;
    this.#unsubscribe?.();
    this.#clear();
    await this.idle();
    this.#clear();
    try {
      const dirty = this.d.activity.takeDirty();
      if (dirty.length > 0 && this.d.store.isOpen) await this.d.store.recordActivity(dirty.map(([id, ms]): [string, string] => [id, new Date(ms).toISOString()]));
    } catch (err) {
      this.d.log.warn({ err }, "expiry: writing the last activity at close failed");
    }
  }

  /** Timers pending (leak checks): 0 or 1. */
  get timers(): number {
    return this.#timer ? 1 : 0;
  }
}
