// A host's lease: which gateway drives the Docker daemon of a host (`--host-name`). One
// gateway holds it; another started for the same host stands by until it is free.
//
// Two parts, as PostgreSQL gives them:
//  - A session advisory lock on a connection of its own: held while that session lives,
//    released by the server the moment it ends (a kill -9 closes the socket), so a
//    standby blocked on it gets it at once.
//  - An epoch in `host_leases`, counted up by every gateway as it takes the lease. Every
//    state write of the holder is fenced by it (postgres-store.ts): a gateway whose epoch
//    is no longer the row's cannot write, whatever it believes.
//
// The holder's lock connection can drop while the holder lives (PostgreSQL restarted, a
// network blip). The holder then reconnects (backing off, for as long as it takes: while
// the database is down nobody can take the lease either) and takes the lock again; if the
// epoch is still its own it goes on, and if another gateway took the lease meanwhile it
// has lost it (`lost` resolves) and must stop at once. A standby that gets the lock waits,
// before it acts, until the previous holder's process is gone (`previousGone`): on one
// host that is what makes "the old owner stops before the new one starts" hold even when
// the old one has not yet noticed.

import pg from "pg";
import { LOCKS, migrate } from "./schema.js";
import { TYPES, isUnavailable, storeError } from "./sql.js";

export interface LeaseRow {
  gatewayId: string;
  pid: number;
  epoch: number;
  since: string;
}

export interface HeldLease {
  readonly host: string;
  /** The epoch this gateway took the lease at (its writes are fenced by it). */
  readonly epoch: number;
  /** Resolves (never rejects) with why, when another gateway took the lease: stop acting at once. */
  readonly lost: Promise<string>;
  /** Give the lease up (the lock's session ends). */
  release(): Promise<void>;
}

export interface LeaseOptions {
  gatewayId: string;
  pid: number;
  /** Told once when another gateway holds the lease and this one waits for it. */
  onWaiting?: (holder: LeaseRow | null) => void;
  /** Resolves when the previous holder's process is gone (this one took the lease from it). */
  previousGone?: (previous: LeaseRow) => Promise<void>;
  /** Told of each lost and re-taken lock connection (logs). */
  onConnection?: (state: "lost" | "retaken", why: string) => void;
}

const RETRY_MS = [100, 250, 500, 1000];

async function readRow(client: pg.ClientBase, host: string): Promise<LeaseRow | null> {
  const { rows } = await client.query<{ owner: string; pid: number; epoch: number; acquired_at: string }>(`SELECT owner, pid, epoch, acquired_at FROM host_leases WHERE host = $1`, [host]);
  const r = rows[0];
  return r ? { gatewayId: r.owner, pid: r.pid, epoch: r.epoch, since: r.acquired_at } : null;
}

/** A connection of the lease's own, its loss reported once. */
async function connect(url: string, onLost: (why: string) => void): Promise<pg.Client> {
  const client = new pg.Client({ connectionString: url, types: TYPES, application_name: "sandgate-lease", keepAlive: true });
  let told = false;
  const tell = (why: string): void => {
    if (told) return;
    told = true;
    onLost(why);
  };
  client.on("error", (err) => tell(`the lease's connection failed: ${err.message}`));
  client.on("end", () => tell("the lease's connection ended"));
  try {
    await client.connect();
  } catch (err) {
    told = true;
    await client.end().catch(() => undefined);
    throw err;
  }
  return client;
}

/**
 * Take the lease of `host`, waiting as long as another gateway holds it. Throws
 * StoreUnavailableError when the database cannot be reached at first.
 */
export async function acquireLease(url: string, host: string, o: LeaseOptions): Promise<HeldLease> {
  let released = false;
  let current: pg.Client | null = null;
  let resolveLost: (why: string) => void = () => undefined;
  const lost = new Promise<string>((resolve) => (resolveLost = resolve));
  let epoch = 0;

  const lock = async (client: pg.Client, wait: boolean): Promise<boolean> => {
    const sql = wait ? `SELECT pg_advisory_lock($1, hashtext($2)) IS NOT NULL AS ok` : `SELECT pg_try_advisory_lock($1, hashtext($2)) AS ok`;
    return (await client.query<{ ok: boolean }>(sql, [LOCKS.namespace, host])).rows[0]!.ok;
  };

  // Lost the lock's connection while holding the lease: take the lock again, or learn that another gateway has the lease.
  const onLost = (why: string): void => {
    if (released) return;
    current = null;
    o.onConnection?.("lost", why);
    void (async () => {
      for (let attempt = 0; !released; attempt++) {
        await new Promise((r) => setTimeout(r, RETRY_MS[Math.min(attempt, RETRY_MS.length - 1)]));
        if (released) return;
        let client: pg.Client;
        try {
          client = await connect(url, onLost);
        } catch {
          continue;
        }
        try {
          const mine = await lock(client, false);
          const row = await readRow(client, host);
          if (mine && row?.epoch === epoch && row.gatewayId === o.gatewayId) {
            current = client;
            o.onConnection?.("retaken", `the lease of ${host} is held again at epoch ${epoch}`);
            return;
          }
          released = true;
          await client.end().catch(() => undefined);
          resolveLost(row === null || row.epoch === epoch ? `another gateway holds the lock of ${host}` : `gateway ${row.gatewayId} (pid ${row.pid}) took the lease of ${host} at epoch ${row.epoch}`);
          return;
        } catch {
          await client.end().catch(() => undefined);
        }
      }
    })();
  };

  // Until it is taken: a database that cannot be reached at first is an error; one lost while
  // this gateway waits (a standby, PostgreSQL restarted) is waited out.
  for (let attempt = 0; ; attempt++) {
    let client: pg.Client;
    try {
      client = await connect(url, (why) => (epoch === 0 ? undefined : onLost(why)));
    } catch (err) {
      if (attempt === 0) throw storeError(err);
      await new Promise((r) => setTimeout(r, 1000));
      continue;
    }
    try {
      // The lease's table, on a database no gateway has used yet.
      if (attempt === 0) await migrate(client);
      if (!(await lock(client, false))) {
        if (attempt === 0) o.onWaiting?.(await readRow(client, host));
        await lock(client, true);
      }
      const previous = await readRow(client, host);
      if (previous !== null && previous.pid !== o.pid) await o.previousGone?.(previous);
      const { rows } = await client.query<{ epoch: number }>(
        `INSERT INTO host_leases (host, owner, pid, epoch, acquired_at) VALUES ($1, $2, $3, 1, now()::text)
         ON CONFLICT (host) DO UPDATE SET owner = excluded.owner, pid = excluded.pid, epoch = host_leases.epoch + 1, acquired_at = excluded.acquired_at
         RETURNING epoch`,
        [host, o.gatewayId, o.pid],
      );
      epoch = rows[0]!.epoch;
      current = client;
      break;
    } catch (err) {
      await client.end().catch(() => undefined);
      if (!isUnavailable(err)) {
        released = true;
        throw storeError(err);
      }
      await new Promise((r) => setTimeout(r, 1000));
    }
  }
  return {
    host,
    epoch,
    lost,
    async release() {
      released = true;
      await current?.end().catch(() => undefined);
    },
  };
}
