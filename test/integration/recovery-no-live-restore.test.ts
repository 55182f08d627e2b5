// Without live-restore, a daemon restart really kills the containers: that
// exit must be honoured (fail closed) and the sandbox must come back with start.

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LABEL } from "../../src/driver/docker/objects.js";
import { deleteAllAndCheckMonitors, startDockerFixture, type DockerFixture } from "../support/docker-fixture.js";
import { eventually } from "../support/gateway-fixture.js";
import { createReady, execIn, monitorMetrics, phaseLog, waitPhase } from "../support/recovery-helpers.js";

let fx: DockerFixture;

beforeAll(async () => {
  fx = await startDockerFixture({ liveRestore: false, name: "rnl" });
});
afterAll(async () => {
  if (fx) await deleteAllAndCheckMonitors(fx);
  await fx?.close();
});

describe("live-restore off", () => {
  it("daemon restart: Error(SupervisorExited) with the exit code, workload stopped; start → Ready in generation 2, workspace intact", async () => {
    const s = await createReady(fx, "nolr");
    const exitedBefore: number = (await monitorMetrics(fx)).classifications.exited;
    expect((await execIn(fx, "nolr", ["sh", "-c", "echo survives > /sandbox/note.txt"])).code).toBe(0);

    await fx.dockerd.restart({ downMs: 500 });
    const failed = await waitPhase(fx, "nolr", "Error", 60_000);
    expect(failed.reason.code).toBe("SupervisorExited");
    // dockerd stops containers on shutdown: the supervisor exits 0 on SIGTERM
    // (graceful), 137 if it had to be killed. Either way the code is recorded.
    expect([0, 137, 143]).toContain(failed.reason.exitCode);
    expect(failed.reasonText).toMatch(/^SupervisorExited \(exit code \d+\)/);
    // Never resurrected: the gateway removed the dead generation's containers.
    await eventually(async () => {
      const r = await fx.engine.listContainers({ all: true, filters: { label: [`${LABEL.sandbox}=${s.id}`] } });
      return r.kind === "ok" && r.body.length === 0 ? true : undefined;
    }, 30_000, "generation 1 containers removed");
    expect((await monitorMetrics(fx)).classifications.exited).toBeGreaterThan(exitedBefore);

    expect((await fx.t.api("POST", "/v1/sandboxes/nolr/start")).status).toBe(202);
    const again = await waitPhase(fx, "nolr", "Ready", 60_000);
    expect(again).toMatchObject({ id: s.id, name: "nolr", generation: 2 });
    expect(again.runtime.workload.id).not.toBe(s.runtime.workload.id);
    expect((await execIn(fx, "nolr", ["cat", "/sandbox/note.txt"])).stdout).toBe("survives\n");
    const log = await phaseLog(fx, "nolr");
    expect(log).toContain("Error→Provisioning");
    expect(log.at(-1)).toBe("Provisioning→Ready");
  }, 120_000);

  it("an Error sandbox is cleaned with stop: Stopped, nothing running, no store edits", async () => {
    const s = await createReady(fx, "nolr-stop");
    await fx.dockerd.restart({ downMs: 300 });
    await waitPhase(fx, "nolr-stop", "Error", 60_000);
    expect((await fx.t.api("POST", "/v1/sandboxes/nolr-stop/stop")).status).toBe(202);
    await waitPhase(fx, "nolr-stop", "Stopped", 60_000);
    const left = await fx.engine.listContainers({ all: true, filters: { label: [`${LABEL.sandbox}=${s.id}`] } });
    expect(left.kind === "ok" && left.body).toEqual([]);
    expect((await phaseLog(fx, "nolr-stop")).slice(-2)).toEqual(["Error→Stopping", "Stopping→Stopped"]);
  }, 120_000);
});
