// Which connections a listener holds, in two pools: those that have not proved who they
// are yet (unauthenticated) and those that have. Each pool has its own cap, so a flood of
// connections that never authenticate cannot take the slots of clients that do. Pure: the
// caller owns the sockets and closes what this says to close.
//
// A full unauthenticated pool either evicts its oldest member for the newcomer
// (`evict_oldest`: a legitimate client authenticates within milliseconds of connecting,
// so a flood of slow connections cannot starve it; refusing newcomers instead would let the
// flood hold every slot) or refuses the newcomer (`refuse`: where nobody authenticates,
// e.g. a sandbox's own proxy, whose one client is the workload).

export type FullPolicy = "evict_oldest" | "refuse";

export interface PoolLimits {
  unauthenticated: number;
  authenticated: number;
}

export type Admission<K> = { admitted: true; evict?: K } | { admitted: false };

/** moved: now authenticated; already: it was; full: the authenticated pool has no room (it stays where it was); unknown: not held (gone). */
export type Authentication = "moved" | "already" | "full" | "unknown";

export class ConnectionPools<K> {
  /** Insertion order is age: the first is the oldest. */
  readonly #unauthenticated = new Set<K>();
  readonly #authenticated = new Set<K>();

  constructor(
    readonly limits: PoolLimits,
    readonly whenFull: FullPolicy,
  ) {}

  /** A new connection: admitted (possibly evicting the oldest unauthenticated one) or refused. */
  admit(k: K): Admission<K> {
    if (this.#unauthenticated.size < this.limits.unauthenticated) {
      this.#unauthenticated.add(k);
      return { admitted: true };
    }
    if (this.whenFull === "refuse" || this.#unauthenticated.size === 0) return { admitted: false };
    const oldest = this.#unauthenticated.values().next().value as K;
    this.#unauthenticated.delete(oldest);
    this.#unauthenticated.add(k);
    return { admitted: true, evict: oldest };
  }

  /** Moves a connection to the authenticated pool when there is room. */
  authenticate(k: K): Authentication {
    if (this.#authenticated.has(k)) return "already";
    if (!this.#unauthenticated.has(k)) return "unknown";
    if (this.#authenticated.size >= this.limits.authenticated) return "full";
    this.#unauthenticated.delete(k);
    this.#authenticated.add(k);
    return "moved";
  }

  /** The connection is gone (closed by either side); false when it was not held. */
  release(k: K): boolean {
    return this.#unauthenticated.delete(k) || this.#authenticated.delete(k);
  }

  isAuthenticated(k: K): boolean {
    return this.#authenticated.has(k);
  }

  get counts(): { unauthenticated: number; authenticated: number } {
    return { unauthenticated: this.#unauthenticated.size, authenticated: this.#authenticated.size };
  }
}
