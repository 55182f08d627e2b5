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
  fx = await startDockerFixture({ liveRestore: true, name: "rf", viaFaultProxy: true, service: { recoveryDeadlineMs: 6_000 } });
});
afterAll(async () => {
  if (fx) await deleteAllAndCheckMonitors(fx);
  await fx?.close();
});

const proxy = () => fx.proxy!;

describe("transport faults with a healthy daemon", () => {
  it("events stream cut by the proxy: Recovering briefly, back to Ready, exactly one monitor and one stream", async () => {
    const before = await createReady(fx, "cut");
    expect(proxy().cut(/\/events/)).toBe(1);
    // Recovery is quick: wait for its record rather than polling for the phase.
    await eventually(async () => ((await phaseLog(fx, "cut")).includes("Recovering→Ready") ? true : undefined), 15_000, "recovered");
    expect(await phaseLog(fx, "cut")).toEqual(["-→Provisioning", "Provisioning→Ready", "Ready→Recovering", "Recovering→Ready"]);
    const after = (await fx.t.api("GET", "/v1/sandboxes/cut")).body;
    expect(after.runtime).toEqual(before.runtime);
    const m = await monitorMetrics(fx);
    expect(m.monitors).toBe(1);
    // One events stream, whatever the number of sandboxes (a loaded machine may need a moment to reopen it).
    await eventually(() => (proxy().openRequests().filter((r) => r.includes("/events")).length === 1 ? true : undefined), 10_000, "one events stream");
  }, 60_000);

  it("Docker answering 500s is not an exit: Recovering, then Ready when it answers again", async () => {
    proxy().fail(500);
    proxy().cut(/\/events/);
    try {
      await eventually(async () => ((await phase(fx, "cut")) === "Recovering" ? true : undefined), 10_000, "Recovering");
      await new Promise((r) => setTimeout(r, 1500));
      expect(await phase(fx, "cut")).toBe("Recovering");
    } finally {
      proxy().fail(null);
    }
    await waitPhase(fx, "cut", "Ready", 15_000);
    expect((await phaseLog(fx, "cut")).some((l) => l.includes("Error"))).toBe(false);
  }, 60_000);

  it("stop while Recovering ends Stopped, never Error, no monitor left; delete likewise leaves nothing", async () => {
    await createReady(fx, "stopme");
    await createReady(fx, "delme");
    const delId = (await fx.t.api("GET", "/v1/sandboxes/delme")).body.id;
    proxy().refuse(true);
    proxy().cutAll();
    try {
      await eventually(async () => ((await phase(fx, "stopme")) === "Recovering" && (await phase(fx, "delme")) === "Recovering" ? true : undefined), 10_000, "both Recovering");
      expect((await fx.t.api("POST", "/v1/sandboxes/stopme/stop")).status).toBe(202);
      expect((await fx.t.api("DELETE", "/v1/sandboxes/delme")).status).toBe(202);
      await new Promise((r) => setTimeout(r, 800));
    } finally {
      proxy().refuse(false);
    }
    await waitPhase(fx, "stopme", "Stopped", 20_000);
    await waitPhase(fx, "delme", "gone", 20_000);
    expect((await phaseLog(fx, "stopme")).some((l) => l.includes("Error"))).toBe(false);
    const left = await fx.engine.listContainers({ all: true, filters: { label: [`${LABEL.sandbox}=${delId}`] } });
    expect(left.kind === "ok" && left.body).toEqual([]);
    // Only "cut" is still monitored.
    expect((await monitorMetrics(fx)).monitors).toBe(1);
  }, 60_000);

  it("supervisor replaced by a look-alike (same name and labels) while the stream was down: Error(SupervisorReplaced), workload stopped", async () => {
    const s = await createReady(fx, "swap");
    proxy().refuse(true);
    proxy().cutAll();
    try {
      await eventually(async () => ((await phase(fx, "swap")) === "Recovering" ? true : undefined), 10_000, "Recovering");
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
    const failed = await waitPhase(fx, "swap", "Error", 20_000);
    expect(failed.reason.code).toBe("SupervisorReplaced");
    await eventually(async () => {
      const r = await fx.engine.listContainers({ all: true, filters: { label: [`${LABEL.sandbox}=${s.id}`] } });
      return r.kind === "ok" && r.body.length === 0 ? true : undefined;
    }, 15_000, "workload and look-alike removed");
    expect((await monitorMetrics(fx)).classifications.instance_changed).toBeGreaterThan(0);
  }, 60_000);

  it("a stale event for an older generation after start changes nothing, and is counted", async () => {
    await createReady(fx, "gens");
    await fx.t.api("POST", "/v1/sandboxes/gens/stop");
    await waitPhase(fx, "gens", "Stopped");
    const staleBefore = (await monitorMetrics(fx)).classifications.stale_dropped;
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
    await eventually(async () => ((await monitorMetrics(fx)).classifications.stale_dropped > staleBefore ? true : undefined), 10_000, "stale event counted");
    await new Promise((r) => setTimeout(r, 500));
    const now = (await fx.t.api("GET", "/v1/sandboxes/gens")).body;
    expect(now.phase).toBe("Ready");
    expect(now.runtime).toEqual(g2.runtime);
    await fx.engine.removeContainer(ghost.body.Id, { force: true });
  }, 60_000);
});

describe("prolonged unavailability", () => {
  it("daemon down past the deadline: Error(RuntimeUnavailable); workload stopped when it returns; another gateway's sandbox untouched", async () => {
    const other = await startSecondGateway(fx, { recoveryDeadlineMs: 60_000 });
    try {
      const mine = await createReady(fx, "longdown");
      const r = await other.t.api("POST", "/v1/sandboxes", { name: "theirs" });
      expect(r.status).toBe(201);
      await eventually(async () => ((await other.t.api("GET", "/v1/sandboxes/theirs")).body.phase === "Ready" ? true : undefined), 30_000, "theirs Ready");
      const theirs = (await other.t.api("GET", "/v1/sandboxes/theirs")).body;

      await fx.dockerd.stop("SIGTERM");
      const failed = await waitPhase(fx, "longdown", "Error", 20_000);
      expect(failed.reason.code).toBe("RuntimeUnavailable");
      // Still there while Docker is down: it cannot be stopped yet.
      await fx.dockerd.startAgain();
      await eventually(async () => {
        const i = await fx.engine.inspectContainer(mine.runtime.workload.id);
        return i.kind === "docker" && i.status === 404 ? true : undefined;
      }, 20_000, "workload removed after the daemon returned");
      await eventually(async () => ((await fx.t.api("GET", "/v1/sandboxes/longdown")).body.runtime === null ? true : undefined), 5_000, "runtime cleared");

      await eventually(async () => ((await other.t.api("GET", "/v1/sandboxes/theirs")).body.phase === "Ready" ? true : undefined), 30_000, "theirs back to Ready");
      const theirsAfter = (await other.t.api("GET", "/v1/sandboxes/theirs")).body;
      expect(theirsAfter.runtime).toEqual(theirs.runtime);
      const i = await fx.engine.inspectContainer(theirs.runtime.workload.id);
      expect(i.kind === "ok" && i.body.State.Running).toBe(true);
    } finally {
      await other.t.close();
    }
  }, 120_000);

  it("flapping daemon: five restarts within 30 s, no Error, backoff grows and resets, Ready at the end", async () => {
    const s = await createReady(fx, "flap");
    const backoffBefore = (await monitorMetrics(fx)).recentBackoffMs.length;
    const t0 = Date.now();
    for (let i = 0; i < 5; i++) {
      await fx.dockerd.restart({ downMs: 1500 });
      await new Promise((r) => setTimeout(r, 1000));
    }
    expect(Date.now() - t0).toBeLessThan(30_000);
    const after = await waitPhase(fx, "flap", "Ready", 20_000);
    expect(after.runtime).toEqual(s.runtime);
    expect((await phaseLog(fx, "flap")).some((l) => l.includes("Error"))).toBe(false);
    const delays: number[] = (await monitorMetrics(fx)).recentBackoffMs.slice(backoffBefore);
    expect(delays.length).toBeGreaterThanOrEqual(10);
    expect(Math.max(...delays)).toBeGreaterThan(400); // grew during an outage
    expect(delays.filter((d) => d <= 240).length).toBeGreaterThanOrEqual(5); // reset after each reconnect
    expect((await execIn(fx, "flap", ["echo", "ok"])).stdout).toBe("ok\n");
  }, 120_000);
});
