// Monitoring and recovery against a real dockerd WITH live-restore, restarted,
// killed and frozen by the test itself.

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { deleteAllAndCheckMonitors, startDockerFixture, type DockerFixture } from "../support/docker-fixture.js";
import { eventually } from "../support/gateway-fixture.js";
import {
  ORIGIN_POLICY,
  PROXY_GET,
  createReady,
  execIn,
  monitorMetrics,
  phase,
  phaseLog,
  startOrigin,
  waitPhase,
} from "../support/recovery-helpers.js";

let fx: DockerFixture;
let origin: string;

beforeAll(async () => {
  fx = await startDockerFixture({ liveRestore: true, name: "rlr", service: { recoveryDeadlineMs: 45_000 } });
  origin = await startOrigin(fx, "origin-rlr");
});
afterAll(async () => {
  if (fx) await deleteAllAndCheckMonitors(fx);
  await fx?.close();
});

describe("live-restore on", () => {
  it("daemon restart: Ready → Recovering → Ready, same containers, workspace intact, exec and policy work", async () => {
    const before = await createReady(fx, "lr1", { policy: ORIGIN_POLICY(origin), command: ["sh", "-c", "while true; do date >> /sandbox/ticks; sleep 0.2; done"] });
    expect((await execIn(fx, "lr1", ["sh", "-c", "echo kept > /sandbox/note.txt"])).code).toBe(0);
    const status = (await fx.t.api("GET", "/v1/status")).body;

    await fx.dockerd.restart({ downMs: 1500 });
    const after = await waitPhase(fx, "lr1", "Ready", 30_000);

    const log = await phaseLog(fx, "lr1");
    expect(log.some((l) => l.includes("Error"))).toBe(false);
    expect(log.slice(-2)).toEqual(["Ready→Recovering", "Recovering→Ready"]);
    expect(after.runtime.workload.id).toBe(before.runtime.workload.id);
    expect(after.runtime.supervisor.id).toBe(before.runtime.supervisor.id);
    expect(after.runtime.workload.startedAt).toBe(before.runtime.workload.startedAt);
    expect(after.generation).toBe(1);
    expect((await fx.t.api("GET", "/v1/status")).body.pid).toBe(status.pid);

    expect((await execIn(fx, "lr1", ["cat", "/sandbox/note.txt"])).stdout).toBe("kept\n");
    // The workload kept writing through the restart: its log only grew.
    const ticks = Number((await execIn(fx, "lr1", ["sh", "-c", "wc -l < /sandbox/ticks"])).stdout.trim());
    expect(ticks).toBeGreaterThan(5);
    expect((await execIn(fx, "lr1", PROXY_GET(`http://${origin}:8080/after`))).stdout).toBe("200 hello from origin /after\n");
    const denied = (await execIn(fx, "lr1", PROXY_GET("http://denied.test/"))).stdout;
    expect(denied).toMatch(/^403 .*"error":"policy_denied"/);

    const m = await monitorMetrics(fx);
    expect(m.dockerConnected).toBe(true);
    expect(m.classifications.channel_lost).toBeGreaterThan(0);
    expect(m.classifications.exited).toBe(0);
    expect(m.monitors).toBe(1);
  }, 90_000);

  it("daemon SIGKILL: same outcome, nothing stopped", async () => {
    const before = (await fx.t.api("GET", "/v1/sandboxes/lr1")).body;
    await fx.dockerd.restart({ downMs: 1000, signal: "SIGKILL" });
    const after = await waitPhase(fx, "lr1", "Ready", 30_000);
    expect(after.runtime.workload.id).toBe(before.runtime.workload.id);
    expect((await phaseLog(fx, "lr1")).some((l) => l.includes("Error"))).toBe(false);
  }, 90_000);

  it("daemon frozen (SIGSTOP): probes time out → Recovering, thawed → Ready, nothing stopped", async () => {
    const before = (await fx.t.api("GET", "/v1/sandboxes/lr1")).body;
    await fx.dockerd.freeze();
    try {
      await eventually(async () => ((await phase(fx, "lr1")) === "Recovering" ? true : undefined), 15_000, "Recovering while frozen");
      // New work is refused while Recovering, but nothing is stopped.
      await expect(execIn(fx, "lr1", ["true"])).rejects.toThrow(/it is Recovering; exec needs Ready/);
    } finally {
      fx.dockerd.thaw();
    }
    const after = await waitPhase(fx, "lr1", "Ready", 30_000);
    expect(after.runtime.workload.id).toBe(before.runtime.workload.id);
    expect((await phaseLog(fx, "lr1")).some((l) => l.includes("Error"))).toBe(false);
  }, 90_000);

  it("the supervisor exits while the daemon is down: after it returns, Error(SupervisorExited) with the real exit code, workload stopped", async () => {
    const s = await createReady(fx, "lr2");
    await fx.dockerd.stop("SIGTERM");
    // With the daemon down, kill the supervisor's process directly (as a crash would).
    process.kill(s.runtime.supervisor.pid, "SIGKILL");
    await new Promise((r) => setTimeout(r, 500));
    await fx.dockerd.startAgain();
    const failed = await waitPhase(fx, "lr2", "Error", 30_000);
    expect(failed.reason.code).toBe("SupervisorExited");
    expect(failed.reason.exitCode).toBe(137);
    await eventually(async () => {
      const r = await fx.engine.inspectContainer(s.runtime.workload.id);
      return r.kind === "docker" && r.status === 404 ? true : undefined;
    }, 15_000, "workload removed");
    // lr1 lived through all of it.
    expect(await phase(fx, "lr1")).toBe("Ready");
  }, 90_000);

  it("docker kill of the supervisor (daemon healthy): Error within 2 s, workload stopped", async () => {
    const s = await createReady(fx, "lr3");
    const t0 = Date.now();
    expect((await fx.engine.killContainer(s.runtime.supervisor.id, "SIGKILL")).kind).toBe("ok");
    const failed = await waitPhase(fx, "lr3", "Error", 5_000);
    expect(Date.now() - t0).toBeLessThan(2_000);
    expect(failed.reason).toMatchObject({ code: "SupervisorExited", exitCode: 137 });
    await eventually(async () => {
      const r = await fx.engine.inspectContainer(s.runtime.workload.id);
      return r.kind === "docker" && r.status === 404 ? true : undefined;
    }, 10_000, "workload removed");
    // Error recovers with start: a new generation, same workspace.
    expect((await fx.t.api("POST", "/v1/sandboxes/lr3/start")).status).toBe(202);
    const again = await waitPhase(fx, "lr3", "Ready");
    expect(again.generation).toBe(2);
    const m = await monitorMetrics(fx);
    expect(m.classifications.exited).toBeGreaterThan(0);
  }, 60_000);
});
