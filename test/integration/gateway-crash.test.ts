// Crashes lose nothing: the gateway process is SIGKILLed at random points during
// create, stop, start, delete and policy set (seeded, CRASH_SEED=<n> replays a
// run, CRASH_ROUNDS=<n> runs more: 40 in the suite, about 2 s a round), restarted, and after every restart: each
// sandbox settles in a phase consistent with its containers, its event log is one
// unbroken chain of phase changes ending in its phase (no lost, no duplicated
// row), and after deleting everything no Docker object of the gateway is left.

import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { EngineClient } from "../../src/driver/docker/engine/client.js";
import { LABEL } from "../../src/driver/docker/objects.js";
import type { PrivateDockerd } from "../support/dockerd.js";
import { eventually } from "../support/gateway-fixture.js";
import { startGatewayRig, type GatewayProcess, type GatewayRig } from "../support/gateway-process.js";

function wholeEnv(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined) return fallback;
  if (!/^[0-9]{1,9}$/.test(raw)) throw new Error(`${name} must be a whole number, got ${JSON.stringify(raw)}`);
  return Number(raw);
}
const SEED = wholeEnv("CRASH_SEED", 4242);
const ROUNDS = wholeEnv("CRASH_ROUNDS", 40);
const NAMES = ["c1", "c2", "c3"];
const SETTLED = new Set(["Ready", "Stopped", "Error", "Completed"]);

let rig: GatewayRig | undefined;
let dockerd: PrivateDockerd;
let engine: EngineClient;
let home: string;
let gw: GatewayProcess;
let gatewayId: string;

/** mulberry32: a small seeded PRNG, so a failing run can be replayed. */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

// Settings from a flag and from the environment (their ranges are cli-mistakes' job).
const START_ARGS = ["--audit-rate", "7", "--audit-max-age", "2d", "--supervisor-cpus", "0.75", "--header-timeout", "7s"];
const START_ENV = { SANDGATE_RECOVERY_DEADLINE: "60", SANDGATE_AUDIT_KEEP: "500", SANDGATE_SUPERVISOR_MEMORY: "192", SANDGATE_MAX_UNAUTHENTICATED: "99" };

beforeAll(async () => {
  rig = await startGatewayRig("crashr");
  ({ dockerd, engine, home, gw } = rig);
  // Audit bounds from a flag and from the environment (their ranges are cli-mistakes' job).
  gw.start(dockerd.socketPath, START_ARGS, START_ENV);
  await gw.up(120_000);
  gatewayId = readFileSync(join(home, "gateway-id"), "utf8").trim();
}, 180_000);

afterAll(async () => {
  await rig?.close();
});

const POLICY = (n: number) => `version: 1\nnetwork:\n  rules:\n    - name: r${n}\n      endpoints:\n        - host: h${n}.example.com\n          port: 443\n          protocol: https\n`;

async function containersOf(sandboxId: string): Promise<{ Id: string; State: string; Labels: Record<string, string> }[]> {
  const r = await engine.listContainers({ all: true, filters: { label: [`${LABEL.sandbox}=${sandboxId}`] } });
  if (r.kind !== "ok") throw new Error("list containers failed");
  return r.body as never;
}

/** Every sandbox settled; then the invariants. */
async function checkConsistent(round: number): Promise<void> {
  const list = await eventually(async () => {
    const { sandboxes } = (await gw.api("GET", "/v1/sandboxes")).body as { sandboxes: any[] };
    return sandboxes.every((s) => SETTLED.has(s.phase)) ? sandboxes : undefined;
  }, 120_000, `round ${round}: every sandbox settled`);
  for (const s of list) {
    // Containers agree with the phase (teardowns may still be in flight: wait for them).
    await eventually(async () => {
      const cs = await containersOf(s.id);
      if (s.phase === "Ready") {
        const ids = cs.filter((c) => c.State === "running").map((c) => c.Id).sort();
        return ids.join() === [s.runtime.workload.id, s.runtime.supervisor.id].sort().join() && cs.length === 2 ? true : undefined;
      }
      return cs.length === 0 ? true : undefined;
    }, 60_000, `round ${round}: ${s.name} (${s.phase}) has the containers its phase says`);
    // One unbroken chain of phase changes, ending in the current phase.
    const { events } = (await gw.api("GET", `/v1/sandboxes/${s.name}/events?limit=10000`)).body as { events: any[] };
    const seqs = events.map((e) => e.seq);
    expect(new Set(seqs).size, `round ${round}: ${s.name} has no duplicated event`).toBe(seqs.length);
    expect([...seqs].sort((a, b) => a - b), `round ${round}: ${s.name} events in order`).toEqual(seqs);
    const phases = events.filter((e) => e.kind === "phase");
    expect(phases[0].oldPhase, `round ${round}: ${s.name} starts at creation`).toBeNull();
    for (let i = 1; i < phases.length; i++) {
      expect(phases[i].oldPhase, `round ${round}: ${s.name} event ${phases[i].seq} follows ${phases[i - 1].seq}`).toBe(phases[i - 1].newPhase);
    }
    expect(phases.at(-1).newPhase, `round ${round}: ${s.name}'s last event is its phase`).toBe(s.phase);
    expect(phases.at(-1).generation).toBe(s.generation);
  }
}

describe("the gateway SIGKILLed at random points of lifecycle work", () => {
  it("runs with the audit bounds, supervisor limits and connection bounds it was started with", async () => {
    const status = await gw.api("GET", "/v1/status");
    expect(status.body.audit.limits).toMatchObject({ ratePerSecond: 7, keepPerSandbox: 500, maxAgeS: 2 * 86_400 });
    expect(status.body.supervisorLimits).toEqual({ cpus: 0.75, memoryMb: 192 });
    // The supervisor endpoint listens once the runtime is ready.
    const connections = await eventually(async () => (await gw.api("GET", "/v1/status")).body.supervisorEndpoint?.connections, 60_000, "the supervisor endpoint's connections");
    expect(connections.limits).toEqual({ headerTimeoutMs: 7000, idleTimeoutMs: 60_000, maxAuthenticated: 1024, maxUnauthenticated: 99 });
  });

  it(`${ROUNDS} rounds (seed ${SEED}): after each restart everything is consistent; after deleting all nothing is left`, async () => {
    const rnd = prng(SEED);
    const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rnd() * xs.length)]!;
    for (let round = 1; round <= ROUNDS; round++) {
      const name = pick(NAMES);
      const op = pick(["create", "create", "stop", "start", "delete", "policy"] as const);
      const request =
        op === "create" ? gw.api("POST", "/v1/sandboxes", { name })
        : op === "delete" ? gw.api("DELETE", `/v1/sandboxes/${name}`)
        : op === "policy" ? gw.api("PUT", `/v1/sandboxes/${name}/policy`, { policy: POLICY(round) })
        : gw.api("POST", `/v1/sandboxes/${name}/${op}`);
      request.catch(() => undefined); // the gateway may die before it answers
      await new Promise((r) => setTimeout(r, Math.floor(rnd() * 600)));
      await gw.kill9();
      gw.start(dockerd.socketPath, [], { SANDGATE_RECOVERY_DEADLINE: "60" });
      await gw.up(120_000);
      await checkConsistent(round);
    }

    for (const name of NAMES) await gw.api("DELETE", `/v1/sandboxes/${name}`);
    await eventually(async () => ((await gw.api("GET", "/v1/sandboxes")).body.sandboxes.length === 0 ? true : undefined), 120_000, "all deleted");
    const filter = { label: [`${LABEL.gateway}=${gatewayId}`] };
    const left = await Promise.all([engine.listContainers({ all: true, filters: filter }), engine.listVolumes({ filters: filter }), engine.listNetworks({ filters: filter })]);
    const [cs, vs, ns] = left.map((r) => (r.kind === "ok" ? r.body : null)) as [unknown[], { Volumes: unknown[] | null }, { Name: string }[]];
    expect(cs).toEqual([]);
    expect(vs.Volumes ?? []).toEqual([]);
    // The gateway's shared egress network is the one object that stays.
    expect(ns.map((n) => n.Name)).toEqual([`sandgate-egress-${gatewayId}`]);
  }, 1_800_000);
});
