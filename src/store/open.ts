// The one place a store is chosen and opened (for src/gateway/gateway.ts): the embedded
// SQLite file, or PostgreSQL. Everything the gateway hands it to takes the Store
// interface (src/store/contract.ts).

import type { StoreLocation } from "../util/store-url.js";
import type { Store } from "./contract.js";
import { PostgresStore } from "./postgres/postgres-store.js";
import { SqliteStore } from "./store.js";

export interface OpenedStore {
  store: Store;
  /** The SQLite store when that is the one (tests look inside its file); null on PostgreSQL. */
  sqlite: SqliteStore | null;
}

export async function openStore(
  loc: StoreLocation,
  sqlitePath: string,
  opts: { maxConnections?: number; onError?: (err: Error) => void; fence?: { host: string; epoch: number; onLost?: (why: string) => void } } = {},
): Promise<OpenedStore> {
  if (loc.kind === "sqlite") {
    const sqlite = SqliteStore.open(sqlitePath);
    return { store: sqlite, sqlite };
  }
  const pgOpts = {
    ...(opts.maxConnections === undefined ? {} : { maxConnections: opts.maxConnections }),
    ...(opts.onError === undefined ? {} : { onError: opts.onError }),
    ...(opts.fence === undefined ? {} : { fence: opts.fence }),
  };
  return { store: await PostgresStore.open(loc.url, pgOpts), sqlite: null };
}

/** A host's lease in the fleet's database (src/store/postgres/lease.ts), for gateway.ts. */
export { acquireLease as takeHostLease, type HeldLease, type LeaseRow } from "./postgres/lease.js";
