// Recovery under injected faults: the gateway reaches a real dockerd (live-restore
// on) through a fault-injection proxy, so transport failures are deterministic
// while the daemon stays healthy; and daemon outages longer than the deadline.

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LABEL, containerName } from "../../src/driver/docker/objects.js";
import { deleteAllAndCheckMonitors, startDockerFixture, startSecondGateway, type DockerFixture } from "../support/docker-fixture.js";
import { eventually } from "../support/gateway-fixture.js";
import { createReady, execIn, monitorMetrics, phase, phaseLog, waitPhase } from "../support/recovery-helpers.js";

let fx: DockerFixture;

beforeAll(async () => {
  // A deadline no test reaches by accident on a slow machine; the test that needs
  // one to pass uses a second gateway with a short one.
  fx = await startDockerFixture({ liveRestore: true, name: "rf", viaFaultProxy: true, service: { recoveryDeadlineMs: 120_000 } });
});
afterAll(async () => {
  if (fx) await deleteAllAndCheckMonitors(fx);
  await fx?.close();
});

const proxy = () => fx.proxy!;

describe("transport faults with a healthy daemon", () => {
  it("events stream cut by the proxy: Recovering briefly, back to Ready, exactly one monitor and one stream", async () => {
    const before = await createReady(fx, "cut");
    const monitorsBefore = (await monitorMetrics(fx)).monitors;
    expect(proxy().cut(/\/events/)).toBe(1);
    // Recovery is quick: wait for its record rather than polling for the phase.
    await eventually(async () => ((await phaseLog(fx, "cut")).includes("Recovering→Ready") ? true : undefined), 30_000, "recovered");
    expect(await phaseLog(fx, "cut")).toEqual(["-→Provisioning", "Provisioning→Ready", "Ready→Recovering", "Recovering→Ready"]);
    const after = (await fx.t.api("GET", "/v1/sandboxes/cut")).body;
    expect(after.runtime).toEqual(before.runtime);
    // Still one monitor for it: the reconnect neither dropped nor duplicated one.
    const m = await monitorMetrics(fx);
    expect(m.monitors).toBe(monitorsBefore);
    // One events stream, whatever the number of sandboxes (a loaded machine may need a moment to reopen it).
    await eventually(() => (proxy().openRequests().filter((r) => r.includes("/events")).length === 1 ? true : undefined), 30_000, "one events stream");
  }, 60_000);

  it("Docker answering 500s is not an exit: Recovering, then Ready when it answers again", async () => {
    await createReady(fx, "err500");
    const attemptsBefore: number = (await monitorMetrics(fx)).reconnectAttempts;
    const failedBefore = proxy().stats().failed;
    proxy().fail(500);
    proxy().cut(/\/events/);
    try {
      await eventually(async () => ((await phase(fx, "err500")) === "Recovering" ? true : undefined), 30_000, "Recovering");
      // Several reconnects answered 500 later, it is still just Recovering: no exit read
      // into a 500, and not Ready either.
      await eventually(
        async () => ((await monitorMetrics(fx)).reconnectAttempts >= attemptsBefore + 3 && proxy().stats().failed > failedBefore ? true : undefined),
        30_000,
        "three reconnect attempts answered 500",
      );
      expect(await phaseLog(fx, "err500")).toEqual(["-→Provisioning", "Provisioning→Ready", "Ready→Recovering"]);
    } finally {
      proxy().fail(null);
    }
    await waitPhase(fx, "err500", "Ready", 30_000);
    expect(await phaseLog(fx, "err500")).toEqual(["-→Provisioning", "Provisioning→Ready", "Ready→Recovering", "Recovering→Ready"]);
  }, 90_000);

  it("stop while Recovering ends Stopped, never Error, no monitor left; delete likewise leaves nothing", async () => {
    const monitorsBefore = (await monitorMetrics(fx)).monitors;
    await createReady(fx, "stopme");
    await createReady(fx, "delme");
    const delId = (await fx.t.api("GET", "/v1/sandboxes/delme")).body.id;
    proxy().refuse(true);
    proxy().cutAll();
    try {
      await eventually(async () => ((await phase(fx, "stopme")) === "Recovering" && (await phase(fx, "delme")) === "Recovering" ? true : undefined), 30_000, "both Recovering");
      expect((await fx.t.api("POST", "/v1/sandboxes/stopme/stop")).status).toBe(202);
      expect((await fx.t.api("DELETE", "/v1/sandboxes/delme")).status).toBe(202);
      // Both intents met the unreachable runtime (and keep retrying) before it returns.
      const waiting = async (name: string, what: string): Promise<boolean> =>
        ((await fx.t.api("GET", `/v1/sandboxes/${name}/events`)).body.events as any[]).some((e) => e.kind === "info" && String(e.message).startsWith(`${what} is waiting for the runtime`));
      await eventually(async () => ((await waiting("stopme", "stop")) && (await waiting("delme", "delete")) ? true : undefined), 30_000, "stop and delete waiting for the runtime");
    } finally {
      proxy().refuse(false);
    }
    await waitPhase(fx, "stopme", "Stopped", 30_000);
    await waitPhase(fx, "delme", "gone", 30_000);
    expect((await phaseLog(fx, "stopme")).some((l) => l.includes("Error"))).toBe(false);
    const left = await fx.engine.listContainers({ all: true, filters: { label: [`${LABEL.sandbox}=${delId}`] } });
    expect(left.kind === "ok" && left.body).toEqual([]);
    // Neither is monitored any more.
    expect((await monitorMetrics(fx)).monitors).toBe(monitorsBefore);
  }, 60_000);

  it("supervisor replaced by a look-alike (same name and labels) while the stream was down: Error(SupervisorReplaced), workload stopped", async () => {
    const s = await createReady(fx, "swap");
    const changedBefore = (await monitorMetrics(fx)).classifications.instance_changed;
    proxy().refuse(true);
    proxy().cutAll();
    try {
      await eventually(async () => ((await phase(fx, "swap")) === "Recovering" ? true : undefined), 30_000, "Recovering");
      const old = await fx.engine.inspectContainer(s.runtime.supervisor.id);
      if (old.kind !== "ok") throw new Error("inspect failed");
      expect((await fx.engine.removeContainer(s.runtime.supervisor.id, { force: true })).kind).toBe("ok");
      const name = containerName(s.id, 1, "supervisor");
      const fake = await fx.engine.createContainer(name, {
        Image: old.body.Image,
        Cmd: ["/usr/local/bin/node", "-e", "setInterval(()=>{},1e9)"],
        Labels: old.body.Config.Labels ?? {},
      });
      if (fake.kind !== "ok") throw new Error("create failed");
      expect((await fx.engine.startContainer(fake.body.Id)).kind).toBe("ok");
    } finally {
      proxy().refuse(false);
    }
    const failed = await waitPhase(fx, "swap", "Error", 30_000);
    expect(failed.reason.code).toBe("SupervisorReplaced");
    expect(await phaseLog(fx, "swap")).toEqual(["-→Provisioning", "Provisioning→Ready", "Ready→Recovering", "Recovering→Error(SupervisorReplaced)"]);
    await eventually(async () => {
      const r = await fx.engine.listContainers({ all: true, filters: { label: [`${LABEL.sandbox}=${s.id}`] } });
      return r.kind === "ok" && r.body.length === 0 ? true : undefined;
    }, 30_000, "workload and look-alike removed");
    expect((await monitorMetrics(fx)).classifications.instance_changed).toBeGreaterThan(changedBefore);
  }, 60_000);

  it("a stale event for an older generation after start changes nothing, and is counted", async () => {
    await createReady(fx, "gens");
    await fx.t.api("POST", "/v1/sandboxes/gens/stop");
    await waitPhase(fx, "gens", "Stopped");
    const staleBefore: number = (await monitorMetrics(fx)).classifications.stale_dropped;
    await fx.t.api("POST", "/v1/sandboxes/gens/start");
    const g2 = await waitPhase(fx, "gens", "Ready");
    expect(g2.generation).toBe(2);
    // Replay an old generation's exit at the monitor: a container labelled as
    // generation 1 of this sandbox dies now.
    const image = fx.driver.imageRefs!.workload.id;
    const ghost = await fx.engine.createContainer(`ghost-${g2.id}`, {
      Image: image,
      Cmd: ["sh", "-c", "exit 3"],
      Labels: { [LABEL.gateway]: fx.driver.gatewayId, [LABEL.sandbox]: g2.id, [LABEL.generation]: "1", [LABEL.role]: "supervisor", [LABEL.nonce]: "old" },
    });
    if (ghost.kind !== "ok") throw new Error("ghost create failed");
    await fx.engine.startContainer(ghost.body.Id);
    // Its start and its exit both reach the monitor, and both are dropped as stale.
    await eventually(async () => {
      const i = await fx.engine.inspectContainer(ghost.body.Id);
      return i.kind === "ok" && !i.body.State.Running && i.body.State.ExitCode === 3 ? true : undefined;
    }, 30_000, "ghost exited");
    await eventually(async () => ((await monitorMetrics(fx)).classifications.stale_dropped >= staleBefore + 2 ? true : undefined), 30_000, "stale start and die counted");
    const now = (await fx.t.api("GET", "/v1/sandboxes/gens")).body;
    expect(now.phase).toBe("Ready");
    expect(now.runtime).toEqual(g2.runtime);
    // Not even a passing Recovering: the history ends with the start of generation 2.
    expect(await phaseLog(fx, "gens")).toEqual([
      "-→Provisioning",
      "Provisioning→Ready",
      "Ready→Stopping",
      "Stopping→Stopped",
      "Stopped→Provisioning",
      "Provisioning→Ready",
    ]);
    await fx.engine.removeContainer(ghost.body.Id, { force: true });
  }, 60_000);
});

describe("prolonged unavailability", () => {
  it("daemon down past the deadline: Error(RuntimeUnavailable); workload stopped when it returns; another gateway's sandbox untouched", async () => {
    // This gateway fails its sandboxes closed after 6 s; the file's gateway (a long
    // deadline) is the other one.
    const short = await startSecondGateway(fx, { recoveryDeadlineMs: 6_000 });
    const mineFx: DockerFixture = { ...fx, t: short.t, driver: short.driver };
    try {
      const mine = await createReady(mineFx, "longdown");
      const theirs = await createReady(fx, "theirs");

      await fx.dockerd.stop("SIGTERM");
      const failed = await waitPhase(mineFx, "longdown", "Error", 60_000);
      expect(failed.reason.code).toBe("RuntimeUnavailable");
      // Still there while Docker is down: it cannot be stopped yet.
      await fx.dockerd.startAgain();
      await eventually(async () => {
        const i = await fx.engine.inspectContainer(mine.runtime.workload.id);
        return i.kind === "docker" && i.status === 404 ? true : undefined;
      }, 30_000, "workload removed after the daemon returned");
      await eventually(async () => ((await short.t.api("GET", "/v1/sandboxes/longdown")).body.runtime === null ? true : undefined), 30_000, "runtime cleared");
      expect(await phaseLog(mineFx, "longdown")).toEqual(["-→Provisioning", "Provisioning→Ready", "Ready→Recovering", "Recovering→Error(RuntimeUnavailable)"]);

      const theirsAfter = await waitPhase(fx, "theirs", "Ready", 60_000);
      expect(theirsAfter.runtime).toEqual(theirs.runtime);
      expect((await phaseLog(fx, "theirs")).some((l) => l.includes("Error"))).toBe(false);
      const i = await fx.engine.inspectContainer(theirs.runtime.workload.id);
      expect(i.kind === "ok" && i.body.State.Running).toBe(true);
    } finally {
      await short.t.close();
    }
  }, 180_000);

  it("flapping daemon: five restarts within 30 s, no Error, backoff grows and resets, Ready at the end", async () => {
    const s = await createReady(fx, "flap");
    const attemptsBefore = (await monitorMetrics(fx)).reconnectAttempts;
    // Back to back: the next restart as soon as the monitor holds a new connection,
    // whether or not the sandbox is Ready again.
    for (let i = 0; i < 5; i++) {
      const disconnects = (await monitorMetrics(fx)).disconnects;
      await fx.dockerd.restart({ downMs: 1500 });
      await eventually(async () => {
        const m = await monitorMetrics(fx);
        return m.disconnects > disconnects && m.dockerConnected ? true : undefined;
      }, 60_000, `monitor reconnected after restart ${i + 1}`);
    }
    const after = await waitPhase(fx, "flap", "Ready", 60_000);
    expect(after.runtime).toEqual(s.runtime);
    // Only outages and recoveries after it became Ready, in turn, ending Ready: never Error.
    const tail = (await phaseLog(fx, "flap")).slice(2);
    expect(tail.length).toBeGreaterThanOrEqual(2);
    expect(tail).toEqual(tail.map((_, i) => (i % 2 === 0 ? "Ready→Recovering" : "Recovering→Ready")));
    const m = await monitorMetrics(fx);
    const attempts: number = m.reconnectAttempts - attemptsBefore;
    expect(attempts).toBeGreaterThanOrEqual(10);
    expect(attempts, "more reconnects than recentBackoffMs keeps").toBeLessThanOrEqual(50);
    const delays: number[] = m.recentBackoffMs.slice(-attempts);
    expect(delays.length).toBeGreaterThanOrEqual(10);
    expect(Math.max(...delays)).toBeGreaterThan(400); // grew during an outage
    expect(delays.filter((d) => d <= 240).length).toBeGreaterThanOrEqual(5); // reset after each reconnect
    expect((await execIn(fx, "flap", ["echo", "ok"])).stdout).toBe("ok\n");
  }, 240_000);
});
