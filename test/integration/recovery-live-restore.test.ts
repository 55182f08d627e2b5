// Monitoring and recovery against a real dockerd WITH live-restore, restarted,
// killed and frozen by the test itself.

import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { cli } from "../support/cli-runner.js";
import { deleteAllAndCheckMonitors, startDockerFixture, type DockerFixture } from "../support/docker-fixture.js";
import { eventually } from "../support/gateway-fixture.js";
import {
  EGRESS_LOOP,
  ORIGIN_POLICY,
  PROXY_GET,
  createReady,
  destroyedAt,
  egressLog,
  execIn,
  monitorMetrics,
  phase,
  phaseChangedAt,
  phaseLog,
  startOrigin,
  waitPhase,
} from "../support/recovery-helpers.js";

let fx: DockerFixture;
let origin: string;

/** The process is gone or a zombie: it runs no more. */
function processGone(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return /^[ZX]/.test(stat.slice(stat.lastIndexOf(")") + 2));
  } catch {
    return true;
  }
}

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
    const ticksBefore = Number((await execIn(fx, "lr1", ["sh", "-c", "wc -l < /sandbox/ticks"])).stdout.trim());
    const metricsBefore = await monitorMetrics(fx);

    await fx.dockerd.restart({ downMs: 1500 });
    const after = await waitPhase(fx, "lr1", "Ready", 60_000);

    expect(await phaseLog(fx, "lr1")).toEqual(["-→Provisioning", "Provisioning→Ready", "Ready→Recovering", "Recovering→Ready"]);
    // The control session does not go through Docker: it stayed up, and stood in for the exec probe.
    const events = (await fx.t.api("GET", "/v1/sandboxes/lr1/events")).body.events as { oldPhase?: string; newPhase?: string; message?: string }[];
    expect(events.find((e) => e.oldPhase === "Recovering" && e.newPhase === "Ready")?.message).toMatch(/unbroken control session/);
    expect(after.runtime.workload.id).toBe(before.runtime.workload.id);
    expect(after.runtime.supervisor.id).toBe(before.runtime.supervisor.id);
    expect(after.runtime.workload.startedAt).toBe(before.runtime.workload.startedAt);
    expect(after.generation).toBe(1);
    expect((await fx.t.api("GET", "/v1/status")).body.pid).toBe(status.pid);

    expect((await execIn(fx, "lr1", ["cat", "/sandbox/note.txt"])).stdout).toBe("kept\n");
    // The workload kept writing through the restart: its log only grew.
    const ticks = Number((await execIn(fx, "lr1", ["sh", "-c", "wc -l < /sandbox/ticks"])).stdout.trim());
    expect(ticksBefore).toBeGreaterThan(0);
    expect(ticks).toBeGreaterThan(ticksBefore);
    expect((await execIn(fx, "lr1", PROXY_GET(`http://${origin}:8080/after`))).stdout).toBe("200 hello from origin /after\n");
    const denied = (await execIn(fx, "lr1", PROXY_GET("http://denied.test/"))).stdout;
    expect(denied).toMatch(/^403 .*"error":"policy_denied"/);

    // A lost channel, no exit; and the restart left exactly the monitors there were.
    const m = await monitorMetrics(fx);
    expect(m.dockerConnected).toBe(true);
    expect(m.classifications.channel_lost).toBeGreaterThan(metricsBefore.classifications.channel_lost);
    expect(m.classifications.exited).toBe(metricsBefore.classifications.exited);
    expect(m.monitors).toBe(metricsBefore.monitors);
  }, 120_000);

  it("daemon SIGKILL: same outcome, nothing stopped", async () => {
    const before = await createReady(fx, "lr-kill");
    await fx.dockerd.restart({ downMs: 1000, signal: "SIGKILL" });
    const after = await waitPhase(fx, "lr-kill", "Ready", 60_000);
    expect(after.runtime).toEqual(before.runtime);
    expect(await phaseLog(fx, "lr-kill")).toEqual(["-→Provisioning", "Provisioning→Ready", "Ready→Recovering", "Recovering→Ready"]);
  }, 120_000);

  it("daemon frozen (SIGSTOP): probes time out → Recovering, thawed → Ready, nothing stopped", async () => {
    const before = await createReady(fx, "lr-freeze");
    await fx.dockerd.freeze();
    try {
      await eventually(async () => ((await phase(fx, "lr-freeze")) === "Recovering" ? true : undefined), 30_000, "Recovering while frozen");
      // New work is refused while Recovering, but nothing is stopped.
      await expect(execIn(fx, "lr-freeze", ["true"])).rejects.toThrow(/it is Recovering; exec needs Ready/);
    } finally {
      fx.dockerd.thaw();
    }
    const after = await waitPhase(fx, "lr-freeze", "Ready", 60_000);
    expect(after.runtime).toEqual(before.runtime);
    expect(await phaseLog(fx, "lr-freeze")).toEqual(["-→Provisioning", "Provisioning→Ready", "Ready→Recovering", "Recovering→Ready"]);
  }, 120_000);

  it("the supervisor exits while the daemon is down: after it returns, Error(SupervisorExited) with the real exit code, workload stopped", async () => {
    const s = await createReady(fx, "lr2");
    const bystander = await createReady(fx, "lr2-other");
    await fx.dockerd.stop("SIGTERM");
    // With the daemon down, kill the supervisor's process directly (as a crash would).
    process.kill(s.runtime.supervisor.pid, "SIGKILL");
    await eventually(() => (processGone(s.runtime.supervisor.pid) ? true : undefined), 30_000, "supervisor process gone");
    await fx.dockerd.startAgain();
    const failed = await waitPhase(fx, "lr2", "Error", 60_000);
    expect(failed.reason.code).toBe("SupervisorExited");
    expect(failed.reason.exitCode).toBe(137);
    await eventually(async () => {
      const r = await fx.engine.inspectContainer(s.runtime.workload.id);
      return r.kind === "docker" && r.status === 404 ? true : undefined;
    }, 30_000, "workload removed");
    // Failed closed in that order: the Error was recorded, then the workload removed.
    expect(await destroyedAt(fx, s.runtime.workload.id)).toBeGreaterThanOrEqual(await phaseChangedAt(fx, "lr2", "Error"));
    // The other sandbox lived through all of it.
    const other = await waitPhase(fx, "lr2-other", "Ready", 60_000);
    expect(other.runtime).toEqual(bystander.runtime);
    expect((await phaseLog(fx, "lr2-other")).some((l) => l.includes("Error"))).toBe(false);
  }, 120_000);

  it("docker kill of the supervisor (daemon healthy): Error within 2 s, workload stopped", async () => {
    const s = await createReady(fx, "lr3");
    const exitedBefore: number = (await monitorMetrics(fx)).classifications.exited;
    expect((await fx.engine.killContainer(s.runtime.supervisor.id, "SIGKILL")).kind).toBe("ok");
    const failed = await waitPhase(fx, "lr3", "Error", 30_000);
    expect(failed.reason).toMatchObject({ code: "SupervisorExited", exitCode: 137 });
    // Straight from Ready: the exit was read from Docker, not waited out as a lost channel.
    expect(await phaseLog(fx, "lr3")).toEqual(["-→Provisioning", "Provisioning→Ready", "Ready→Error(SupervisorExited)"]);
    await eventually(async () => {
      const r = await fx.engine.inspectContainer(s.runtime.workload.id);
      return r.kind === "docker" && r.status === 404 ? true : undefined;
    }, 30_000, "workload removed");
    // Failed closed in that order: the Error was recorded, then the workload removed.
    expect(await destroyedAt(fx, s.runtime.workload.id)).toBeGreaterThanOrEqual(await phaseChangedAt(fx, "lr3", "Error"));
    // Error recovers with start: a new generation, same workspace.
    expect((await fx.t.api("POST", "/v1/sandboxes/lr3/start")).status).toBe(202);
    const again = await waitPhase(fx, "lr3", "Ready", 60_000);
    expect(again.generation).toBe(2);
    const m = await monitorMetrics(fx);
    expect(m.classifications.exited).toBeGreaterThan(exitedBefore);
  }, 120_000);

  it("a tighter policy set while Docker is down (Recovering): accepted, enforced by the supervisor at once, and in force when the sandbox is Ready again", async () => {
    const s = await createReady(fx, "lr-tighten", { policy: ORIGIN_POLICY(origin), command: EGRESS_LOOP(origin) });
    await eventually(() => (egressLog(fx, s.id).some((l) => l.status === "200") ? true : undefined), 30_000, "allowed requests pass");
    const dir = mkdtempSync(join(tmpdir(), "sg-tighten-"));
    const tight = join(dir, "tight.yaml");
    writeFileSync(tight, "version: 1\n"); // denies all egress
    let setAt = 0;
    await fx.dockerd.stop("SIGTERM");
    try {
      await waitPhase(fx, "lr-tighten", "Recovering", 30_000);
      // The CLI, as an operator would during the outage; --wait returns once the supervisor acks.
      const set = await cli(["policy", "set", "lr-tighten", "--policy", tight, "--wait", "--timeout", "30"], fx.cliEnv);
      setAt = Date.now();
      expect(set.stderr).toBe("");
      expect(set.code).toBe(0);
      expect(set.stdout).toMatch(/^lr-tighten {2}policy revision 2 accepted; enforced by the supervisor; closed \d+ connections?; the sandbox is Recovering: Ready again once Docker answers and re-verifies it\n$/);
      // Enforced while Docker is still down: a request the old policy allowed is refused now.
      await eventually(() => (egressLog(fx, s.id).some((l) => l.at > setAt && l.status === "403") ? true : undefined), 30_000, "a refused request after policy set");
      expect(egressLog(fx, s.id).filter((l) => l.at > setAt && l.status !== "403")).toEqual([]);
      expect(egressLog(fx, s.id).find((l) => l.at > setAt)?.reason).toBe("no_matching_rule");
      expect(await fx.dockerd.ping()).toBe(false);
      const during = await waitPhase(fx, "lr-tighten", "Recovering");
      expect(during.boundary).toMatchObject({ enforcedRevision: 2, desiredRevision: 2 });
      // Without --wait: accepted, and the answer says what the Recovering sandbox waits for.
      const again = await cli(["policy", "set", "lr-tighten", "--policy", tight], fx.cliEnv);
      expect(again.code, again.stderr).toBe(0);
      expect(again.stdout).toBe(
        "lr-tighten  policy revision 3 accepted; the sandbox is Recovering: its supervisor enforces the revision once it acknowledges it (that needs no Docker), and the sandbox is Ready again only after that\n",
      );
    } finally {
      await fx.dockerd.startAgain();
      rmSync(dir, { recursive: true, force: true });
    }
    const after = await waitPhase(fx, "lr-tighten", "Ready", 60_000);
    expect(after.runtime).toEqual(s.runtime);
    expect(after.boundary).toMatchObject({ enforcedRevision: 3, desiredRevision: 3, healthy: true });
    expect(await phaseLog(fx, "lr-tighten")).toEqual(["-→Provisioning", "Provisioning→Ready", "Ready→Recovering", "Recovering→Ready"]);
    // Ready again with the tighter policy in force: what it allowed before is denied, and nothing got through since.
    expect((await execIn(fx, "lr-tighten", PROXY_GET(`http://${origin}:8080/after`))).stdout).toMatch(/^403 .*"error":"policy_denied"/);
    expect(egressLog(fx, s.id).filter((l) => l.at > setAt && l.status === "200")).toEqual([]);
  }, 180_000);
});
