// The Docker driver's lifecycle against a real private dockerd, through the real
// gateway API and CLI: create → Ready → stop (containers gone, workspace kept) →
// start (generation 2, new containers, same workspace) → delete (nothing left),
// the hardening of every container as Docker reports it, and a launch that fails.

import { randomBytes } from "node:crypto";
import { existsSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { checkInstance, expectedInstance, identityOf } from "../../src/driver/docker/identity.js";
import { LABEL, SUPERVISOR_RESOURCES, egressNetworkName, networkName } from "../../src/driver/docker/objects.js";
import { DEFAULT_IDS } from "../../src/driver/docker/rootfs.js";
import { cli } from "../support/cli-runner.js";
import { startDockerFixture, type DockerFixture } from "../support/docker-fixture.js";
import { cliExec, docker, engineGet, getSandbox, waitDeleted, waitPhase, type SandboxJson } from "../support/sandbox-helpers.js";

let fx: DockerFixture;

beforeAll(async () => {
  fx = await startDockerFixture({ liveRestore: true, name: "lifecycle" });
});

afterAll(async () => {
  await fx.close();
});

/** Everything on the daemon that carries the sandbox's label. */
async function objectsOf(sandboxId: string): Promise<{ containers: string[]; networks: string[]; volumes: string[] }> {
  const filters = { label: [`${LABEL.sandbox}=${sandboxId}`] };
  const c = await fx.engine.listContainers({ all: true, filters });
  const n = await fx.engine.listNetworks({ filters });
  const v = await fx.engine.listVolumes({ filters });
  if (c.kind !== "ok" || n.kind !== "ok" || v.kind !== "ok") throw new Error("listing objects failed");
  return {
    containers: c.body.map((x) => x.Id),
    networks: n.body.map((x) => x.Name),
    volumes: (v.body.Volumes ?? []).map((x) => x.Name),
  };
}

describe("sandbox lifecycle on Docker", () => {
  /** A sandbox of this test's own, Ready in generation 1. */
  async function createLife(name: string): Promise<SandboxJson> {
    const created = await fx.t.api("POST", "/v1/sandboxes", { name, resources: { memoryMb: 256, cpus: 0.5, pids: 128 } });
    expect(created.status).toBe(201);
    expect(created.body.phase).toBe("Provisioning");
    return waitPhase(fx, name, "Ready", { generation: 1 });
  }

  it("creates a sandbox that becomes Ready with the recorded runtime identity", async () => {
    const first = await createLife("life");
    const rt = first.runtime!;
    expect(rt.generation).toBe(1);
    for (const role of ["workload", "supervisor"] as const) {
      const c = await engineGet(fx, `/containers/${rt[role].id}/json`);
      // The driver's one definition of "same instance" agrees: the recorded instance, running.
      expect(checkInstance(c, expectedInstance(fx.driver.gatewayId, { sandboxId: first.id, generation: 1, record: rt as never }, role))).toEqual({ kind: "running" });
      expect(identityOf(c)).toEqual(rt[role]);
      expect(c.Id).toBe(rt[role].id);
      expect(c.State.Running).toBe(true);
      expect(c.State.StartedAt).toBe(rt[role].startedAt);
      expect(c.Image).toBe(rt[role].imageId);
      expect(c.Config.Labels[LABEL.sandbox]).toBe(first.id);
      expect(c.Config.Labels[LABEL.generation]).toBe("1");
      expect(c.Config.Labels[LABEL.role]).toBe(role);
    }
  });

  it("hardens the workload and supervisor containers as specified", async () => {
    const name = "life-hard";
    const first = await createLife(name);
    const rt = first.runtime!;
    const w = await engineGet(fx, `/containers/${rt.workload.id}/json`);
    const s = await engineGet(fx, `/containers/${rt.supervisor.id}/json`);

    for (const c of [w, s]) {
      expect(c.HostConfig.RestartPolicy.Name).toBe("no");
      // Pinned by image ID, not by a tag that could be moved.
      expect(c.Config.Image).toMatch(/^sha256:[0-9a-f]{64}$/);
      expect(c.Config.Image).toBe(c.Image);
      expect(c.HostConfig.CapDrop).toEqual(["ALL"]);
      expect(c.HostConfig.SecurityOpt).toContain("no-new-privileges:true");
      expect(c.HostConfig.ReadonlyRootfs).toBe(true);
      expect(c.HostConfig.Privileged).toBe(false);
    }

    const uid = DEFAULT_IDS.workload;
    expect(w.Config.User).toBe(`${uid}:${uid}`);
    expect(s.Config.User).toBe(`${DEFAULT_IDS.supervisor}:${DEFAULT_IDS.supervisor}`);
    expect(Object.keys(w.HostConfig.Tmpfs)).toEqual(["/tmp"]);
    expect(w.HostConfig.Memory).toBe(256 * 1024 * 1024);
    expect(w.HostConfig.NanoCpus).toBe(500_000_000);
    expect(w.HostConfig.PidsLimit).toBe(128);
    // The supervisor's limits: the defaults (gateway start --supervisor-cpus/--supervisor-memory).
    expect(s.HostConfig.NanoCpus).toBe(Math.round(SUPERVISOR_RESOURCES.cpus * 1e9));
    expect(s.HostConfig.Memory).toBe(SUPERVISOR_RESOURCES.memoryMb * 1024 * 1024);
    expect(w.HostConfig.Binds ?? []).toEqual([]);
    const mounts = w.Mounts.map((m: { Type: string; Destination: string; Source: string; RW: boolean }) => [m.Type, m.Destination, m.RW]);
    expect(mounts.sort()).toEqual([
      ["bind", "/etc/resolv.conf", false],
      // The sandbox CA's public certificate and bundle, read-only (docs/policy.md).
      ["bind", "/etc/sandgate", false],
      ["bind", "/sandbox", true],
    ]);
    // The workspace is the size-limited filesystem of this sandbox, not a Docker volume.
    expect(w.Mounts.find((m: { Destination: string }) => m.Destination === "/sandbox").Source).toBe(fx.driver.workspaces.dataPath(first.id));
    // The workload sits on its internal network only; the supervisor bridges to egress.
    expect(Object.keys(w.NetworkSettings.Networks)).toEqual([networkName(first.id)]);
    expect(Object.keys(s.NetworkSettings.Networks).sort()).toEqual([egressNetworkName(fx.driver.gatewayId), networkName(first.id)].sort());

    // The same values seen from inside: the process runs as the workload id with / read-only.
    const id = await cliExec(fx, name, ["sh", "-c", "id -u; id -g; touch /probe 2>/dev/null && echo writable || echo readonly; touch /tmp/x && echo tmp-ok"]);
    expect(id).toMatchObject({ code: 0, stdout: `${uid}\n${uid}\nreadonly\ntmp-ok\n` });

    const net = await engineGet(fx, `/networks/${networkName(first.id)}`);
    expect(net.Internal).toBe(true);
    expect(net.Options["com.docker.network.bridge.inhibit_ipv4"]).toBe("true");
    expect(net.Labels[LABEL.sandbox]).toBe(first.id);
  });

  it("stops (containers removed, volume kept), starts again as generation 2 with the workspace intact, then deletes everything", async () => {
    const name = "life-cycle";
    const first = await createLife(name);
    const note = `note-${randomBytes(6).toString("hex")}`;
    const write = await cliExec(fx, name, ["sh", "-c", `echo ${note} > /sandbox/note.txt && cat /sandbox/note.txt`]);
    expect(write).toMatchObject({ code: 0, stdout: `${note}\n` });

    // Stop.
    expect((await fx.t.api("POST", `/v1/sandboxes/${name}/stop`)).status).toBe(202);
    const stopped = await waitPhase(fx, name, "Stopped");
    expect(stopped.generation).toBe(1);
    expect(stopped.runtime).toBeNull();
    const afterStop = await objectsOf(first.id);
    expect(afterStop.containers).toEqual([]);
    expect(afterStop.volumes).toEqual([]);
    expect(existsSync(fx.driver.workspaces.imagePath(first.id))).toBe(true);
    expect(afterStop.networks).toEqual([networkName(first.id)]);
    for (const role of ["workload", "supervisor"] as const) {
      const r = await fx.engine.inspectContainer(first.runtime![role].id);
      expect(r.kind === "docker" && r.status).toBe(404);
    }

    // Start: a new generation with new containers on the old workspace.
    expect((await fx.t.api("POST", `/v1/sandboxes/${name}/start`)).status).toBe(202);
    const second = await waitPhase(fx, name, "Ready", { generation: 2 });
    expect(second.id).toBe(first.id);
    const rt2 = second.runtime!;
    expect(rt2.generation).toBe(2);
    expect(rt2.workload.id).not.toBe(first.runtime!.workload.id);
    expect(rt2.supervisor.id).not.toBe(first.runtime!.supervisor.id);
    const w2 = await engineGet(fx, `/containers/${rt2.workload.id}/json`);
    expect(w2.State.StartedAt).toBe(rt2.workload.startedAt);
    expect(w2.Config.Labels[LABEL.generation]).toBe("2");
    expect((await objectsOf(first.id)).containers.sort()).toEqual([rt2.workload.id, rt2.supervisor.id].sort());

    const read = await cliExec(fx, name, ["cat", "/sandbox/note.txt"]);
    expect(read).toMatchObject({ code: 0, stdout: `${note}\n`, stderr: "" });

    // Delete: nothing labelled with the sandbox remains.
    expect((await fx.t.api("DELETE", `/v1/sandboxes/${name}`)).status).toBe(202);
    await waitDeleted(fx, name);
    expect(await objectsOf(first.id)).toEqual({ containers: [], networks: [], volumes: [] });
    expect(existsSync(fx.driver.workspaces.imagePath(first.id))).toBe(false);
    expect(fx.driver.workspaces.isMounted(first.id)).toBe(false);
    expect((await getSandbox(fx, name)).status).toBe(404);
  });
});

describe("many creates at once", () => {
  it("30 creates at once all reach Ready (launches wait their turn, a busy daemon's slow answers are waited for); deleted together, nothing is left", async () => {
    const names = Array.from({ length: 30 }, (_, i) => `many-${i}`);
    const created = await Promise.all(names.map((name) => fx.t.api("POST", "/v1/sandboxes", { name })));
    expect(created.map((r) => r.status)).toEqual(names.map(() => 201));
    const ready = await Promise.all(names.map((name) => waitPhase(fx, name, "Ready", { ms: 600_000 })));
    expect(ready.map((s) => s.reason)).toEqual(names.map(() => null));
    const deleted = await Promise.all(names.map((name) => fx.t.api("DELETE", `/v1/sandboxes/${name}`)));
    expect(deleted.map((r) => r.status)).toEqual(names.map(() => 202));
    await Promise.all(names.map((name) => waitDeleted(fx, name, 600_000)));
    for (const s of ready) expect(await objectsOf(s.id)).toEqual({ containers: [], networks: [], volumes: [] });
  }, 900_000);
});

describe("what the daemon can tell is refused at create, as docker run refuses it", () => {
  /** A refused create: 400 naming the value, exit 2 from the CLI in one line, and nothing kept (the name is free). */
  async function refused(name: string, body: Record<string, unknown>, args: string[], message: RegExp): Promise<void> {
    const api = await fx.t.api("POST", "/v1/sandboxes", { name, ...body });
    expect(api.status).toBe(400);
    expect(api.body.error).toMatchObject({ code: "invalid_request" });
    expect(api.body.error.message).toMatch(message);
    const r = await cli(["sandbox", "create", name, ...args], fx.cliEnv);
    expect(r.code, r.stderr).toBe(2);
    expect(r.stderr.trim().split("\n")).toEqual([expect.stringMatching(message)]);
    expect(r.stdout).toBe("");
    expect((await getSandbox(fx, name)).status).toBe(404);
  }

  it("an image the daemon does not have", async () => {
    await refused("noimage", { image: "sandgate-does-not-exist:1" }, ["--image", "sandgate-does-not-exist:1"], /image: no such image "sandgate-does-not-exist:1" on the Docker daemon/);
  });

  it("more CPUs than the daemon's host has", async () => {
    const ncpu = JSON.parse((await docker(fx, "info", "--format", "{{json .NCPU}}")).stdout) as number;
    await refused("toomanycpus", { resources: { cpus: ncpu + 1 } }, ["--cpus", String(ncpu + 1)], new RegExp(`cpus: ${ncpu + 1} is more than the Docker host has: from 0\\.01 to ${ncpu}`));
  });

  it("a workspace larger than the filesystem it is kept on", async () => {
    expect(fx.driver.workspaces.filesystemBytes()).toBeLessThan(16 * 1024 ** 4);
    await refused("hugedisk", { disk: "16T" }, ["--disk", "16T"], /disk: 16 TiB is more than the filesystem of the workspaces \(.*\) can hold/);
  });
});

describe("a launch that cannot succeed", () => {
  it("an image removed after create: the start ends in Error ProvisioningFailed naming it, no container left; the CLI says so in one line, exit 1", async () => {
    const tag = `sandgate-gone-${randomBytes(3).toString("hex")}:1`;
    expect((await docker(fx, "tag", fx.driver.imageRefs!.workload.ref, tag)).code).toBe(0);
    expect((await fx.t.api("POST", "/v1/sandboxes", { name: "imagegone", image: tag, command: ["sleep", "86400"] })).status).toBe(201);
    await waitPhase(fx, "imagegone", "Ready");
    expect((await fx.t.api("POST", "/v1/sandboxes/imagegone/stop")).status).toBe(202);
    await waitPhase(fx, "imagegone", "Stopped");
    expect((await docker(fx, "rmi", tag)).code).toBe(0);
    const r = await cli(["sandbox", "start", "imagegone"], fx.cliEnv);
    expect(r.code).toBe(1);
    const errorLines = r.stderr.split("\n").filter((l) => l.startsWith("sandgate:"));
    expect(errorLines).toEqual([expect.stringMatching(new RegExp(`^sandgate: sandbox "imagegone" is Error: ProvisioningFailed: No such image: ${tag}\\b`))]);
    expect(r.stderr).not.toMatch(/^\s+at /m);
    const s = await waitPhase(fx, "imagegone", "Error");
    expect(s.reason?.code).toBe("ProvisioningFailed");
    expect(s.runtime).toBeNull();
    expect((await objectsOf(s.id)).containers).toEqual([]);
  });
});

