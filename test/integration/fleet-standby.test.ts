// A standby takes over (issue 33, docs/fleet.md): on PostgreSQL, a second gateway of the
// same home and host name waits for the host's lease; when the holder is killed (kill -9)
// it takes the lease and adopts every sandbox with the seed's recovery: the same
// containers, Ready, no Error, exec works, and it drives Docker from then on. A holder
// cut from PostgreSQL while a standby waits loses the lease and exits before the standby
// acts. Real parts: a private dockerd with live-restore, a throwaway PostgreSQL cluster,
// gateway processes of the real CLI.

import { readFileSync } from "node:fs";
import { join } from "node:path";
import pgClient from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { cli } from "../support/cli-runner.js";
import { eventually } from "../support/gateway-fixture.js";
import { gatewayProcess, startGatewayRig, type GatewayProcess, type GatewayRig } from "../support/gateway-process.js";
import { pgQuery, startPostgres, type PostgresCluster } from "../support/postgres.js";

let rig: GatewayRig;
let pg: PostgresCluster;
let url: string;
let env: Record<string, string>;
const standbys: GatewayProcess[] = [];

const sql = <R extends pgClient.QueryResultRow>(text: string): Promise<R[]> => pgQuery<R>(url, text);
const waitingForLease = async () => Number((await sql<{ n: string }>(`SELECT count(*) AS n FROM pg_locks WHERE locktype = 'advisory' AND NOT granted`))[0]!.n) > 0;
const addressPid = (): number | null => {
  try {
    return (JSON.parse(readFileSync(join(rig.home, "gateway.json"), "utf8")) as { pid: number }).pid;
  } catch {
    return null;
  }
};
const leaseRow = async () => (await sql<{ pid: number; epoch: string }>(`SELECT pid, epoch FROM host_leases WHERE host = 'h1'`))[0];

/** Answers from the gateway that wrote the address file, once it is `pid`. */
async function upAs(g: GatewayProcess, pid: number): Promise<void> {
  await eventually(async () => (addressPid() === pid ? await g.api("GET", "/v1/status").then((r) => (r.body.pid === pid ? true : undefined), () => undefined) : undefined), 120_000, `gateway ${pid} answering`);
}
async function readyAll(g: GatewayProcess, names: string[]): Promise<Record<string, any>> {
  return await eventually(async () => {
    const out: Record<string, any> = {};
    for (const n of names) {
      const r = await g.api("GET", `/v1/sandboxes/${n}`);
      if (r.body.phase !== "Ready") return undefined;
      out[n] = r.body;
    }
    return out;
  }, 120_000, `${names.join(", ")} Ready`);
}
async function phaseLog(g: GatewayProcess, name: string): Promise<string[]> {
  const { events } = (await g.api("GET", `/v1/sandboxes/${name}/events`)).body as { events: { kind: string; oldPhase: string | null; newPhase: string }[] };
  return events.filter((e) => e.kind === "phase").map((e) => `${e.oldPhase ?? "-"}→${e.newPhase}`);
}
const exitOf = (g: GatewayProcess): Promise<number | null> => new Promise((resolve) => (g.child!.exitCode !== null ? resolve(g.child!.exitCode) : g.child!.once("exit", (code) => resolve(code))));

beforeAll(async () => {
  pg = startPostgres();
  url = pg.createDatabase("standby");
  rig = await startGatewayRig("stby");
  env = { SANDGATE_STORE: url, SANDGATE_HOST_NAME: "h1", SANDGATE_RECOVERY_DEADLINE: "60" };
  rig.gw.start(rig.dockerd.socketPath, [], env);
  await rig.gw.up(180_000);
}, 240_000);
afterAll(async () => {
  for (const s of standbys) await s.kill9();
  await rig?.close();
  pg?.stop();
});

describe("a standby on the same host", () => {
  it("waits while the holder runs, takes over when it is killed, and adopts every sandbox: same containers, Ready, no Error, exec works", async () => {
    const a = rig.gw;
    for (const n of ["s1", "s2"]) expect((await a.api("POST", "/v1/sandboxes", { name: n })).status).toBe(201);
    const before = await readyAll(a, ["s1", "s2"]);
    const aPid = a.child!.pid!;
    expect(await leaseRow()).toEqual({ pid: aPid, epoch: "1" });

    const b = gatewayProcess(rig.home);
    standbys.push(b);
    b.start(rig.dockerd.socketPath, [], env, true);
    await eventually(async () => ((await waitingForLease()) ? true : undefined), 60_000, "the standby to wait for the lease");
    expect(addressPid()).toBe(aPid);
    expect((await a.api("GET", "/v1/status")).body.pid).toBe(aPid);

    await a.kill9();
    const bPid = b.child!.pid!;
    await upAs(b, bPid);
    const after = await readyAll(b, ["s1", "s2"]);
    for (const n of ["s1", "s2"]) {
      expect(after[n].runtime.workload.id).toBe(before[n].runtime.workload.id);
      expect(after[n].runtime.supervisor.id).toBe(before[n].runtime.supervisor.id);
      expect(after[n].generation).toBe(1);
      expect((await phaseLog(b, n)).some((p) => p.includes("Error"))).toBe(false);
    }
    expect(await leaseRow()).toEqual({ pid: bPid, epoch: "2" });
    const run = await cli(["--home", rig.home, "sandbox", "exec", "s1", "--", "echo", "hi"]);
    expect(run.stdout).toBe("hi\n");
    expect(run.code).toBe(0);
    // It drives Docker now: a new sandbox comes up through it.
    expect((await b.api("POST", "/v1/sandboxes", { name: "s3" })).status).toBe(201);
    await readyAll(b, ["s3"]);
  });

  it("a holder cut from PostgreSQL while a standby waits loses the lease and exits; the standby acts only after, and adopts everything", async () => {
    const b = standbys[0]!;
    const bPid = b.child!.pid!;
    const before = await readyAll(b, ["s1", "s2", "s3"]);
    const c = gatewayProcess(rig.home);
    standbys.push(c);
    c.start(rig.dockerd.socketPath, [], env, true);
    await eventually(async () => ((await waitingForLease()) ? true : undefined), 60_000, "the second standby to wait for the lease");
    const bExit = exitOf(b);
    // Cut the holder's lease session (what a network partition or a restart of its connection does).
    await sql(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'sandgate-lease' AND coalesce(wait_event_type, '') <> 'Lock'`);
    expect(await bExit).toBe(1);
    const cPid = c.child!.pid!;
    await upAs(c, cPid);
    const after = await readyAll(c, ["s1", "s2", "s3"]);
    for (const n of ["s1", "s2", "s3"]) expect(after[n].runtime.workload.id).toBe(before[n].runtime.workload.id);
    expect(await leaseRow()).toEqual({ pid: cPid, epoch: "3" });
    expect(bPid).not.toBe(cPid);
    for (const n of ["s1", "s2", "s3"]) expect((await c.api("DELETE", `/v1/sandboxes/${n}`)).status).toBeLessThan(300);
    await eventually(async () => ((await c.api("GET", "/v1/sandboxes")).body.sandboxes.length === 0 ? true : undefined), 120_000, "every sandbox deleted");
  });
});
