// The gateway process itself is SIGKILLed while a sandbox is Recovering, in
// both orders of coming back (Docker first, or the gateway first). The
// restarted gateway adopts the sandbox through the same verification path.

import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { EngineClient } from "../../src/driver/docker/engine/client.js";
import { FaultProxy } from "../support/fault-proxy.js";
import { PrivateDockerd } from "../support/dockerd.js";
import { eventually } from "../support/gateway-fixture.js";
import { CLI_MAIN } from "../support/cli-build.js";
import { apiFetch } from "../support/api-client.js";


let dockerd: PrivateDockerd;
let proxy: FaultProxy;
let home: string;
let gateway: ChildProcess | undefined;

function startGatewayProcess(): ChildProcess {
  rmSync(join(home, "gateway.json"), { force: true });
  const p = spawn(process.execPath, [CLI_MAIN, "--home", home, "gateway", "start", "--port", "0", "--log-level", "warn"], {
    env: { ...process.env, DOCKER_HOST: `unix://${proxy.socketPath}`, SANDGATE_RECOVERY_DEADLINE: "60" },
    stdio: ["ignore", "ignore", "inherit"],
  });
  gateway = p;
  return p;
}

async function api(method: string, path: string, body?: unknown): Promise<{ status: number; body: any }> {
  const addr = JSON.parse(readFileSync(join(home, "gateway.json"), "utf8")) as { url: string };
  const token = readFileSync(join(home, "token"), "utf8").trim();
  const res = await apiFetch(addr.url, path, {
    method,
    headers: { authorization: `Bearer ${token}`, ...(body ? { "content-type": "application/json" } : {}) },
    body: body ? JSON.stringify(body) : undefined,
  });
  return { status: res.status, body: await res.json() };
}

const up = () => eventually(async () => (existsSync(join(home, "gateway.json")) ? await api("GET", "/v1/status").then(() => true, () => undefined) : undefined), 60_000, "gateway up");
const phaseIs = (name: string, want: string, ms = 30_000) =>
  eventually(async () => ((await api("GET", `/v1/sandboxes/${name}`)).body.phase === want ? true : undefined), ms, `${name} → ${want}`);

/** Phase changes as "Old→New" (as in recovery-helpers' phaseLog). */
async function phaseLog(name: string): Promise<string[]> {
  const { events } = (await api("GET", `/v1/sandboxes/${name}/events`)).body as { events: { kind: string; oldPhase: string | null; newPhase: string }[] };
  return events.filter((e) => e.kind === "phase").map((e) => `${e.oldPhase ?? "-"}→${e.newPhase}`);
}

async function createReady(name: string): Promise<any> {
  expect((await api("POST", "/v1/sandboxes", { name })).status).toBe(201);
  await phaseIs(name, "Ready", 60_000);
  return (await api("GET", `/v1/sandboxes/${name}`)).body;
}

function kill9(p: ChildProcess): Promise<void> {
  return new Promise((resolve) => {
    p.once("exit", () => resolve());
    p.kill("SIGKILL");
  });
}

beforeAll(async () => {
  dockerd = await PrivateDockerd.start({ liveRestore: true, name: "rgr" });
  proxy = await FaultProxy.start({ upstreamSocket: dockerd.socketPath });
  // Under the daemon's directory: its cleanup unmounts the workspaces the gateway mounted there.
  home = mkdtempSync(join(dockerd.dir, "home-"));
  startGatewayProcess();
  await up();
}, 180_000);

// Whatever an earlier test left behind: Docker up, the proxy passing, a gateway answering.
beforeEach(async () => {
  proxy.refuse(false);
  if (dockerd.pid === undefined) await dockerd.startAgain();
  if (!gateway || gateway.exitCode !== null || gateway.signalCode !== null) startGatewayProcess();
  await up();
}, 180_000);

afterAll(async () => {
  if (gateway && gateway.exitCode === null) await kill9(gateway);
  await proxy?.close();
  await dockerd?.destroy();
  if (home) rmSync(home, { recursive: true, force: true });
});

describe("gateway killed while a sandbox is Recovering", () => {
  it("Docker comes back first, then the gateway: adopted, back to Ready, same containers", async () => {
    const before = await createReady("adopt");

    proxy.refuse(true);
    proxy.cutAll();
    await phaseIs("adopt", "Recovering");
    await kill9(gateway!);
    proxy.refuse(false);

    startGatewayProcess();
    await up();
    await phaseIs("adopt", "Ready", 60_000);
    const after = (await api("GET", "/v1/sandboxes/adopt")).body;
    expect(after.runtime).toEqual(before.runtime);
    expect(after.generation).toBe(1);
    const status = (await api("GET", "/v1/status")).body;
    expect(status.pid).toBe(gateway!.pid);
    // Every adopted sandbox is armed once.
    const { sandboxes } = (await api("GET", "/v1/sandboxes")).body as { sandboxes: { phase: string }[] };
    expect(status.monitor.monitors).toBe(sandboxes.filter((x) => x.phase === "Ready" || x.phase === "Recovering").length);
    // One Recovering across the kill and the adoption, never Error.
    expect(await phaseLog("adopt")).toEqual(["-→Provisioning", "Provisioning→Ready", "Ready→Recovering", "Recovering→Ready"]);
  }, 180_000);

  it("the gateway comes back first while Docker is still down: it starts, waits, and recovers when Docker returns", async () => {
    const before = await createReady("downfirst");
    await dockerd.stop("SIGTERM");
    await phaseIs("downfirst", "Recovering");
    await kill9(gateway!);

    startGatewayProcess();
    await up();
    const refused = await api("POST", "/v1/sandboxes", { name: "later" });
    expect(refused.status).toBe(503);
    expect(refused.body.error.message).toMatch(/runtime is not ready/);
    // Up, and knows Docker is away: the adopted sandbox waits in Recovering.
    expect((await api("GET", "/v1/sandboxes/downfirst")).body.phase).toBe("Recovering");

    await dockerd.startAgain();
    await phaseIs("downfirst", "Ready", 60_000);
    expect((await api("GET", "/v1/sandboxes/downfirst")).body.runtime).toEqual(before.runtime);
    // One Recovering, from the outage through the new gateway to Docker's return.
    expect(await phaseLog("downfirst")).toEqual(["-→Provisioning", "Provisioning→Ready", "Ready→Recovering", "Recovering→Ready"]);
  }, 180_000);

  it("SIGTERM shuts the gateway down gracefully (exit 0, address file removed) and leaves the sandbox running", async () => {
    const s = await createReady("term");
    const p = gateway!;
    const exited = new Promise<number | null>((resolve) => p.once("exit", (code) => resolve(code)));
    p.kill("SIGTERM");
    expect(await exited).toBe(0);
    expect(existsSync(join(home, "gateway.json"))).toBe(false);
    const engine = new EngineClient({ socketPath: dockerd.socketPath });
    const i = await engine.inspectContainer(s.runtime.workload.id);
    await engine.close();
    expect(i.kind === "ok" && i.body.State.Running).toBe(true);
  }, 60_000);
});
