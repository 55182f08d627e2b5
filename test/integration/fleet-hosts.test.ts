// Two hosts on one PostgreSQL (issue 33, docs/fleet.md): each host's gateway drives its own
// Docker daemon, and only its own sandboxes; every gateway reads every sandbox. A request
// that must reach another host's containers is refused with one line naming that host,
// and changes nothing; a gateway restarted adopts its own host's sandboxes and leaves the
// other host's alone (without the host filter it would re-verify them against its own
// daemon, find no containers and fail them). Real parts: two private dockerd daemons with
// live-restore (two hosts), a throwaway PostgreSQL cluster, gateway processes of the real CLI.

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { cli } from "../support/cli-runner.js";
import { eventually } from "../support/gateway-fixture.js";
import { startGatewayRig, type GatewayProcess, type GatewayRig } from "../support/gateway-process.js";
import { startPostgres, type PostgresCluster } from "../support/postgres.js";

let h1: GatewayRig;
let h2: GatewayRig;
let pg: PostgresCluster;
const envOf = (url: string, host: string): Record<string, string> => ({ SANDGATE_STORE: url, SANDGATE_HOST_NAME: host, SANDGATE_RECOVERY_DEADLINE: "60" });
let env1: Record<string, string>;
let url: string;

async function ready(g: GatewayProcess, name: string): Promise<any> {
  return await eventually(async () => {
    const r = await g.api("GET", `/v1/sandboxes/${name}`);
    return r.body.phase === "Ready" ? r.body : undefined;
  }, 120_000, `${name} Ready`);
}
async function running(rig: GatewayRig, id: string): Promise<boolean> {
  const r = await rig.engine.inspectContainer(id);
  return r.kind === "ok" && r.body.State.Running;
}
async function phaseLog(g: GatewayProcess, name: string): Promise<string[]> {
  const { events } = (await g.api("GET", `/v1/sandboxes/${name}/events`)).body as { events: { kind: string; oldPhase: string | null; newPhase: string }[] };
  return events.filter((e) => e.kind === "phase").map((e) => `${e.oldPhase ?? "-"}→${e.newPhase}`);
}

beforeAll(async () => {
  pg = startPostgres();
  url = pg.createDatabase("hosts");
  [h1, h2] = await Promise.all([startGatewayRig("fh1"), startGatewayRig("fh2")]);
  env1 = envOf(url, "h1");
  h1.gw.start(h1.dockerd.socketPath, [], env1);
  h2.gw.start(h2.dockerd.socketPath, [], envOf(url, "h2"));
  await Promise.all([h1.gw.up(180_000), h2.gw.up(180_000)]);
}, 240_000);
afterAll(async () => {
  await Promise.all([h1?.close(), h2?.close()]);
  pg?.stop();
});

describe("two hosts on one database", () => {
  it("each gateway creates on its own host and lists both; a request that needs the other host's containers is refused naming it, and nothing changes", async () => {
    expect((await h1.gw.api("POST", "/v1/sandboxes", { name: "on-h1" })).status).toBe(201);
    expect((await h2.gw.api("POST", "/v1/sandboxes", { name: "on-h2" })).status).toBe(201);
    const [a, b] = await Promise.all([ready(h1.gw, "on-h1"), ready(h2.gw, "on-h2")]);
    expect([a.host, b.host]).toEqual(["h1", "h2"]);
    // Each daemon runs its own host's containers only.
    expect(await running(h1, a.runtime.workload.id)).toBe(true);
    expect(await running(h2, b.runtime.workload.id)).toBe(true);
    expect(await h1.engine.inspectContainer(b.runtime.workload.id)).toMatchObject({ kind: "docker", status: 404 });

    // Every gateway reads every sandbox: list, get, events.
    for (const g of [h1.gw, h2.gw]) {
      const page = (await g.api("GET", "/v1/sandboxes?view=lean")).body as { sandboxes: { name: string; host: string; phase: string }[] };
      expect(page.sandboxes.map((s) => [s.name, s.host, s.phase])).toEqual([
        ["on-h1", "h1", "Ready"],
        ["on-h2", "h2", "Ready"],
      ]);
    }
    expect(await phaseLog(h1.gw, "on-h2")).toEqual(await phaseLog(h2.gw, "on-h2"));
    const list = await cli(["--home", h1.home, "sandbox", "list"]);
    expect(list.code, list.stderr).toBe(0);
    expect(list.stdout.split("\n")[0]).toMatch(/\bHOST$/);
    expect(list.stdout).toMatch(/^on-h2\s.*\sh2$/m);
    // The fleet's hosts, as any gateway sees them.
    const fleet = JSON.parse((await cli(["--home", h2.home, "fleet", "status", "--json"])).stdout) as { store: string; host: string; hosts: any[] };
    expect(fleet.store).toBe("postgres");
    expect(fleet.host).toBe("h2");
    expect(fleet.hosts.map((h) => [h.host, h.self, h.driven, h.lease?.epoch, h.live])).toEqual([
      ["h1", false, true, 1, 1],
      ["h2", true, true, 1, 1],
    ]);

    // Stop, logs and a policy change of on-h2 through h1: refused, one line naming host h2.
    const before = await phaseLog(h2.gw, "on-h2");
    for (const [method, path, body] of [
      ["POST", "/v1/sandboxes/on-h2/stop", undefined],
      ["GET", "/v1/sandboxes/on-h2/logs?tail=5", undefined],
      ["PUT", "/v1/sandboxes/on-h2/policy", { policy: "network: {}\n" }],
    ] as const) {
      const r = await h1.gw.api(method, path, body);
      expect(r.status, `${method} ${path}`).toBe(409);
      expect(r.body.error.code).toBe("not_allowed");
      expect(r.body.error.message).toMatch(/^sandbox "on-h2" runs on host "h2" and this gateway drives host "h1": send this request to a gateway of host "h2"/);
    }
    const exec = await cli(["--home", h1.home, "sandbox", "exec", "on-h2", "--", "true"]);
    expect(exec.code).toBe(5);
    expect(exec.stderr).toMatch(/runs on host "h2"/);
    expect(exec.stderr.trim().split("\n")).toHaveLength(1);
    expect((await h1.gw.api("GET", "/v1/sandboxes/on-h2/policy")).body.revision).toBe(1);
    expect(await phaseLog(h2.gw, "on-h2")).toEqual(before);
    // Through its own gateway it works.
    const own = await cli(["--home", h2.home, "sandbox", "exec", "on-h2", "--", "echo", "from-h2"]);
    expect(own.stdout.trim()).toBe("from-h2");
  });

  it("create --host places a sandbox on another host through any gateway: that host's gateway launches it on its daemon; a host no gateway drives is refused and nothing is created", async () => {
    const made = await cli(["--home", h1.home, "sandbox", "create", "placed", "--host", "h2"]);
    expect(made.code, made.stderr).toBe(0);
    const p = await ready(h2.gw, "placed");
    expect(p.host).toBe("h2");
    expect(await running(h2, p.runtime.workload.id)).toBe(true);
    expect(await h1.engine.inspectContainer(p.runtime.workload.id)).toMatchObject({ kind: "docker", status: 404 });
    expect(await phaseLog(h1.gw, "placed")).toEqual(["-→Provisioning", "Provisioning→Ready"]);
    const own = await cli(["--home", h2.home, "sandbox", "exec", "placed", "--", "echo", "placed-ok"]);
    expect(own.stdout.trim()).toBe("placed-ok");

    const nobody = await cli(["--home", h1.home, "sandbox", "create", "nowhere", "--host", "h9"]);
    expect(nobody.code).toBe(5);
    expect(nobody.stderr.trim()).toMatch(/no gateway drives host "h9" now \(no gateway has ever driven it\); hosts with a gateway: h1, h2$/);
    const bad = await h1.gw.api("POST", "/v1/sandboxes", { name: "nowhere", host: "no/such" });
    expect(bad.status).toBe(400);
    expect(bad.body.error.message).toMatch(/^host: "no\/such" is not a host name; allowed: /);
    expect((await h1.gw.api("GET", "/v1/sandboxes/nowhere")).status).toBe(404);
  });

  it("a gateway killed and started again adopts its own host's sandboxes only: the other host's stay Ready on their containers, with no re-verification", async () => {
    const a = await ready(h1.gw, "on-h1");
    const b = await ready(h2.gw, "on-h2");
    const before = await phaseLog(h2.gw, "on-h2");
    await h1.gw.kill9();
    h1.gw.start(h1.dockerd.socketPath, [], env1);
    await h1.gw.up(120_000);
    // h1 re-verifies its own (the gateway restarted) and gets it back on the same containers.
    await eventually(async () => ((await phaseLog(h1.gw, "on-h1")).includes("Recovering→Ready") ? true : undefined), 120_000, "on-h1 re-verified");
    expect((await ready(h1.gw, "on-h1")).runtime.workload.id).toBe(a.runtime.workload.id);
    // on-h2 was not touched: no event, the same containers, still running on h2.
    expect(await phaseLog(h2.gw, "on-h2")).toEqual(before);
    const after = await ready(h1.gw, "on-h2");
    expect(after.runtime.workload.id).toBe(b.runtime.workload.id);
    expect(after.generation).toBe(b.generation);
    expect(await running(h2, b.runtime.workload.id)).toBe(true);
  });

  it("with host h2's gateway killed, create --host h2 is refused as not running; started again, it adopts its sandboxes, the placed one included", async () => {
    const placed = await ready(h2.gw, "placed");
    await h2.gw.kill9();
    const refused = await cli(["--home", h1.home, "sandbox", "create", "late", "--host", "h2"]);
    expect(refused.code).toBe(5);
    expect(refused.stderr.trim()).toMatch(/no gateway drives host "h2" now \(its gateway is not running\); hosts with a gateway: h1$/);
    const status = await cli(["--home", h1.home, "fleet", "status"]);
    expect(status.stdout).toMatch(/^h1 \(this\)\s+driven\s+\S+ pid \d+\s+2\s/m);
    expect(status.stdout).toMatch(/^h2\s+no gateway\s+\S+ pid \d+\s+1\s.*\s2\s+2$/m);
    h2.gw.start(h2.dockerd.socketPath, [], envOf(url, "h2"));
    await h2.gw.up(120_000);
    await eventually(async () => ((await phaseLog(h2.gw, "placed")).includes("Recovering→Ready") ? true : undefined), 120_000, "placed re-verified on h2");
    expect((await ready(h2.gw, "placed")).runtime.workload.id).toBe(placed.runtime.workload.id);
    expect((await h1.gw.api("GET", "/v1/sandboxes/late")).status).toBe(404);
  });
});
