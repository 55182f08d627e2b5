// The Store contract (test/support/store-contract.ts) on PostgreSQL: a real server (a
// throwaway cluster, test/support/postgres.ts), each test on a database of its own.
import pgClient from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { defaultPolicy } from "../../../src/policy/index.js";
import { insertEvent } from "../../../src/store/postgres/logs.js";
import { PostgresStore } from "../../../src/store/postgres/postgres-store.js";
import { PG_SCHEMA_VERSION } from "../../../src/store/postgres/schema.js";
import { StoreUnavailableError } from "../../../src/store/postgres/sql.js";
import type { SandgateError } from "../../../src/util/errors.js";
import { startPostgres, type PostgresCluster } from "../../support/postgres.js";
import { storeContract } from "../../support/store-contract.js";

let pg: PostgresCluster;
beforeAll(() => {
  pg = startPostgres();
});
afterAll(() => pg.stop());
let n = 0;

storeContract("PostgreSQL", (opts) => PostgresStore.open(pg.createDatabase(`contract_${n++}`), opts));

describe("PostgreSQL: what several gateways on one database need", () => {
  const spec = { env: {}, resources: { memoryMb: 64, cpus: 1, pids: 64 } };
  const policy = defaultPolicy();
  const open = (url: string) => PostgresStore.open(url, { connectTimeoutMs: 2000 });

  async function until(cond: () => boolean | Promise<boolean>, what: string): Promise<void> {
    for (let i = 0; i < 2000; i++) {
      if (await cond()) return;
      await new Promise((r) => setTimeout(r, 10));
    }
    throw new Error(`timed out waiting for ${what}`);
  }

  it("two stores (two gateways) writing at once: each one's listeners get every event of both, once each, in sequence order", async () => {
    const url = pg.createDatabase("fleet_events");
    const [a, b] = await Promise.all([open(url), open(url)]);
    try {
      const seenA: number[] = [];
      const seenB: number[] = [];
      a.onEvent((e) => seenA.push(e.seq));
      b.onEvent((e) => seenB.push(e.seq));
      await a.createSandbox({ host: "h1", id: "x", name: "x", spec, policy });
      await b.createSandbox({ host: "h1", id: "y", name: "y", spec, policy });
      await Promise.all(
        Array.from({ length: 60 }, (_, i) => (i % 2 ? a : b).appendEvent({ id: i % 3 ? "x" : "y", name: i % 3 ? "x" : "y", generation: 1 }, "info", `m${i}`)),
      );
      const all = (await a.eventsAfter(0)).map((e) => e.seq);
      expect(all).toHaveLength(62);
      await until(() => seenA.length >= 62 && seenB.length >= 62, "both listeners to see every event");
      expect(seenA).toEqual(all);
      expect(seenB).toEqual(all);
    } finally {
      await Promise.all([a.close(), b.close()]);
    }
  });

  it("an event committed after a later-numbered one cannot be skipped: event appends wait for the open transaction that took a number first", async () => {
    const url = pg.createDatabase("fleet_order");
    const [writer, watcher] = await Promise.all([open(url), open(url)]);
    const raw = new pgClient.Client({ connectionString: url });
    await raw.connect();
    try {
      const seen: string[] = [];
      watcher.onEvent((e) => seen.push(e.message ?? ""));
      await writer.createSandbox({ host: "h1", id: "x", name: "x", spec, policy });
      await until(() => seen.includes("created"), "the creation event");
      // A transaction takes the next number and stays open.
      await raw.query("BEGIN");
      await insertEvent(raw, { sandboxId: "x", sandboxName: "x", generation: 1, kind: "info", oldPhase: null, newPhase: null, reason: null, message: "first", data: null, time: new Date().toISOString() });
      const second = writer.appendEvent({ id: "x", name: "x", generation: 1 }, "info", "second");
      let done = false;
      void second.then(() => (done = true));
      // The second append either waits for the lock (the guard) or has already committed (no guard).
      await until(async () => done || (await watcherWaits(url)), "the second append to wait for the first or to finish");
      await raw.query("COMMIT");
      await second;
      // A third event after both: once the watcher has it, it has had every earlier one it will ever get.
      await writer.appendEvent({ id: "x", name: "x", generation: 1 }, "info", "third");
      await until(() => seen.includes("third"), "the third event");
      expect(seen).toEqual(["created", "first", "second", "third"]);
    } finally {
      await raw.end();
      await Promise.all([writer.close(), watcher.close()]);
    }
  });

  it("gateways starting at once on an empty database both migrate it (one waits for the other); a database from a newer sandgate is refused", async () => {
    const url = pg.createDatabase("fleet_migrate");
    const stores = await Promise.all([open(url), open(url), open(url)]);
    await Promise.all(stores.map((s) => s.close()));
    const raw = new pgClient.Client({ connectionString: url });
    await raw.connect();
    await raw.query(`UPDATE sandgate_schema SET version = ${PG_SCHEMA_VERSION + 1}`);
    await raw.end();
    await expect(open(url)).rejects.toThrow(/newer than this sandgate/);
  });

  it("a database from before sandboxes carried their host (schema 1, one host per database) gives its rows to the host that held its lease", async () => {
    const url = pg.createDatabase("fleet_host_backfill");
    const store = await open(url);
    await store.createSandbox({ host: "", id: "old", name: "old", spec, policy });
    await store.close();
    // Back to schema 1, as a gateway of the previous release left it.
    const raw = new pgClient.Client({ connectionString: url });
    await raw.connect();
    await raw.query(`DROP INDEX sandboxes_by_host; ALTER TABLE sandboxes DROP COLUMN host; UPDATE sandgate_schema SET version = 1`);
    await raw.query(`INSERT INTO host_leases (host, owner, pid, epoch, acquired_at) VALUES ('h7', 'g', 1, 3, now()::text)`);
    await raw.end();
    const again = await open(url);
    try {
      expect((await again.get("old"))?.host).toBe("h7");
    } finally {
      await again.close();
    }
  });

  it("PostgreSQL down: operations fail as 'unavailable' (503) with no URL or password in the message; back up: operations work again and events written by another gateway meanwhile reach the listener", async () => {
    const cluster = startPostgres();
    try {
      const url = cluster.createDatabase("outage");
      const [a, b] = await Promise.all([open(url), open(url)]);
      const errors: Error[] = [];
      const c = await PostgresStore.open(url, { onError: (e) => errors.push(e) });
      try {
        await a.createSandbox({ host: "h1", id: "x", name: "x", spec, policy });
        const seen: string[] = [];
        c.onEvent((e) => seen.push(e.message ?? ""));
        cluster.stopServer();
        const err = (await a.get("x").catch((e: unknown) => e)) as SandgateError;
        expect(err).toBeInstanceOf(StoreUnavailableError);
        expect(err.code).toBe("unavailable");
        expect(err.message).not.toContain(cluster.dir);
        await expect(a.appendEvent({ id: "x", name: "x", generation: 1 }, "info", "lost")).rejects.toBeInstanceOf(StoreUnavailableError);
        cluster.startServer();
        await until(async () => (await b.get("x").catch(() => null)) !== null, "the store to answer again");
        await b.appendEvent({ id: "x", name: "x", generation: 1 }, "info", "after the restart");
        await until(() => seen.includes("after the restart"), "the event written by the other gateway after the restart");
        expect(seen).not.toContain("lost");
        expect((await a.events("x")).map((e) => e.message)).toEqual(["created", "after the restart"]);
      } finally {
        await Promise.all([a.close(), b.close(), c.close()]);
      }
    } finally {
      cluster.stop();
    }
  });

  it("a database that cannot be reached at start is StoreUnavailableError, and the password in the URL is in no message", async () => {
    const url = `postgres://sandgate:hunter2-secret@localhost/none?host=${encodeURIComponent(`${pg.dir}/nowhere`)}`;
    const err = (await PostgresStore.open(url, { connectTimeoutMs: 1000 }).catch((e: unknown) => e)) as Error;
    expect(err).toBeInstanceOf(StoreUnavailableError);
    expect(err.message).not.toContain("hunter2");
  });
});

/** True when a session waits for an advisory lock (the events lock). */
async function watcherWaits(url: string): Promise<boolean> {
  const c = new pgClient.Client({ connectionString: url });
  await c.connect();
  try {
    const r = await c.query<{ n: string }>(`SELECT count(*) AS n FROM pg_locks WHERE locktype = 'advisory' AND NOT granted`);
    return Number(r.rows[0]!.n) > 0;
  } finally {
    await c.end();
  }
}
