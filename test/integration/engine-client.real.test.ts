// EngineClient against a REAL, throwaway dockerd (live-restore on) that this file starts
// and removes itself: image import, container start, exec with stdin/stdout/stderr and
// exit code, and a wait/events stream cut by SIGTERM to the daemon, which must come back
// as a transport failure, never as an exit. Skipped unless root with dockerd on PATH.
//
// Deliberately self-contained (no shared harness): it only needs to bring up one daemon.
import { spawn, spawnSync } from "node:child_process";
import type { ChildProcess } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, openSync, closeSync, readFileSync, readdirSync, readlinkSync, rmSync, symlinkSync, copyFileSync } from "node:fs";
import { join } from "node:path";
import type { Duplex } from "node:stream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { EngineClient } from "../../src/driver/docker/engine/client.js";
import { describe as describeResult, type EngineResult } from "../../src/driver/docker/engine/result.js";
import type { StreamEnd } from "../../src/driver/docker/engine/transport.js";
import type { DockerEvent } from "../../src/driver/docker/engine/types.js";
import { collectDemuxed } from "../support/demux.js";

function onPath(name: string): string | undefined {
  for (const dir of (process.env.PATH ?? "").split(":").concat(["/usr/sbin", "/usr/bin", "/sbin", "/bin"])) {
    const p = join(dir, name);
    if (dir !== "" && existsSync(p)) return p;
  }
  return undefined;
}

const DOCKERD = onPath("dockerd");
const BUSYBOX = ["/bin/busybox", "/usr/bin/busybox"].find((p) => existsSync(p));
const canRun = process.getuid?.() === 0 && DOCKERD !== undefined && BUSYBOX !== undefined;

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** `p`, or a failure naming `what` if it has not settled after `ms` (a hang, not a slow machine). */
async function settles<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const hang = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`${what}: not settled after ${ms} ms`)), ms)));
  try {
    return await Promise.race([p, hang]);
  } finally {
    clearTimeout(timer);
  }
}

function must<T>(r: EngineResult<T>, what: string): T {
  if (r.kind !== "ok") throw new Error(`${what}: ${describeResult(r)}`);
  return r.body;
}

describe.skipIf(!canRun)("EngineClient against a real dockerd", () => {
  // Short: Unix socket paths are limited to 107 bytes, and containerd nests under exec-root.
  let dir = "";
  let daemon: ChildProcess | undefined;
  let client: EngineClient;
  let containerId = "";

  function startDaemon(): ChildProcess {
    const log = openSync(join(dir, "dockerd.log"), "a");
    const child = spawn(
      DOCKERD!,
      [
        `--data-root=${dir}/data`,
        `--exec-root=${dir}/exec`,
        `--pidfile=${dir}/pid`,
        `-H`,
        `unix://${dir}/sock`,
        "--bridge=none",
        "--iptables=false",
        "--ip-masq=false",
        "--live-restore",
        "--storage-driver=vfs", // works on any backing filesystem; the image is tiny
      ],
      { stdio: ["ignore", log, log] },
    );
    closeSync(log);
    return child;
  }

  async function untilPing(c: EngineClient, ms: number): Promise<void> {
    const deadline = Date.now() + ms;
    for (;;) {
      const r = await c.ping({ timeoutMs: 1000 });
      if (r.kind === "ok") return;
      if (Date.now() > deadline) throw new Error(`dockerd did not answer /_ping: ${describeResult(r)}\n${readLog()}`);
      await sleep(200);
    }
  }

  function readLog(): string {
    try {
      return readFileSync(join(dir, "dockerd.log"), "utf8").split("\n").slice(-30).join("\n");
    } catch {
      return "";
    }
  }

  async function stopDaemon(signal: NodeJS.Signals = "SIGTERM"): Promise<void> {
    const d = daemon;
    daemon = undefined;
    if (!d || d.exitCode !== null || d.signalCode !== null) return;
    const exited = new Promise<void>((r) => d.once("exit", () => r()));
    d.kill(signal);
    await Promise.race([exited, sleep(20_000)]);
    if (d.exitCode === null && d.signalCode === null) {
      d.kill("SIGKILL");
      await exited;
    }
  }

  /** Processes this daemon left (its managed containerd, shims): they all name our dir. */
  function killLeftovers(): void {
    for (const pid of readdirSync("/proc").filter((p) => /^\d+$/.test(p))) {
      try {
        const cmd = readFileSync(`/proc/${pid}/cmdline`, "utf8");
        const cwd = readlinkSync(`/proc/${pid}/cwd`);
        if (dir !== "" && (cmd.includes(`${dir}/`) || cwd.startsWith(`${dir}/`))) process.kill(Number(pid), "SIGKILL");
      } catch {
        // gone already, or not ours to read
      }
    }
  }

  beforeAll(async () => {
    dir = mkdtempSync("/tmp/eng-dd-");
    daemon = startDaemon();
    client = new EngineClient({ socketPath: `${dir}/sock`, timeoutMs: 5000 });
    await untilPing(client, 30_000);
  });

  afterAll(async () => {
    if (containerId !== "" && daemon) await client.removeContainer(containerId, { force: true, volumes: true });
    await client.close();
    await stopDaemon();
    killLeftovers();
    await sleep(200);
    spawnSync("umount", ["-R", "-l", `${dir}/data`], { stdio: "ignore" });
    spawnSync("umount", ["-R", "-l", `${dir}/exec`], { stdio: "ignore" });
    rmSync(dir, { recursive: true, force: true });
  });

  it("negotiates 1.41 with dockerd 20.10", async () => {
    const p = must(await client.ping(), "ping");
    expect(p.apiVersion).toBe("1.41");
  });

  it("imports a busybox image, runs a container, execs with stdin, survives a daemon stop", async () => {
    // Image: a busybox-static rootfs, tarred by tar(1) and streamed into importImage.
    const root = join(dir, "rootfs");
    mkdirSync(join(root, "bin"), { recursive: true });
    copyFileSync(BUSYBOX!, join(root, "bin/busybox"));
    for (const applet of ["sh", "sleep", "cat", "echo"]) symlinkSync("busybox", join(root, "bin", applet));
    const tar = spawn("tar", ["-C", root, "-cf", "-", "."], { stdio: ["ignore", "pipe", "inherit"] });
    const imported = must(await client.importImage(tar.stdout, { repo: "sandgate-engine-test", tag: "1" }), "import");
    expect(imported.imageId).toMatch(/^sha256:[0-9a-f]{64}$/);
    const image = must(await client.inspectImage("sandgate-engine-test:1"), "inspect image");
    expect(image.Id).toBe(imported.imageId);

    // Container.
    const created = must(
      await client.createContainer(`eng-test-${process.pid}`, {
        Image: "sandgate-engine-test:1",
        Cmd: ["/bin/sleep", "1000"],
        Labels: { "sandgate.test": "engine" },
        HostConfig: { NetworkMode: "none" },
      }),
      "create",
    );
    containerId = created.Id;
    must(await client.startContainer(containerId), "start");
    const before = must(await client.inspectContainer(containerId), "inspect");
    expect(before.State.Running).toBe(true);
    const listed = must(await client.listContainers({ filters: { label: ["sandgate.test=engine"] } }), "list");
    expect(listed.map((c) => c.Id)).toEqual([containerId]);

    // Exec: stdin piped in, EOF by half-close, stdout/stderr demultiplexed, exit code 3.
    const exec = must(
      await client.execCreate(containerId, {
        Cmd: ["sh", "-c", "cat; echo err >&2; exit 3"],
        Tty: false,
        AttachStdin: true,
        AttachStdout: true,
        AttachStderr: true,
      }),
      "exec create",
    );
    const sock: Duplex = must(await client.execStart(exec.Id, { tty: false }), "exec start");
    const output = collectDemuxed(sock);
    sock.write("hello from stdin\n");
    sock.end();
    expect(await output).toEqual({ out: "hello from stdin\n", err: "err\n" });
    sock.destroy();
    let inspect = must(await client.execInspect(exec.Id), "exec inspect");
    for (let i = 0; i < 200 && inspect.Running; i++) {
      await sleep(100);
      inspect = must(await client.execInspect(exec.Id), "exec inspect");
    }
    expect(inspect.ExitCode).toBe(3);
    // Docker's own error answers, including a non-101 answer to the exec hijack.
    expect(await client.execStart("no-such-exec", { tty: false })).toMatchObject({ kind: "docker", status: 404 });
    expect(await client.inspectContainer("no-such-container")).toMatchObject({ kind: "docker", status: 404 });

    // Daemon stop while an events stream is open: it ends as a broken channel.
    const events: DockerEvent[] = [];
    let eventsOpen!: () => void;
    const opened = new Promise<void>((r) => (eventsOpen = r));
    const eventsEnd: Promise<StreamEnd> = client.events({ onOpen: () => eventsOpen() }, (e) => events.push(e));
    await settles(opened, 20_000, "events stream open");
    const t0 = Date.now();
    await stopDaemon("SIGTERM");
    const stoppedAt = Date.now();
    // It ends while the daemon is still down (it starts again only below), as a
    // broken channel; it does not hang on a daemon that is gone.
    const e = await settles(eventsEnd, 20_000, "events after the daemon stopped");
    expect(["transport", "eof"]).toContain(e.kind);
    console.log(`daemon stop: events → ${describeResult(e)}; dockerd exited ${stoppedAt - t0} ms after SIGTERM`);

    // With live-restore, the container outlived the daemon: same instance after restart.
    daemon = startDaemon();
    await untilPing(client, 30_000);
    const after = must(await client.inspectContainer(containerId), "inspect after restart");
    expect(after.State.Running).toBe(true);
    expect(after.State.StartedAt).toBe(before.State.StartedAt);
    expect(after.State.Pid).toBe(before.State.Pid);

    must(await client.removeContainer(containerId, { force: true }), "remove");
    containerId = "";
    expect((await client.inspectContainer(created.Id)).kind).toBe("docker");
    must(await client.removeImage("sandgate-engine-test:1", { force: true }), "remove image");
  });
});
