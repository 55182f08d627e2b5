// The private-dockerd harness against a real daemon: live-restore keeps containers
// across a restart, without it they die, a frozen daemon stops answering, and
// destroy() leaves no process, mount or dir behind.
import { execFile } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, symlinkSync, copyFileSync } from "node:fs";
import { createConnection } from "node:net";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PrivateDockerd } from "../support/dockerd.js";

const run = promisify(execFile);
const DOCKER_CLI = ["/usr/local/bin/docker", "/usr/bin/docker"].find((p) => existsSync(p)) ?? "docker";
const BUSYBOX = ["/bin/busybox", "/usr/bin/busybox"].find((p) => existsSync(p)) ?? "/bin/busybox";

async function docker(d: PrivateDockerd, ...args: string[]): Promise<string> {
  const { stdout } = await run(DOCKER_CLI, ["-H", d.dockerHost, ...args], { timeout: 60_000 });
  return stdout.trim();
}

async function inspectState(d: PrivateDockerd, id: string): Promise<{ Status: string; StartedAt: string; ExitCode: number; Pid: number }> {
  return JSON.parse(await docker(d, "inspect", "-f", "{{json .State}}", id)) as { Status: string; StartedAt: string; ExitCode: number; Pid: number };
}

/** A busybox-only image, built by `docker import` from a rootfs tar. */
async function importBusybox(d: PrivateDockerd, tag: string): Promise<void> {
  const root = mkdtempSync("/tmp/sg-bbroot-");
  try {
    mkdirSync(join(root, "bin"));
    copyFileSync(BUSYBOX, join(root, "bin", "busybox"));
    for (const applet of ["sh", "sleep", "true"]) symlinkSync("busybox", join(root, "bin", applet));
    await run("bash", ["-c", `tar -C "$1" -c . | "$2" -H "$3" import - "$4"`, "_", root, DOCKER_CLI, d.dockerHost, tag]);
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
}

/** Running (not a zombie waiting for PID 1 to reap it). */
function isRunning(pid: number): boolean {
  try {
    return !/^State:\s*Z/m.test(readFileSync(`/proc/${pid}/status`, "utf8"));
  } catch {
    return false;
  }
}

function processesNaming(s: string): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (isRunning(Number(entry)) && readFileSync(`/proc/${entry}/cmdline`, "utf8").includes(s)) pids.push(Number(entry));
    } catch {
      /* gone */
    }
  }
  return pids;
}

// Starting and destroying daemons: on a loaded machine each can take minutes; the deadline only catches a hang.
const DAEMON_WORK = 600_000;

describe("PrivateDockerd (real daemon)", () => {
  let d: PrivateDockerd;

  beforeAll(async () => {
    d = await PrivateDockerd.start({ liveRestore: true, name: "harness" });
    await importBusybox(d, "sg-busybox:test");
  }, DAEMON_WORK);

  afterAll(async () => {
    await d.destroy();
  }, DAEMON_WORK);

  it("listens on a short socket of its own, with its own storage and exec root", async () => {
    expect(d.socketPath.length).toBeLessThan(108);
    expect(d.dockerHost).toBe(`unix://${d.socketPath}`);
    const info = JSON.parse(await docker(d, "info", "--format", "{{json .}}")) as { DockerRootDir: string; Driver: string };
    expect(info.DockerRootDir).toBe(d.dataRoot);
    expect(info.Driver).toBe(d.storageDriver);
    expect(existsSync(join(d.execRoot, "containerd", "containerd.sock"))).toBe(true);
    expect(readFileSync(d.logPath, "utf8")).toContain("API listen on");
  });

  it("keeps a container running across a restart with live-restore on (same StartedAt)", async () => {
    const id = await docker(d, "run", "-d", "sg-busybox:test", "/bin/sleep", "1000");
    const before = await inspectState(d, id);
    expect(before.Status).toBe("running");
    const oldPid = d.pid;
    await d.restart({ signal: "SIGTERM", downMs: 300 });
    expect(d.pid).not.toBe(oldPid);
    const after = await inspectState(d, id);
    expect(after.Status).toBe("running");
    expect(after.StartedAt).toBe(before.StartedAt);
    expect(after.Pid).toBe(before.Pid);

    // A crash (SIGKILL) too.
    await d.restart({ signal: "SIGKILL" });
    const afterCrash = await inspectState(d, id);
    expect(afterCrash.Status).toBe("running");
    expect(afterCrash.StartedAt).toBe(before.StartedAt);
    await docker(d, "rm", "-f", id);
  });

  it("stops containers on a daemon stop when live-restore is off (exit 137/143)", async () => {
    await d.stop();
    await d.startAgain({ liveRestore: false });
    expect(JSON.parse(readFileSync(d.configPath, "utf8"))).toEqual({ "live-restore": false });
    // sleep as PID 1 ignores SIGTERM: --stop-timeout 1 makes the daemon SIGKILL it after 1 s.
    const id = await docker(d, "run", "-d", "--stop-timeout", "1", "sg-busybox:test", "/bin/sleep", "1000");
    const before = await inspectState(d, id);
    expect(before.Status).toBe("running");
    await d.restart();
    const after = await inspectState(d, id);
    expect(after.Status).toBe("exited");
    expect([137, 143]).toContain(after.ExitCode);
    expect(after.StartedAt).toBe(before.StartedAt);
    await docker(d, "rm", "-f", id);
    // Leave the daemon running with live-restore on, as the other tests expect it.
    await d.setLiveRestore(true);
    await d.restart({ signal: "SIGTERM" });
  });

  it("does not answer /_ping while frozen, and answers again after thaw", async () => {
    expect(await d.ping(10_000)).toBe(true);
    await d.freeze();
    // A timeout, not a refused connection: the frozen daemon's socket accepts, and a
    // request sent now is answered only once the daemon runs again.
    const raw = createConnection(d.socketPath);
    raw.on("error", () => undefined);
    let answer = "";
    let answered: Promise<string> | undefined;
    try {
      const accepted = await new Promise<boolean>((resolve) => {
        raw.once("connect", () => resolve(true));
        raw.once("error", () => resolve(false));
      });
      expect(accepted, "the frozen daemon's socket accepts connections").toBe(true);
      answered = new Promise((resolve) => {
        raw.on("data", (c: Buffer) => (answer += c.toString("latin1")));
        raw.once("close", () => resolve(answer));
      });
      raw.write("GET /_ping HTTP/1.0\r\nHost: docker\r\n\r\n");
      expect(await d.ping(500)).toBe(false);
      // Checked after a later request went unanswered too.
      expect(answer, "nothing answered while frozen").toBe("");
    } finally {
      d.thaw();
    }
    expect(await answered).toMatch(/^HTTP\/1\.[01] 200 [\s\S]*\r\n\r\nOK$/);
    raw.destroy();
    expect(await d.ping(10_000)).toBe(true);
  });

  it("refuses a second start while running, and puts the log tail into a start failure", { timeout: DAEMON_WORK }, async () => {
    await expect(d.startAgain()).rejects.toThrow(/still running/);
    const started = PrivateDockerd.start({ liveRestore: false, name: "broken", extraArgs: ["--no-such-flag"] });
    await expect(started).rejects.toThrow(/exited with code [1-9]\d*[\s\S]*dockerd\.log \(tail\)[\s\S]*unknown flag: --no-such-flag/);
  });

  it("two private daemons coexist, and destroy() removes daemon, shims, containers, mounts and dir", { timeout: DAEMON_WORK }, async () => {
    const other = await PrivateDockerd.start({ liveRestore: true, name: "harness" });
    try {
      expect(other.addressPool).not.toBe(d.addressPool);
      expect(other.containerdNamespace).not.toBe(d.containerdNamespace);
      await importBusybox(other, "sg-busybox:test");
      const net = await docker(other, "network", "create", "sg-net");
      expect(net).toMatch(/^[0-9a-f]{64}$/);
      // An internal network without a host address (as every sandbox network is) has a bridge too.
      const internal = await docker(other, "network", "create", "--internal", "-o", "com.docker.network.bridge.inhibit_ipv4=true", "sg-internal");
      const bridges = [`br-${net.slice(0, 12)}`, `br-${internal.slice(0, 12)}`];
      expect(bridges.map((b) => existsSync(`/sys/class/net/${b}`))).toEqual([true, true]);
      const id = await docker(other, "run", "-d", "--network", "sg-net", "sg-busybox:test", "/bin/sleep", "1001");
      const state = await inspectState(other, id);
      expect(state.Status).toBe("running");
      const netInfo = await docker(other, "network", "inspect", "-f", "{{(index .IPAM.Config 0).Subnet}}", "sg-net");
      expect(netInfo.startsWith(other.addressPool.split(".").slice(0, 2).join(".") + ".")).toBe(true);
      // Stop the daemon with live-restore: the shim and the container outlive it.
      await other.stop("SIGTERM");
      expect(processesNaming(other.dir + "/").length).toBeGreaterThan(0); // the shim
      expect(isRunning(state.Pid)).toBe(true);
      await other.destroy();
      await other.destroy(); // idempotent
      expect(processesNaming(other.dir + "/")).toEqual([]);
      expect(isRunning(state.Pid)).toBe(false);
      expect(existsSync(other.dir)).toBe(false);
      expect(readFileSync("/proc/self/mountinfo", "utf8")).not.toContain(other.dir);
      const { stdout: addrs } = await run("ip", ["-o", "-4", "addr", "show"]);
      expect(addrs).not.toContain(` ${other.addressPool.split(".").slice(0, 2).join(".")}.`);
      // Every bridge the daemon made is gone from the host, the address-less one included.
      expect(bridges.map((b) => existsSync(`/sys/class/net/${b}`))).toEqual([false, false]);
      // The first daemon is untouched.
      expect(await d.ping()).toBe(true);
    } finally {
      await other.destroy();
    }
  });
});
