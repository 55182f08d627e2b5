// A workspace cannot fill the host's disk: `sandbox create --disk 64M` gives the
// sandbox a 64 MiB filesystem of its own (a loop-mounted ext4 image) as /sandbox.
// Writing past it fails inside the workload with ENOSPC and the host's free space
// shrinks by no more than the image; the workspace survives stop/start, a gateway
// restart and a host restart (its mount gone); delete removes image, mount and loop
// device. `sandbox get` shows used/limit.

import { execFile } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync, readFileSync, statSync } from "node:fs";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { cli } from "../support/cli-runner.js";
import { startDockerFixture, type DockerFixture } from "../support/docker-fixture.js";
import { eventually } from "../support/gateway-fixture.js";
import { cliExec, getSandbox, waitDeleted, waitPhase } from "../support/sandbox-helpers.js";

const run = promisify(execFile);
const MIB = 1024 * 1024;

let fx: DockerFixture;

beforeAll(async () => {
  fx = await startDockerFixture({ liveRestore: true, name: "disk" });
});

afterAll(async () => {
  await fx?.close();
});

/** Bytes the container's own writable layer holds (Docker's SizeRw): where writes beyond the workspace would land. */
async function writableLayerBytes(containerId: string): Promise<number> {
  const r = await fx.engine.request("GET", `/containers/${containerId}/json`, { query: { size: "1" } });
  if (r.kind !== "ok") throw new Error(`inspect ${containerId}: ${r.kind}`);
  return (r.body as { SizeRw?: number }).SizeRw ?? 0;
}

/** Loop devices backed by this file (losetup -j). */
async function loopsOf(file: string): Promise<string> {
  return (await run("losetup", ["-j", file], { encoding: "utf8" })).stdout.trim();
}

/** The kernel releases an autoclear loop device after the unmount returns, not with it. */
async function loopReleased(file: string): Promise<void> {
  await eventually(async () => ((await loopsOf(file)) === "" ? true : undefined), 30_000, `the loop device of ${file} released`);
}

describe("workspace disk limit", () => {
  it("refuses a malformed or out-of-range --disk in one line, before anything is created", async () => {
    const FORM = "expected a size such as 512M, 10G or 1GiB (binary units K, M, G, T), from 16 MiB to 16 TiB";
    const RANGE = "expected from 16 MiB to 16 TiB";
    for (const [size, expected] of [
      ["64X", FORM],
      ["1M", RANGE],
      ["-5G", FORM],
      ["17T", RANGE],
    ]) {
      const r = await cli(["sandbox", "create", "bad", "--disk", size!], fx.cliEnv);
      expect(r.code).toBe(2);
      // One line names the value and the allowed range (the CLI adds its usual help hint).
      const line = r.stderr.split("\n").find((l) => l.includes("invalid disk size"));
      expect(line).toContain(`invalid disk size ${JSON.stringify(size)}: ${expected}`);
    }
    // The API checks it too (a number of bytes, or a size string).
    for (const disk of [1, 1.5, "lots", 17 * 1024 ** 4]) {
      const r = await fx.t.api("POST", "/v1/sandboxes", { name: "bad", disk });
      expect(r.status).toBe(400);
      expect(r.body.error.message).toMatch(/^disk: invalid disk size /);
    }
    expect((await getSandbox(fx, "bad")).status).toBe(404);
  });

  it("defaults to 10 GiB", async () => {
    const r = await fx.t.api("POST", "/v1/sandboxes", { name: "dflt" });
    expect(r.status).toBe(201);
    expect(r.body.spec.diskBytes).toBe(10 * 1024 * MIB);
    const s = await waitPhase(fx, "dflt", "Ready");
    // Sparse: 10 GiB of capacity costs the host only what is written.
    expect(statSync(fx.driver.workspaces.imagePath(s.id)).blocks * 512).toBeLessThan(512 * MIB);
    expect((await fx.t.api("DELETE", "/v1/sandboxes/dflt")).status).toBe(202);
    await waitDeleted(fx, "dflt");
  });

  it("enforces --disk 64M with ENOSPC inside the workload; nothing lands beyond the image", async () => {
    const created = await cli(["sandbox", "create", "small", "--disk", "64M", "--timeout", "120"], fx.cliEnv);
    expect(created.code, created.stderr).toBe(0);
    const s = await waitPhase(fx, "small", "Ready");
    const image = fx.driver.workspaces.imagePath(s.id);
    const marker = `kept-${randomBytes(6).toString("hex")}`;
    expect((await cliExec(fx, "small", ["sh", "-c", `echo ${marker} > /sandbox/marker`])).code).toBe(0);

    const workloadId = s.runtime!.workload.id;
    const layerBefore = await writableLayerBytes(workloadId);
    const dd = await cliExec(fx, "small", ["sh", "-c", "dd if=/dev/zero of=/sandbox/fill bs=1M count=400 2>&1; echo rc=$?; echo size=$(wc -c < /sandbox/fill)"]);
    expect(dd.stdout).toContain("No space left on device");
    expect(dd.stdout).toMatch(/rc=[1-9]/);
    const filled = Number(/size=(\d+)/.exec(dd.stdout)?.[1]);
    expect(filled).toBeGreaterThan(40 * MIB);
    expect(filled).toBeLessThanOrEqual(64 * MIB);
    // What did not fit went nowhere: not into the container's writable layer, and the image
    // file holds at most its size. (Not the host's free space: other work on a shared
    // machine moves it by hundreds of MiB.)
    expect((await writableLayerBytes(workloadId)) - layerBefore).toBeLessThan(MIB);
    expect(statSync(image).size).toBe(64 * MIB);
    expect(statSync(image).blocks * 512).toBeLessThanOrEqual(64 * MIB);

    // sandbox get: used of limit.
    const got = await cli(["sandbox", "get", "small"], fx.cliEnv);
    expect(got.stdout).toMatch(/^disk\s+\d+(\.\d)? MiB used of 64 MiB$/m);
    const view = (await getSandbox(fx, "small")).body as unknown as { disk: { limitBytes: number; usedBytes: number; capacityBytes: number } };
    expect(view.disk.limitBytes).toBe(64 * MIB);
    expect(view.disk.usedBytes).toBeGreaterThan(40 * MIB);
    expect(view.disk.usedBytes).toBeLessThanOrEqual(view.disk.capacityBytes);
    expect(view.disk.capacityBytes).toBeLessThanOrEqual(64 * MIB);
    // Space is given back when the file is removed.
    expect((await cliExec(fx, "small", ["rm", "/sandbox/fill"])).code).toBe(0);
    expect(((await getSandbox(fx, "small")).body as unknown as { disk: { usedBytes: number } }).disk.usedBytes).toBeLessThan(16 * MIB);
  });

  it("keeps the workspace across stop/start, a gateway restart and a host restart (mount gone), and removes it all on delete", async () => {
    const s = await waitPhase(fx, "small", "Ready");
    const ws = fx.driver.workspaces;
    const image = ws.imagePath(s.id);
    const marker = (await cliExec(fx, "small", ["cat", "/sandbox/marker"])).stdout;
    expect(marker).toMatch(/^kept-/);

    expect((await fx.t.api("POST", "/v1/sandboxes/small/stop")).status).toBe(202);
    await waitPhase(fx, "small", "Stopped");
    expect(existsSync(image)).toBe(true);
    expect((await fx.t.api("POST", "/v1/sandboxes/small/start")).status).toBe(202);
    await waitPhase(fx, "small", "Ready", { generation: 2 });
    expect((await cliExec(fx, "small", ["cat", "/sandbox/marker"])).stdout).toBe(marker);

    // The gateway restarts: the mount stays, the sandbox is adopted with its workspace.
    await fx.restartGateway();
    await waitPhase(fx, "small", "Ready", { generation: 2 });
    expect(fx.driver.workspaces.isMounted(s.id)).toBe(true);
    expect((await cliExec(fx, "small", ["cat", "/sandbox/marker"])).stdout).toBe(marker);

    // A host restart: containers and mounts are gone, the image stays. Start mounts it again.
    expect((await fx.t.api("POST", "/v1/sandboxes/small/stop")).status).toBe(202);
    await waitPhase(fx, "small", "Stopped");
    await run("umount", [ws.mountPath(s.id)]);
    expect(ws.isMounted(s.id)).toBe(false);
    await loopReleased(image);
    const unmounted = (await getSandbox(fx, "small")).body as unknown as { disk: { limitBytes: number; usedBytes: number | null } };
    expect(unmounted.disk).toEqual({ limitBytes: 64 * MIB, usedBytes: null, capacityBytes: null });
    expect((await fx.t.api("POST", "/v1/sandboxes/small/start")).status).toBe(202);
    await waitPhase(fx, "small", "Ready", { generation: 3 });
    expect(ws.isMounted(s.id)).toBe(true);
    expect((await cliExec(fx, "small", ["cat", "/sandbox/marker"])).stdout).toBe(marker);
    // Still limited after the remount.
    const dd = await cliExec(fx, "small", ["sh", "-c", "dd if=/dev/zero of=/sandbox/fill bs=1M count=100 2>&1; rm -f /sandbox/fill"]);
    expect(dd.stdout).toContain("No space left on device");

    // Delete: image, mount point, mount and loop device are gone.
    expect(await loopsOf(image)).toMatch(/^\/dev\/loop\d+:/);
    expect((await fx.t.api("DELETE", "/v1/sandboxes/small")).status).toBe(202);
    await waitDeleted(fx, "small");
    expect(existsSync(image)).toBe(false);
    expect(existsSync(ws.mountPath(s.id))).toBe(false);
    expect(ws.isMounted(s.id)).toBe(false);
    expect(readFileSync("/proc/self/mountinfo", "utf8")).not.toContain(s.id);
    await loopReleased(image);
  }, 180_000);

  /**
   * With `root` immutable, a create fails only its own launch: Error(ProvisioningFailed) whose
   * detail has `named`, the gateway still serving; `check` looks at what was left. Deleted after.
   */
  async function failsOnlyItsLaunch(root: string, name: string, named: string, check: (id: string) => Promise<void>): Promise<void> {
    await run("mkdir", ["-p", root]);
    await run("chattr", ["+i", root]);
    try {
      expect((await fx.t.api("POST", "/v1/sandboxes", { name, disk: "32M" })).status).toBe(201);
      const s = await waitPhase(fx, name, "Error");
      expect(s.reason).toMatchObject({ code: "ProvisioningFailed" });
      expect(JSON.stringify(s.reason)).toContain(named);
      expect((await fx.t.api("GET", "/v1/status")).status).toBe(200);
      await check(s.id);
    } finally {
      await run("chattr", ["-i", root]);
    }
    expect((await fx.t.api("DELETE", `/v1/sandboxes/${name}`)).status).toBe(202);
    await waitDeleted(fx, name);
  }

  it("a workspace that cannot be made fails only its launch: Error naming it, the gateway still serving, nothing mounted", async () => {
    // The workspace is made while the supervisor comes up; its failure arrives while
    // Docker calls are pending and must end this launch, never the gateway process.
    await failsOnlyItsLaunch(fx.driver.workspaces.root, "nodisk", "workspace:", async (id) => {
      expect(fx.driver.workspaces.isMounted(id)).toBe(false);
    });
  });

  it("a sandbox CA that cannot be made fails only its launch the same way: Error naming it, no container left", async () => {
    // The CA is made while the sandbox's network is; its failure must end this launch only.
    await failsOnlyItsLaunch(fx.driver.cas.root, "noca", "sandbox CA:", async (id) => {
      const left = await fx.engine.listContainers({ all: true, filters: { label: [`sandgate.sandbox=${id}`] } });
      expect(left.kind === "ok" ? left.body : null).toEqual([]);
    });
  });

  it("a workspace that is not mounted is never replaced by the host's disk", async () => {
    // The bind source lives inside the filesystem: with the mount gone it does not exist.
    const r = await fx.t.api("POST", "/v1/sandboxes", { name: "guard", disk: "32M" });
    expect(r.status).toBe(201);
    const s = await waitPhase(fx, "guard", "Ready");
    const ws = fx.driver.workspaces;
    expect(existsSync(ws.dataPath(s.id))).toBe(true);
    expect((await fx.t.api("POST", "/v1/sandboxes/guard/stop")).status).toBe(202);
    await waitPhase(fx, "guard", "Stopped");
    await run("umount", [ws.mountPath(s.id)]);
    expect(existsSync(ws.dataPath(s.id))).toBe(false);
    expect((await fx.t.api("DELETE", "/v1/sandboxes/guard")).status).toBe(202);
    await waitDeleted(fx, "guard");
    expect(existsSync(ws.imagePath(s.id))).toBe(false);
  });
});
