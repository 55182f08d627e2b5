// Which names the supervisor's resolver answered an address for: a raw TCP connection the
// workload opens to that address (no Host header, no SNI to name its target) is decided by
// those names, so a `protocol: tcp` endpoint names hosts, not addresses, on the transparent
// path too. Only answers the supervisor gave itself count, so the workload cannot claim a name
// for an address it chose. Bounded: at most `maxAddresses` addresses (least recently answered
// go first), `maxNamesPerAddress` names each, and an answer counts for `ttlMs`.

export interface NameMemoryOptions {
  maxAddresses?: number;
  maxNamesPerAddress?: number;
  ttlMs?: number;
  now?: () => number;
}

export class NameMemory {
  readonly #max: number;
  readonly #perAddress: number;
  readonly #ttlMs: number;
  readonly #now: () => number;
  /** address → name → expiry; a Map keeps insertion order (re-inserted on each answer). */
  readonly #byAddress = new Map<string, Map<string, number>>();

  constructor(o: NameMemoryOptions = {}) {
    this.#max = o.maxAddresses ?? 4096;
    this.#perAddress = o.maxNamesPerAddress ?? 16;
    this.#ttlMs = o.ttlMs ?? 300_000;
    this.#now = o.now ?? Date.now;
  }

  /** The resolver answered `addresses` for `name`. */
  remember(name: string, addresses: readonly string[]): void {
    const expires = this.#now() + this.#ttlMs;
    for (const a of addresses) {
      const names = this.#byAddress.get(a) ?? new Map<string, number>();
      this.#byAddress.delete(a);
      names.delete(name);
      names.set(name, expires);
      while (names.size > this.#perAddress) names.delete(names.keys().next().value!);
      this.#byAddress.set(a, names);
    }
    while (this.#byAddress.size > this.#max) this.#byAddress.delete(this.#byAddress.keys().next().value!);
  }

  /** The names answered for `address` that have not expired, the most recent first. */
  namesOf(address: string): string[] {
    const names = this.#byAddress.get(address);
    if (names === undefined) return [];
    const now = this.#now();
    for (const [n, exp] of names) if (exp <= now) names.delete(n);
    if (names.size === 0) this.#byAddress.delete(address);
    return [...names.keys()].reverse();
  }

  get size(): number {
    return this.#byAddress.size;
  }
}
