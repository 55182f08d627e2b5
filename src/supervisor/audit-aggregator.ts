// Bounded audit output: the first record of each kind goes out in full at once; repeats,
// records identical in everything but their time and traffic, are counted and go out as
// one record with `count` (and their traffic summed) per flush interval. A workload
// hammering a denied host costs one record per second, not one per request; two requests
// that differ in method, path, status, outcome or anything else are never merged. The set
// of keys is bounded: the least recently seen key is flushed and forgotten first.
import type { AuditEvent } from "./proxy/index.js";

export interface AggregatorOptions {
  /** How often repeats are flushed. Default 1000 ms. */
  flushMs?: number;
  /** Keys remembered at once. Default 1024. */
  maxKeys?: number;
}

interface Entry {
  repeats: number;
  /** Traffic of the repeats, summed. */
  bytesOut: number;
  bytesIn: number;
  durationMs: number;
  since: string | undefined;
  last: AuditEvent;
  /** Flushes in a row without a repeat. */
  idle: number;
}

/** What a repeat may differ in: when it happened and what it moved (summed), and the count itself. */
type Summed = "type" | "time" | "count" | "since" | "bytesOut" | "bytesIn" | "durationMs";
/** Every other field of a record: two records are one key only when all of these are equal. */
const KEY_FIELDS = ["decision", "activity", "reason", "rule", "host", "port", "protocol", "via", "method", "path", "address", "lockdown", "revision", "status"] as const satisfies readonly Exclude<keyof AuditEvent, Summed>[];
/** Compiles only while every field of a record is keyed or summed: one added to neither fails here. */
export const EVERY_FIELD_KEYED: [Exclude<keyof AuditEvent, Summed | (typeof KEY_FIELDS)[number]>] extends [never] ? true : never = true;

const keyOf = (e: AuditEvent): string => JSON.stringify(KEY_FIELDS.map((f) => e[f] ?? null));

export class AuditAggregator {
  readonly #emit: (e: AuditEvent) => void;
  readonly #maxKeys: number;
  readonly #entries = new Map<string, Entry>();
  readonly #timer: NodeJS.Timeout;

  constructor(emit: (e: AuditEvent) => void, opts: AggregatorOptions = {}) {
    this.#emit = emit;
    this.#maxKeys = opts.maxKeys ?? 1024;
    this.#timer = setInterval(() => this.flush(), opts.flushMs ?? 1000);
    this.#timer.unref();
  }

  record(e: AuditEvent): void {
    const key = keyOf(e);
    const entry = this.#entries.get(key);
    if (entry === undefined) {
      this.#emit(e);
      this.#entries.set(key, { repeats: 0, bytesOut: 0, bytesIn: 0, durationMs: 0, since: undefined, last: e, idle: 0 });
      if (this.#entries.size > this.#maxKeys) this.#evictOldest();
      return;
    }
    // Most recently seen last in the map's order.
    this.#entries.delete(key);
    this.#entries.set(key, entry);
    entry.repeats++;
    entry.bytesOut += e.bytesOut ?? 0;
    entry.bytesIn += e.bytesIn ?? 0;
    entry.durationMs += e.durationMs ?? 0;
    entry.since ??= e.time;
    entry.last = e;
    entry.idle = 0;
  }

  /** Emit the counted repeats; keys quiet for two flushes are forgotten (their next decision goes out in full). */
  flush(): void {
    for (const [key, entry] of this.#entries) {
      if (entry.repeats > 0) this.#emitRepeats(entry);
      else if (++entry.idle >= 2) this.#entries.delete(key);
    }
  }

  get keys(): number {
    return this.#entries.size;
  }

  close(): void {
    clearInterval(this.#timer);
    this.flush();
  }

  #emitRepeats(entry: Entry): void {
    const traffic = entry.last.bytesOut !== undefined || entry.last.bytesIn !== undefined || entry.last.durationMs !== undefined;
    this.#emit({
      ...entry.last,
      count: entry.repeats,
      ...(entry.since === undefined ? {} : { since: entry.since }),
      ...(traffic && { bytesOut: entry.bytesOut, bytesIn: entry.bytesIn, durationMs: entry.durationMs }),
    });
    entry.repeats = 0;
    entry.bytesOut = entry.bytesIn = entry.durationMs = 0;
    entry.since = undefined;
  }

  #evictOldest(): void {
    const [key, entry] = this.#entries.entries().next().value as [string, Entry];
    if (entry.repeats > 0) this.#emitRepeats(entry);
    this.#entries.delete(key);
  }
}
