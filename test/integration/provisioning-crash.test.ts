// Interrupted provisioning leaves nothing running: the gateway process is
// SIGKILLed right after each step of a launch (as Docker reports the step),
// restarted while Docker is down, and Docker is brought back. Every container of
// that generation is then found by its labels and removed; only the workspace
// (and the sandbox's network) remain, and the sandbox is Error(ProvisioningFailed).

import { existsSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { EngineClient } from "../../src/driver/docker/engine/client.js";
import type { DockerEvent } from "../../src/driver/docker/engine/types.js";
import { LABEL, networkName } from "../../src/driver/docker/objects.js";
import type { PrivateDockerd } from "../support/dockerd.js";
import { eventually } from "../support/gateway-fixture.js";
import { startGatewayRig, type GatewayProcess, type GatewayRig } from "../support/gateway-process.js";

let rig: GatewayRig | undefined;
let dockerd: PrivateDockerd;
let engine: EngineClient;
let home: string;
let gw: GatewayProcess;

beforeAll(async () => {
  rig = await startGatewayRig("crash");
  ({ dockerd, engine, home, gw } = rig);
}, 180_000);

afterAll(async () => {
  await rig?.close();
});

/** The Docker events that mark each step of a launch, in order. */
const STEPS: { step: string; matches: (e: DockerEvent, name: string) => boolean }[] = [
  { step: "network created", matches: (e) => e.Type === "network" && e.Action === "create" && /^sandgate-sbx_[0-9a-f]+-net$/.test(e.Actor?.Attributes?.name ?? "") },
  { step: "supervisor created", matches: (e, n) => container(e, n, "create", "supervisor") },
  { step: "supervisor started", matches: (e, n) => container(e, n, "start", "supervisor") },
  { step: "workload created", matches: (e, n) => container(e, n, "create", "workload") },
  { step: "workload started", matches: (e, n) => container(e, n, "start", "workload") },
];

function container(e: DockerEvent, name: string, action: string, role: string): boolean {
  const a = e.Actor?.Attributes ?? {};
  return e.Type === "container" && e.Action === action && a[LABEL.name] === name && a[LABEL.role] === role;
}

/** Create a sandbox and SIGKILL the gateway as soon as Docker reports `step`; returns the sandbox id. */
async function createAndKillAt(name: string, step: (typeof STEPS)[number]): Promise<string> {
  const ac = new AbortController();
  let killed: Promise<void> | undefined;
  let open = false;
  const stream = engine.events({ signal: ac.signal, onOpen: () => (open = true) }, (e) => {
    if (!killed && step.matches(e, name)) killed = gw.kill9();
  });
  try {
    await eventually(() => (open ? true : undefined), 30_000, "events stream open");
    const r = await gw.api("POST", "/v1/sandboxes", { name });
    expect(r.status, JSON.stringify(r.body)).toBe(201);
    await eventually(() => (killed ? true : undefined), 60_000, `Docker reporting "${step.step}"`);
    await killed;
    return r.body.id as string;
  } finally {
    ac.abort();
    await stream;
  }
}

const ours = async (sandboxId: string) => {
  const r = await engine.listContainers({ all: true, filters: { label: [`${LABEL.sandbox}=${sandboxId}`] } });
  if (r.kind !== "ok") throw new Error(`list containers: ${r.kind}`);
  return r.body;
};

describe("a gateway SIGKILLed during provisioning, restarted while Docker is down", () => {
  it.each(STEPS.map((s, i) => [i + 1, s.step, s] as const))("killed after step %i (%s): once Docker is back, no container of the generation remains", async (i, _step, step) => {
    const name = `crash-${i}`;
    // Each case starts from a running gateway on a running daemon, whatever an earlier one left.
    if (!(await dockerd.ping())) await dockerd.startAgain();
    if (!gw.child || gw.child.exitCode !== null || gw.child.signalCode !== null) {
      gw.start(dockerd.socketPath);
      await gw.up(120_000);
    }
    await eventually(async () => ((await gw.api("GET", "/v1/status")).body.runtime.ready ? true : undefined), 60_000, "runtime ready");
    const id = await createAndKillAt(name, step);

    await dockerd.stop("SIGTERM");
    gw.start(dockerd.socketPath);
    await gw.up();
    await dockerd.startAgain();

    const failed = await eventually(async () => {
      const s = (await gw.api("GET", `/v1/sandboxes/${name}`)).body;
      return s.phase === "Error" ? s : undefined;
    }, 60_000, `${name} → Error`);
    expect(failed.reason.code).toBe("ProvisioningFailed");
    await eventually(async () => ((await ours(id)).length === 0 ? true : undefined), 60_000, `no container of ${name} left`);
    const s = (await gw.api("GET", `/v1/sandboxes/${name}`)).body;
    expect(s.runtime).toBeNull();
    // The launch files of the generation are gone from the gateway's home too.
    const launch = join(home, "launch");
    expect(existsSync(launch) ? readdirSync(launch).filter((d) => d.startsWith(`${id}-g`)) : []).toEqual([]);
    // The workspace is kept (an Error sandbox can be started again on it) when it was made.
    // (The workspace image is made between the network and the supervisor.)
    const image = join(home, "workspaces", `${id}.img`);
    if (i >= 2) expect(existsSync(image)).toBe(true);

    // Deleting it removes the rest.
    expect((await gw.api("DELETE", `/v1/sandboxes/${name}`)).status).toBe(202);
    await eventually(async () => ((await gw.api("GET", `/v1/sandboxes/${name}`)).status === 404 ? true : undefined), 60_000, `${name} deleted`);
    expect(existsSync(image)).toBe(false);
    expect(existsSync(join(home, "workspaces", id))).toBe(false);
    expect((await engine.inspectNetwork(networkName(id))).kind).toBe("docker");
  }, 240_000);
});
