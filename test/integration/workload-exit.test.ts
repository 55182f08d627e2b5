// A workload whose command ends before the sandbox is ever Ready: on a real daemon, the
// sandbox ends as soon as the exit is seen — Completed for exit 0, Error(WorkloadExited)
// with the code otherwise — with the last lines of its output in the event, and its
// containers are removed. Never ProvisioningFailed after the readiness timeout.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { deleteAllAndCheckMonitors, startDockerFixture, type DockerFixture } from "../support/docker-fixture.js";
import { eventually } from "../support/gateway-fixture.js";
import { phaseLog, waitPhase } from "../support/recovery-helpers.js";

let fx: DockerFixture;

beforeAll(async () => {
  // A readiness timeout far beyond any wait below: an early end can only come from the exit.
  fx = await startDockerFixture({ liveRestore: true, name: "wexit", service: { readyTimeoutMs: 600_000 } });
});
afterAll(async () => {
  if (fx) await deleteAllAndCheckMonitors(fx);
  await fx?.close();
});

async function eventsOf(name: string): Promise<{ message: string | null; newPhase: string | null }[]> {
  return (await fx.t.api("GET", `/v1/sandboxes/${name}/events`)).body.events;
}

async function noContainersOf(name: string): Promise<void> {
  const id = (await fx.t.api("GET", `/v1/sandboxes/${name}`)).body.id as string;
  await eventually(async () => {
    const r = await fx.engine.listContainers({ all: true, filters: { label: [`sandgate.sandbox=${id}`] } });
    return r.kind === "ok" && r.body.length === 0 ? true : undefined;
  }, 30_000, `${name}: containers removed`);
}

describe("a workload that exits during start-up", () => {
  it("exit 3: Error(WorkloadExited, 3) straight from Provisioning, with its last output lines; containers removed", async () => {
    const r = await fx.t.api("POST", "/v1/sandboxes", { name: "wx-fail", command: ["sh", "-c", "echo first line; echo 'to stderr' >&2; exit 3"] });
    expect(r.status, JSON.stringify(r.body)).toBe(201);
    const s = await waitPhase(fx, "wx-fail", "Error", 120_000);
    expect(s.reason).toMatchObject({ code: "WorkloadExited", exitCode: 3 });
    expect(await phaseLog(fx, "wx-fail")).toEqual(["-→Provisioning", "Provisioning→Error(WorkloadExited)"]);
    const msg = (await eventsOf("wx-fail")).find((e) => e.newPhase === "Error")?.message ?? "";
    expect(msg).toContain("first line");
    expect(msg).toContain("to stderr");
    await noContainersOf("wx-fail");
  });

  it("exit 0: Completed straight from Provisioning", async () => {
    const r = await fx.t.api("POST", "/v1/sandboxes", { name: "wx-done", command: ["sh", "-c", "echo all done"] });
    expect(r.status, JSON.stringify(r.body)).toBe(201);
    await waitPhase(fx, "wx-done", "Completed", 120_000);
    expect(await phaseLog(fx, "wx-done")).toEqual(["-→Provisioning", "Provisioning→Completed"]);
    expect((await eventsOf("wx-done")).find((e) => e.newPhase === "Completed")?.message).toContain("all done");
    await noContainersOf("wx-done");
  });
});
