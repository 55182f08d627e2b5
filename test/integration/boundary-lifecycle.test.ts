// The boundary drives the lifecycle, against a real dockerd: a supervisor that
// runs but cannot hold its boundary (paused) makes the sandbox Recovering, and
// Error means closed at once — the gateway locks the boundary down over the
// control session, even while Docker itself is down.

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { deleteAllAndCheckMonitors, startDockerFixture, type DockerFixture } from "../support/docker-fixture.js";
import { eventually } from "../support/gateway-fixture.js";
import { EGRESS_LOOP, ORIGIN_POLICY, createReady, egressLog, execIn, phaseLog, startOrigin, waitPhase } from "../support/recovery-helpers.js";

let fx: DockerFixture;
let origin: string;

const BOUNDARY_DEADLINE_MS = 12_000;

beforeAll(async () => {
  fx = await startDockerFixture({ liveRestore: true, name: "bnd", service: { boundaryDeadlineMs: BOUNDARY_DEADLINE_MS, recoveryDeadlineMs: 6_000 } });
  origin = await startOrigin(fx, "origin-bnd");
});
afterAll(async () => {
  if (fx) await deleteAllAndCheckMonitors(fx);
  await fx?.close();
});

const pause = async (id: string, on: boolean): Promise<void> => {
  const r = await fx.engine.request("POST", `/containers/${id}/${on ? "pause" : "unpause"}`);
  expect(r.kind, JSON.stringify(r)).toBe("ok");
};

describe("boundary health drives the lifecycle", () => {
  it("the supervisor paused, then unpaused before the deadline: Ready → Recovering (with the reason) → Ready, same containers", async () => {
    const s = await createReady(fx, "paused-short");
    await pause(s.runtime.supervisor.id, true);
    try {
      const recovering = await waitPhase(fx, "paused-short", "Recovering", 30_000);
      expect(recovering.runtime.supervisor.id).toBe(s.runtime.supervisor.id);
      const { events } = (await fx.t.api("GET", "/v1/sandboxes/paused-short/events")).body;
      const lost = (events as any[]).find((e) => e.newPhase === "Recovering");
      expect(lost.message).toMatch(/^boundary unhealthy: /);
      // New work waits for re-verification.
      await expect(execIn(fx, "paused-short", ["true"])).rejects.toThrow(/it is Recovering; exec needs Ready/);
    } finally {
      await pause(s.runtime.supervisor.id, false);
    }
    const back = await waitPhase(fx, "paused-short", "Ready", 60_000);
    expect(back.runtime).toEqual(s.runtime);
    expect(await phaseLog(fx, "paused-short")).toEqual(["-→Provisioning", "Provisioning→Ready", "Ready→Recovering", "Recovering→Ready"]);
    expect((await execIn(fx, "paused-short", ["true"])).code).toBe(0);
  }, 120_000);

  it("the supervisor paused past the deadline: Error(BoundaryUnhealthy), and the workload is removed", async () => {
    const s = await createReady(fx, "paused-long");
    await pause(s.runtime.supervisor.id, true);
    const failed = await waitPhase(fx, "paused-long", "Error", 90_000);
    expect(failed.reason.code).toBe("BoundaryUnhealthy");
    expect(failed.reason.detail).toMatch(/not re-verified within 12 s/);
    await eventually(async () => {
      const r = await fx.engine.inspectContainer(s.runtime.workload.id);
      return r.kind === "docker" && r.status === 404 ? true : undefined;
    }, 30_000, "workload removed");
    expect(await phaseLog(fx, "paused-long")).toEqual(["-→Provisioning", "Provisioning→Ready", "Ready→Recovering", "Recovering→Error(BoundaryUnhealthy)"]);
  }, 150_000);
});

describe("Error means closed at once, even while Docker is down", () => {
  it("Docker away past the deadline → Error(RuntimeUnavailable) → the workload's allowed requests are refused while Docker is still down", async () => {
    // The workload asks the origin every 200 ms and logs each answer in its workspace.
    const s = await createReady(fx, "closed", { policy: ORIGIN_POLICY(origin), command: EGRESS_LOOP(origin) });
    const lines = (): ReturnType<typeof egressLog> => egressLog(fx, s.id);
    await eventually(() => (lines().some((l) => l.status === "200") ? true : undefined), 30_000, "allowed requests pass");

    await fx.dockerd.stop("SIGTERM");
    try {
      const failed = await waitPhase(fx, "closed", "Error", 60_000);
      expect(failed.reason.code).toBe("RuntimeUnavailable");
      const errorAt = Date.parse(((await fx.t.api("GET", "/v1/sandboxes/closed/events")).body.events as any[]).find((e) => e.newPhase === "Error").time);
      // Docker is still down, yet the workload's requests are now refused by its boundary...
      await eventually(() => (lines().some((l) => l.at > errorAt && l.status === "403") ? true : undefined), 30_000, "a refused request after the Error");
      expect(await fx.dockerd.ping()).toBe(false);
      // ...by the lockdown the gateway sent at the Error, not by the supervisor's own
      // fallback (the session-lost lockdown after its grace period)...
      const log = lines();
      const firstRefused = log.findIndex((l) => l.at > errorAt && l.status === "403");
      expect(log[firstRefused]!.reason).toBe("lockdown_gateway_sandbox_failed");
      // ...and once refused, never allowed again: the lockdown is final.
      expect(log.slice(firstRefused).filter((l) => l.status === "200")).toEqual([]);
      // Before the Error (Recovering with Docker down), the boundary still enforced the policy as written.
      expect(log.filter((l) => l.at < errorAt).some((l) => l.status === "200")).toBe(true);
    } finally {
      await fx.dockerd.startAgain();
    }
    await eventually(async () => {
      const r = await fx.engine.inspectContainer(s.runtime.workload.id);
      return r.kind === "docker" && r.status === 404 ? true : undefined;
    }, 30_000, "workload removed once Docker answers");
  }, 180_000);
});
