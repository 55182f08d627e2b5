// Local image builds against a real private daemon: both images are imported once,
// a second call imports nothing, a fresh daemon imports from the cached tars, and
// containers from the images run node (and, for the workload, busybox) as non-root
// on a read-only root fs.
import { execFile } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PREBUILT_SUPERVISOR_BUNDLE, resolveSupervisorBundle } from "../../src/driver/docker/supervisor-bundle.js";
import { bundleSupervisor } from "../../scripts/bundle-supervisor.js";
import { EngineClient } from "../../src/driver/docker/engine/client.js";
import { ensureImages, planImage } from "../../src/driver/docker/images.js";
import type { EnsureImagesResult } from "../../src/driver/docker/images.js";
import { PrivateDockerd } from "../support/dockerd.js";
import { DEFAULT_IDS } from "../../src/driver/docker/rootfs.js";

const WL = DEFAULT_IDS.workload;
const SUP = DEFAULT_IDS.supervisor;

const run = promisify(execFile);
const DOCKER_CLI = ["/usr/local/bin/docker", "/usr/bin/docker"].find((p) => existsSync(p)) ?? "docker";

async function docker(d: PrivateDockerd, ...args: string[]): Promise<{ stdout: string; stderr: string; code: number }> {
  try {
    const { stdout, stderr } = await run(DOCKER_CLI, ["-H", d.dockerHost, ...args], { timeout: 60_000 });
    return { stdout: stdout.trim(), stderr: stderr.trim(), code: 0 };
  } catch (err) {
    const e = err as { stdout?: string; stderr?: string; code?: number };
    return { stdout: (e.stdout ?? "").trim(), stderr: (e.stderr ?? "").trim(), code: typeof e.code === "number" ? e.code : -1 };
  }
}

describe("ensureImages (real daemon)", () => {
  let d: PrivateDockerd;
  let engine: EngineClient;
  let work: string;
  let bundle: string;
  let cacheDir: string;
  let first: EnsureImagesResult;
  const progress: string[] = [];

  beforeAll(async () => {
    work = mkdtempSync("/tmp/sg-images-test-");
    cacheDir = join(work, "cache");
    // A stand-in supervisor program (the real one needs a launch config): it proves the
    // bundle runs under node in the image, that require() of builtins works (banner), and
    // which user it runs as.
    const entry = join(work, "entry.ts");
    writeFileSync(
      entry,
      [
        'import { hostname } from "node:os";',
        'const os = require("node:os") as typeof import("node:os");',
        "const uid: number = process.getuid?.() ?? -1;",
        'console.log(`supervisor-ok uid=${uid} require=${os.hostname() === hostname()}`);',
      ].join("\n"),
    );
    bundle = await bundleSupervisor(join(work, "supervisor.mjs"), { entry });
    d = await PrivateDockerd.start({ liveRestore: false, name: "images" });
    engine = new EngineClient({ socketPath: d.socketPath });
    first = await ensureImages(engine, { supervisorBundlePath: bundle, cacheDir, onProgress: (m) => progress.push(m) });
  });

  afterAll(async () => {
    await engine.close();
    await d.destroy();
    rmSync(work, { recursive: true, force: true });
  });

  it("builds both images, tagged by content hash, and caches their tars", () => {
    expect(first.workload.ref).toMatch(/^sandgate-workload:[0-9a-f]{12}$/);
    expect(first.supervisor.ref).toMatch(/^sandgate-supervisor:[0-9a-f]{12}$/);
    expect(first.workload.id).toMatch(/^sha256:[0-9a-f]{64}$/);
    expect(first.supervisor.id).toMatch(/^sha256:[0-9a-f]{64}$/);
    expect(first.built.sort()).toEqual([first.supervisor.ref, first.workload.ref].sort());
    expect(first.assembled.sort()).toEqual(first.built);
    expect(existsSync(join(cacheDir, `workload-${first.workload.ref.split(":")[1]!}.tar`))).toBe(true);
    expect(existsSync(join(cacheDir, `supervisor-${first.supervisor.ref.split(":")[1]!}.tar`))).toBe(true);
    expect(progress.some((m) => m.startsWith("assembling workload"))).toBe(true);
  });

  it("builds nothing on a second call", async () => {
    const again = await ensureImages(engine, { supervisorBundlePath: bundle, cacheDir });
    expect(again.built).toEqual([]);
    expect(again.assembled).toEqual([]);
    expect(again.workload).toEqual(first.workload);
    expect(again.supervisor).toEqual(first.supervisor);
  });

  it("sets the image config: user, workdir, PATH; the supervisor has a Cmd", async () => {
    const w = await engine.inspectImage(first.workload.ref);
    const s = await engine.inspectImage(first.supervisor.ref);
    if (w.kind !== "ok" || s.kind !== "ok") throw new Error("inspect failed");
    expect(w.body.Config?.User).toBe(`${WL}:${WL}`);
    expect(w.body.Config?.WorkingDir).toBe("/sandbox");
    expect(w.body.Config?.Env).toContain("PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin");
    expect(w.body.Config?.Labels?.["org.sandgate.image"]).toBe("workload");
    expect(s.body.Config?.User).toBe(`${SUP}:${SUP}`);
    expect(s.body.Config?.Cmd).toEqual(["/usr/local/bin/node", "/opt/sandgate/supervisor.mjs"]);
  });

  it("runs the workload as its high uid with node and busybox on a read-only root fs", async () => {
    const ref = first.workload.ref;
    expect(await docker(d, "run", "--rm", "--read-only", "--network", "none", ref, "id", "-u")).toMatchObject({ stdout: String(WL), code: 0 });
    expect(await docker(d, "run", "--rm", "--read-only", "--network", "none", ref, "node", "-e", "console.log(1+1)")).toMatchObject({ stdout: "2", code: 0 });
    const ls = await docker(d, "run", "--rm", "--read-only", "--network", "none", ref, "sh", "-c", "pwd; stat -c '%u:%g %a' /sandbox /tmp; whoami; echo hi | wc -c");
    expect(ls.stdout.split("\n")).toEqual(["/sandbox", `${WL}:${WL} 755`, "0:0 1777", "sandbox", "3"]);
    const write = await docker(d, "run", "--rm", "--read-only", "--network", "none", ref, "touch", "/sandbox/x");
    expect(write.code).not.toBe(0);
    expect(write.stderr).toMatch(/Read-only file system/);
  });

  it("runs the supervisor bundle as its high uid by default, with no shell in the image", async () => {
    const ref = first.supervisor.ref;
    expect(await docker(d, "run", "--rm", "--read-only", "--network", "none", ref)).toMatchObject({ stdout: `supervisor-ok uid=${SUP} require=true`, code: 0 });
    const sh = await docker(d, "run", "--rm", "--network", "none", ref, "sh", "-c", "true");
    expect(sh.code).not.toBe(0);
    expect(sh.stderr).toMatch(/executable file not found|no such file/i);
  });

  it("imports from the cached tars into a fresh daemon without assembling", async () => {
    const other = await PrivateDockerd.start({ liveRestore: false, name: "images2" });
    const otherEngine = new EngineClient({ socketPath: other.socketPath });
    try {
      const t0 = Date.now();
      const r = await ensureImages(otherEngine, { supervisorBundlePath: bundle, cacheDir });
      const ms = Date.now() - t0;
      expect(r.built.sort()).toEqual([first.supervisor.ref, first.workload.ref].sort());
      expect(r.assembled).toEqual([]);
      expect(r.workload.ref).toBe(first.workload.ref);
      console.log(`ensureImages from cache into a fresh daemon: ${ms} ms`);
      expect((await docker(other, "run", "--rm", "--network", "none", r.workload.ref, "id", "-u")).stdout).toBe(String(WL));
    } finally {
      await otherEngine.close();
      await other.destroy();
    }
  });

  it("changes the tag when an input changes", async () => {
    const changed = join(work, "supervisor-changed.mjs");
    writeFileSync(changed, `${readFileSync(bundle, "utf8")}\n// changed\n`);
    const before = await planImage("supervisor", { supervisorBundlePath: bundle, cacheDir });
    const after = await planImage("supervisor", { supervisorBundlePath: changed, cacheDir });
    expect(before.ref).toBe(first.supervisor.ref);
    expect(after.ref).not.toBe(before.ref);
    const workload = await planImage("workload", { cacheDir });
    expect(workload.ref).toBe(first.workload.ref); // the bundle is not an input of the workload
  });

  it("uses the supervisor bundle built by npm run build (never bundles at run time)", () => {
    // The suite runs after `npm run build` (scripts/test.sh); the gateway only finds the file.
    expect(resolveSupervisorBundle()).toBe(PREBUILT_SUPERVISOR_BUNDLE);
    expect(readFileSync(PREBUILT_SUPERVISOR_BUNDLE, "utf8").startsWith("import { createRequire as __sgCreateRequire } from 'module';")).toBe(true);
  });
});
