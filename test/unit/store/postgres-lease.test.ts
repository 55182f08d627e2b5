// Host leases on PostgreSQL (src/store/postgres/lease.ts) and the epoch fence on the
// store's writes, against a real server: a standby waits and takes over the moment the
// holder's session ends; the old holder's writes are refused from then on; a holder whose
// lock connection drops takes it again when nobody else did.

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { defaultPolicy } from "../../../src/policy/index.js";
import { acquireLease, type HeldLease } from "../../../src/store/postgres/lease.js";
import { LeaseLostError, PostgresStore } from "../../../src/store/postgres/postgres-store.js";
import { pgQuery, startPostgres, type PostgresCluster } from "../../support/postgres.js";

let pg: PostgresCluster;
beforeAll(() => {
  pg = startPostgres();
});
afterAll(() => pg.stop());

const spec = { env: {}, resources: { memoryMb: 64, cpus: 1, pids: 64 } };
const policy = defaultPolicy();

async function until(cond: () => boolean | Promise<boolean>, what: string): Promise<void> {
  for (let i = 0; i < 3000; i++) {
    if (await cond()) return;
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error(`timed out waiting for ${what}`);
}

const sql = pgQuery;

/** End the lease session of the holder: the one not waiting for a lock (what a kill -9 or a cut connection does to it). */
const terminateHolder = (url: string) =>
  sql(url, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'sandgate-lease' AND coalesce(wait_event_type, '') <> 'Lock'`);
const waiters = async (url: string) => Number((await sql<{ n: string }>(url, `SELECT count(*) AS n FROM pg_locks WHERE locktype = 'advisory' AND NOT granted`))[0]!.n);

describe("host leases", () => {
  it("a standby waits for the lease and takes it when the holder's session ends, at a higher epoch; from then on the old holder's writes are refused and write nothing", async () => {
    const url = pg.createDatabase("lease_takeover");
    const open = await PostgresStore.open(url);
    await open.close();
    const a = await acquireLease(url, "h1", { gatewayId: "g1", pid: 101 });
    const fencedA: string[] = [];
    const storeA = await PostgresStore.open(url, { fence: { host: "h1", epoch: a.epoch, onLost: (why) => fencedA.push(why) } });
    let waitedFor: unknown = undefined;
    const previous: unknown[] = [];
    let b: HeldLease | undefined;
    const bp = acquireLease(url, "h1", {
      gatewayId: "g2",
      pid: 202,
      onWaiting: (h) => (waitedFor = h),
      previousGone: async (p) => {
        previous.push(p);
      },
    }).then((l) => (b = l));
    await until(async () => (await waiters(url)) === 1, "the standby to wait for the lock");
    expect(waitedFor).toMatchObject({ gatewayId: "g1", pid: 101, epoch: a.epoch });
    expect(b).toBeUndefined();
    await storeA.createSandbox({ host: "h1", id: "x", name: "x", spec, policy });

    await terminateHolder(url);
    await bp;
    expect(b!.epoch).toBe(a.epoch + 1);
    expect(previous).toMatchObject([{ gatewayId: "g1", pid: 101 }]);
    expect(await a.lost).toMatch(/^gateway g2 \(pid 202\) took the lease of h1 at epoch 2$/);

    await expect(storeA.createSandbox({ host: "h1", id: "y", name: "y", spec, policy })).rejects.toBeInstanceOf(LeaseLostError);
    await expect(storeA.setRuntime("x", { phase: "Provisioning", generation: 1 }, null)).rejects.toBeInstanceOf(LeaseLostError);
    expect(fencedA).toHaveLength(2);
    const storeB = await PostgresStore.open(url, { fence: { host: "h1", epoch: b!.epoch } });
    expect(await storeB.get("y")).toBeNull();
    await storeB.createSandbox({ host: "h1", id: "y", name: "y", spec, policy });
    await Promise.all([storeA.close(), storeB.close(), a.release(), b!.release()]);
  });

  it("a holder whose lock connection drops while nobody waits takes the lock again at the same epoch, and its writes go on", async () => {
    const url = pg.createDatabase("lease_blip");
    await (await PostgresStore.open(url)).close();
    const states: string[] = [];
    const a = await acquireLease(url, "h1", { gatewayId: "g1", pid: 101, onConnection: (s) => states.push(s) });
    const store = await PostgresStore.open(url, { fence: { host: "h1", epoch: a.epoch } });
    await terminateHolder(url);
    await until(() => states.includes("retaken"), "the lock taken again");
    expect(states).toEqual(["lost", "retaken"]);
    await store.createSandbox({ host: "h1", id: "x", name: "x", spec, policy });
    let lost = false;
    void a.lost.then(() => (lost = true));
    expect(lost).toBe(false);
    await Promise.all([store.close(), a.release()]);
  });

  it("the standby acts only once the previous holder's process is gone: the epoch is not taken before previousGone resolves", async () => {
    const url = pg.createDatabase("lease_previous");
    await (await PostgresStore.open(url)).close();
    const a = await acquireLease(url, "h1", { gatewayId: "g1", pid: 101 });
    let gone: () => void = () => undefined;
    let asked = false;
    const bp = acquireLease(url, "h1", {
      gatewayId: "g1",
      pid: 202,
      previousGone: () => {
        asked = true;
        return new Promise<void>((r) => (gone = r));
      },
    });
    await until(async () => (await waiters(url)) === 1, "the standby to wait");
    await a.release();
    await until(() => asked, "the standby to ask whether the previous holder is gone");
    expect((await sql<{ epoch: string; pid: number }>(url, `SELECT epoch, pid FROM host_leases WHERE host = 'h1'`))[0]).toEqual({ epoch: "1", pid: 101 });
    gone();
    const b = await bp;
    expect(b.epoch).toBe(2);
    await b.release();
  });

  it("each host has a lease of its own: two hosts' gateways hold theirs at once, and one's standby waits only for its own host", async () => {
    const url = pg.createDatabase("lease_two_hosts");
    const a = await acquireLease(url, "h1", { gatewayId: "g1", pid: 101 });
    const b = await acquireLease(url, "h2", { gatewayId: "g2", pid: 202 });
    expect([a.epoch, b.epoch]).toEqual([1, 1]);
    expect(await sql<{ host: string; owner: string }>(url, `SELECT host, owner FROM host_leases ORDER BY host`)).toEqual([
      { host: "h1", owner: "g1" },
      { host: "h2", owner: "g2" },
    ]);
    // A standby of h1 waits for h1's holder, whatever h2's does.
    const standby = acquireLease(url, "h1", { gatewayId: "g3", pid: 303 });
    await until(async () => (await waiters(url)) === 1, "h1's standby to wait");
    await b.release();
    expect(await waiters(url)).toBe(1);
    await a.release();
    const c = await standby;
    expect(c.epoch).toBe(2);
    await c.release();
  });
});
