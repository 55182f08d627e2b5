// Names resolved once and reused for as long as their records say (capped), so a request
// does not wait for DNS each time. Every request still checks the addresses it gets
// against the policy and connects to the one it checked: a cached answer changes when the
// lookup happens, never what is checked. Bounded: at most `maxEntries` names (the least
// recently used go first); failures are not cached; concurrent lookups of one name share
// one query.
import type { Resolver } from "./proxy/index.js";

/** What a lookup found: the addresses and, when the source knows it, the records' TTL. */
export interface Answer {
  addresses: string[];
  /** Seconds the answer may be reused; absent: the source does not say (defaultTtlS). */
  ttlS?: number;
}

export type AnswerSource = (host: string) => Promise<Answer>;

export interface DnsCacheOptions {
  /** Names kept at once. Default 1024. */
  maxEntries?: number;
  /** The longest an answer is reused, whatever its TTL. Default 300 s. */
  maxTtlS?: number;
  /** Reuse of an answer whose source gives no TTL. Default 5 s. */
  defaultTtlS?: number;
  now?: () => number;
}

interface Entry {
  addresses: string[];
  expiresAt: number;
}

export interface DnsCacheStats {
  hits: number;
  misses: number;
  entries: number;
  evicted: number;
}

export class DnsCache {
  readonly #source: AnswerSource;
  readonly #maxEntries: number;
  readonly #maxTtlMs: number;
  readonly #defaultTtlMs: number;
  readonly #now: () => number;
  /** In least-recently-used order (a Map keeps insertion order; a hit re-inserts). */
  readonly #entries = new Map<string, Entry>();
  readonly #inflight = new Map<string, Promise<string[]>>();
  readonly #stats = { hits: 0, misses: 0, evicted: 0 };

  constructor(source: AnswerSource, opts: DnsCacheOptions = {}) {
    this.#source = source;
    this.#maxEntries = opts.maxEntries ?? 1024;
    this.#maxTtlMs = (opts.maxTtlS ?? 300) * 1000;
    this.#defaultTtlMs = (opts.defaultTtlS ?? 5) * 1000;
    this.#now = opts.now ?? Date.now;
  }

  /**
   * The answer held for `host` now (a copy), without asking anyone: undefined when there is
   * none or it expired. The proxy's synchronous path: a hit costs no promise and no timer.
   */
  readonly cached = (host: string): string[] | undefined => {
    const key = host.toLowerCase();
    const hit = this.#entries.get(key);
    if (hit === undefined) return undefined;
    this.#entries.delete(key);
    if (hit.expiresAt <= this.#now()) return undefined;
    this.#entries.set(key, hit);
    this.#stats.hits++;
    return [...hit.addresses];
  };

  /** The proxy's resolver, answered from the cache where it can be. */
  readonly resolve: Resolver = (host) => {
    const key = host.toLowerCase();
    const hit = this.cached(key);
    if (hit !== undefined) return Promise.resolve(hit);
    const pending = this.#inflight.get(key);
    if (pending !== undefined) return pending.then((a) => [...a]);
    this.#stats.misses++;
    const lookup = this.#source(host).then(
      (answer) => {
        this.#inflight.delete(key);
        this.#store(key, answer);
        return answer.addresses;
      },
      (err: unknown) => {
        this.#inflight.delete(key);
        throw err;
      },
    );
    this.#inflight.set(key, lookup);
    return lookup.then((a) => [...a]);
  };

  #store(key: string, answer: Answer): void {
    const ttlMs = Math.min(this.#maxTtlMs, answer.ttlS === undefined ? this.#defaultTtlMs : Math.max(0, answer.ttlS) * 1000);
    if (ttlMs <= 0 || answer.addresses.length === 0) return;
    this.#entries.delete(key);
    this.#entries.set(key, { addresses: [...answer.addresses], expiresAt: this.#now() + ttlMs });
    while (this.#entries.size > this.#maxEntries) {
      this.#entries.delete(this.#entries.keys().next().value as string);
      this.#stats.evicted++;
    }
  }

  /** Forgets every answer (e.g. when the servers to ask changed). */
  clear(): void {
    this.#entries.clear();
  }

  stats(): DnsCacheStats {
    return { ...this.#stats, entries: this.#entries.size };
  }
}

/** A plain resolver as an answer source that gives no TTL. */
export const withoutTtl =
  (resolve: Resolver): AnswerSource =>
  async (host) => ({ addresses: await resolve(host) });
