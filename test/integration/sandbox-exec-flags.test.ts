// Exec and create options on a real Docker sandbox, through the real CLI: -e, --env-file,
// -w and -u (the workload's own user only, never root); --detach and exec-status;
// Ctrl-C reaching the remote command's process group (the CLI exits 130 and nothing of
// the command is left); --timeout (124, TERM then KILL); create --workdir/--env-file; a
// short --ttl and --idle-stop stopping the sandbox with their reason; restart making a
// new generation with the workspace kept.

import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CLI_ARGS, cli } from "../support/cli-runner.js";
import { startDockerFixture, type DockerFixture } from "../support/docker-fixture.js";
import { eventually } from "../support/gateway-fixture.js";
import { cliExec, docker, getSandbox, waitPhase } from "../support/sandbox-helpers.js";

const NAME = "fl";
const WORKLOAD_USER = "2000000000:2000000000";

let fx: DockerFixture;
let dir: string;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "sg-exec-flags-"));
  fx = await startDockerFixture({ liveRestore: true, name: "execflags" });
  const created = await fx.t.api("POST", "/v1/sandboxes", { name: NAME });
  if (created.status !== 201) throw new Error(`create: ${JSON.stringify(created.body)}`);
  await waitPhase(fx, NAME, "Ready", { ms: 120_000 });
});

afterAll(async () => {
  await fx?.close();
  rmSync(dir, { recursive: true, force: true });
});

const exec = (args: string[], env: Record<string, string> = {}, stdin?: string) => cli(["sandbox", "exec", ...args], { ...fx.cliEnv, ...env }, stdin);

/** How many processes in the sandbox run a command line containing `marker` (or, `whole`, exactly it). */
async function running(name: string, marker: string, opts: { whole?: boolean } = {}): Promise<number> {
  // The [x]y pattern never matches the grep (or this shell) itself.
  const pattern = `[${marker[0]}]${marker.slice(1)}`;
  const r = await cliExec(fx, name, ["sh", "-c", `ps -o args | grep -c${opts.whole ? "x" : ""} '${pattern}' || true`]);
  return Number(r.stdout.trim());
}

/** The CLI running a command remotely, as a process the test signals once the command has started. */
function spawnExec(args: string[]): { started: Promise<void>; exited: Promise<{ code: number | null; stdout: string; stderr: string }>; kill(sig: NodeJS.Signals): void } {
  const p = spawn(CLI_ARGS[0]!, [...CLI_ARGS.slice(1), "sandbox", "exec", ...args], { env: { ...process.env, SANDGATE_URL: undefined, SANDGATE_TOKEN: undefined, ...fx.cliEnv }, stdio: ["pipe", "pipe", "pipe"] });
  let out = "";
  let err = "";
  const started = new Promise<void>((resolve) => {
    p.stdout.on("data", (b: Buffer) => {
      out += b.toString();
      // Output came through the open session: the CLI forwards signals from now on.
      if (out.includes("started")) resolve();
    });
  });
  p.stderr.on("data", (b: Buffer) => (err += b.toString()));
  const exited = new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => p.on("close", (code) => resolve({ code, stdout: out, stderr: err })));
  return { started, exited, kill: (sig) => p.kill(sig) };
}

describe("exec -e, --env-file, -w, -u", () => {
  it("the variables, the directory and the workload's user reach the command; the CLI's own environment does not", async () => {
    const file = join(dir, "vars.env");
    writeFileSync(file, "# for the command\nB=from file\nA=overridden\nFROM_SHELL\n");
    const r = await exec(
      [NAME, "--env-file", file, "-e", "A=1", "-w", "/tmp", "-u", "2000000000", "--", "sh", "-c", 'echo "$A|$B|$FROM_SHELL|$(pwd)|$(id -u):$(id -g)"; env'],
      { FROM_SHELL: "shell value", SANDGATE_TOKEN: fx.t.token },
    );
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout.split("\n")[0]).toBe(`1|from file|shell value|/tmp|${WORKLOAD_USER}`);
    // Nothing of the CLI's environment but what was asked for: no token, no gateway settings.
    expect(r.stdout).not.toContain(fx.t.token);
    expect(r.stdout).not.toMatch(/^SANDGATE_/m);
    // Without -w: the workload's directory, the workspace.
    expect((await cliExec(fx, NAME, ["pwd"])).stdout).toBe("/sandbox\n");
  });

  it("-u 0 (root) and any other id are refused, exit 2, and nothing runs", async () => {
    for (const user of ["0", "0:0", "1000", "2000000001", "2000000000:0", "root"]) {
      const r = await exec([NAME, "-u", user, "--", "sh", "-c", "touch /tmp/ran-as-other"]);
      expect(r.code, user).toBe(2);
      expect(r.stderr, user).toMatch(new RegExp(`^sandgate: user "${user}": .*; exec runs as the workload's user ${WORKLOAD_USER} only\\n$`));
    }
    expect((await cliExec(fx, NAME, ["sh", "-c", "test -e /tmp/ran-as-other && echo ran || echo none"])).stdout).toBe("none\n");
    // The API refuses it the same way (the CLI is not the guard).
    const detached = await fx.t.api("POST", `/v1/sandboxes/${NAME}/execs`, { cmd: ["id"], user: "0" });
    expect(detached.status).toBe(400);
  });

  it("-w to a directory that does not exist: the runtime's error, a non-zero exit", async () => {
    const r = await exec([NAME, "-w", "/no/such/dir", "--", "pwd"]);
    expect(r.code).not.toBe(0);
    expect(r.stdout + r.stderr).toContain("/no/such/dir");
  });
});

describe("Ctrl-C and other signals", () => {
  it("SIGINT to the CLI reaches the remote command: it is gone, and the CLI exits 130", async () => {
    const x = spawnExec([NAME, "--", "sh", "-c", "echo started; exec sleep 1001"]);
    await x.started;
    expect(await running(NAME, "sleep 1001")).toBe(1);
    x.kill("SIGINT");
    const r = await x.exited;
    expect(r.code, r.stderr).toBe(130);
    expect(await running(NAME, "sleep 1001")).toBe(0);
  });

  it("a shell's foreground child goes with it, as under a terminal's Ctrl-C", async () => {
    const x = spawnExec([NAME, "--", "sh", "-c", "echo started; sleep 1002; echo after"]);
    await x.started;
    // "started" comes before the shell forks its child: Ctrl-C once the child is running
    // (its command line alone; the shell's own line holds "sleep 1002" too).
    await eventually(async () => ((await running(NAME, "sleep 1002", { whole: true })) === 1 ? true : undefined), 60_000, "the shell's child running");
    x.kill("SIGINT");
    const r = await x.exited;
    expect(r.code).toBe(130);
    expect(r.stdout).not.toContain("after");
    expect(await running(NAME, "sleep 1002")).toBe(0);
  }, 120_000);

  it("SIGTERM is forwarded too: 143", async () => {
    const x = spawnExec([NAME, "--", "sh", "-c", "echo started; exec sleep 1003"]);
    await x.started;
    x.kill("SIGTERM");
    expect((await x.exited).code).toBe(143);
    expect(await running(NAME, "sleep 1003")).toBe(0);
  });
});

describe("exec --timeout", () => {
  it("ends the command with 124; one that ignores SIGTERM is killed after the grace", async () => {
    const r = await exec([NAME, "--timeout", "2s", "--", "sh", "-c", "sleep 1004"]);
    expect(r.code).toBe(124);
    expect(await running(NAME, "sleep 1004")).toBe(0);
    const stubborn = await exec([NAME, "--timeout", "2s", "--", "sh", "-c", "trap '' TERM; sleep 1005"]);
    expect(stubborn.code).toBe(124);
    expect(await running(NAME, "sleep 1005")).toBe(0);
    // In time: the command's own code.
    expect((await exec([NAME, "--timeout", "60s", "--", "sh", "-c", "exit 3"])).code).toBe(3);
  }, 120_000);
});

describe("exec --detach and exec-status", () => {
  it("prints an id; exec-status says running, then the exit code; a --timeout ends a detached command too", async () => {
    // It runs until the test lets it end.
    const script = "echo out; while [ ! -e /tmp/go-7 ]; do sleep 0.1; done; exit $CODE";
    const r = await exec([NAME, "--detach", "-e", "CODE=7", "--", "sh", "-c", script]);
    expect(r.code, r.stderr).toBe(0);
    const id = r.stdout.trim();
    expect(id).toMatch(/^ex_[0-9a-f]{16}$/);
    const first = await cli(["sandbox", "exec-status", NAME, id], fx.cliEnv);
    expect(first.stdout).toMatch(/^state\s+running$/m);
    expect(JSON.parse((await cli(["sandbox", "exec-status", NAME, id, "--json"], fx.cliEnv)).stdout)).toMatchObject({ id, sandbox: NAME, state: "running", cmd: ["sh", "-c", script] });
    await cliExec(fx, NAME, ["touch", "/tmp/go-7"]);
    const done = await eventually(async () => {
      const s = JSON.parse((await cli(["sandbox", "exec-status", NAME, id, "--json"], fx.cliEnv)).stdout) as { state: string; exitCode: number | null };
      return s.state === "exited" ? s : undefined;
    }, 60_000, "the detached exec to end");
    expect(done).toMatchObject({ state: "exited", exitCode: 7, timedOut: false });

    const long = await exec([NAME, "--detach", "--timeout", "2s", "--", "sleep", "1006"]);
    const longId = long.stdout.trim();
    await eventually(async () => ((await cli(["sandbox", "exec-status", NAME, longId], fx.cliEnv)).stdout.match(/^state\s+exited 124 \(timed out\)$/m) ? true : undefined), 60_000, "exit 124");
    expect(await running(NAME, "sleep 1006")).toBe(0);
    const table = await cli(["sandbox", "exec-status", NAME], fx.cliEnv);
    expect(table.stdout).toContain(`${id}  exited 7`);
  }, 120_000);
});

describe("create --workdir and --env-file", () => {
  it("the workload starts in the directory with the variables; exec defaults to that directory", async () => {
    const file = join(dir, "create.env");
    writeFileSync(file, "MODE=from-file\nLEVEL=2\n");
    const r = await cli(["sandbox", "create", "fl-wd", "--workdir", "/sandbox/proj", "--env-file", file, "-e", "LEVEL=3"], fx.cliEnv);
    expect(r.code, r.stderr).toBe(0);
    const out = await cliExec(fx, "fl-wd", ["sh", "-c", 'pwd; echo "$MODE $LEVEL"; cat /proc/1/environ | tr "\\0" "\\n" | grep -c "^MODE=from-file$"']);
    expect(out.stdout).toBe("/sandbox/proj\nfrom-file 3\n1\n");
    const s = await getSandbox(fx, "fl-wd");
    const inspect = await docker(fx, "inspect", "--format", "{{.Config.WorkingDir}}", s.body.runtime!.workload.id);
    expect(inspect.stdout).toBe("/sandbox/proj");
    await fx.t.api("DELETE", "/v1/sandboxes/fl-wd");
  }, 180_000);
});

describe("a short --ttl and --idle-stop", () => {
  it("--ttl: the sandbox is stopped with reason TtlExpired, its containers gone, its workspace kept", async () => {
    const r = await cli(["sandbox", "create", "fl-ttl", "--ttl", "20s", "--no-wait"], fx.cliEnv);
    expect(r.code, r.stderr).toBe(0);
    // Through Provisioning and Ready, to Stopped.
    const s = await eventually(async () => {
      const b = (await getSandbox(fx, "fl-ttl")).body;
      if (b.phase === "Error") throw new Error(`fl-ttl failed: ${JSON.stringify(b.reason)}`);
      return b.phase === "Stopped" ? b : undefined;
    }, 180_000, "fl-ttl Stopped");
    expect(s.reason).toMatchObject({ code: "TtlExpired" });
    const ps = await docker(fx, "ps", "-a", "--filter", `label=sandgate.sandbox=${s.id}`, "--format", "{{.ID}}");
    expect(ps.stdout).toBe("");
    expect(existsSync(join(fx.dockerd.workspaceRoot, `${s.id}.img`))).toBe(true);
    const shown = await cli(["sandbox", "get", "fl-ttl"], fx.cliEnv);
    expect(shown.stdout).toMatch(/^reason\s+TtlExpired: its TTL of 20s ran out at /m);
    await fx.t.api("DELETE", "/v1/sandboxes/fl-ttl");
  }, 240_000);

  it("--idle-stop: with no exec, connect or egress, stopped with reason IdleTimeout", async () => {
    const r = await cli(["sandbox", "create", "fl-idle", "--idle-stop", "5s"], fx.cliEnv);
    // It may already be idle-stopped by the time create looks (the clock starts at Ready).
    expect([0, 1]).toContain(r.code);
    const s = await eventually(async () => {
      const b = (await getSandbox(fx, "fl-idle")).body;
      return b.phase === "Stopped" ? b : undefined;
    }, 120_000, "fl-idle Stopped");
    expect(s.reason).toMatchObject({ code: "IdleTimeout", detail: expect.stringMatching(/^no exec, connect or egress for 5s/) });
    const events = (await fx.t.api("GET", "/v1/sandboxes/fl-idle/events")).body.events as { newPhase: string | null; reasonText: string | null }[];
    expect(events.some((e) => e.newPhase === "Stopped" && e.reasonText?.startsWith("IdleTimeout"))).toBe(true);
    await fx.t.api("DELETE", "/v1/sandboxes/fl-idle");
  }, 180_000);
});

describe("egress is activity", () => {
  it("a workload making requests (denied ones too) stays Ready well past its --idle-stop", async () => {
    // Its main process asks the proxy for a host the policy does not allow, every second.
    const loop = `const u = new URL(process.env.http_proxy);
      setInterval(() => require("http").get({ agent: false, host: u.hostname, port: u.port, path: "http://blocked.example/", headers: { host: "blocked.example" } }, (r) => r.resume()).on("error", () => {}), 1000);`;
    const created = await fx.t.api("POST", "/v1/sandboxes", { name: "fl-busy", idleStop: 10, command: ["node", "-e", loop] });
    expect(created.status).toBe(201);
    await waitPhase(fx, "fl-busy", "Ready", { ms: 120_000 });
    const events = (await fx.t.api("GET", "/v1/sandboxes/fl-busy/events")).body.events as { newPhase: string | null; time: string }[];
    const readyAt = Date.parse(events.find((e) => e.newPhase === "Ready")!.time);
    // Wait until its egress records span three times its idle stop after Ready (no exec meanwhile).
    await eventually(async () => {
      const { audit } = (await fx.t.api("GET", "/v1/sandboxes/fl-busy/audit?tail=1")).body as { audit: { time: string }[] };
      const last = audit.at(-1);
      const now = (await getSandbox(fx, "fl-busy")).body;
      if (now.phase !== "Ready") throw new Error(`fl-busy left Ready while its workload made egress (${audit.length} records): ${JSON.stringify(now.reason)}`);
      return last && Date.parse(last.time) - readyAt >= 30_000 ? true : undefined;
    }, 180_000, "30 s of egress records after Ready");
    expect((await getSandbox(fx, "fl-busy")).body.phase).toBe("Ready");
    await fx.t.api("DELETE", "/v1/sandboxes/fl-busy");
  }, 300_000);
});

describe("sandbox restart", () => {
  it("a new generation with new containers, the workspace kept", async () => {
    await cliExec(fx, NAME, ["sh", "-c", "echo kept > /sandbox/restart-note"]);
    const before = (await getSandbox(fx, NAME)).body;
    const r = await cli(["sandbox", "restart", NAME], fx.cliEnv);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toBe(`${NAME}  Ready  generation ${before.generation + 1}\n`);
    const after = (await getSandbox(fx, NAME)).body;
    expect(after.runtime!.workload.id).not.toBe(before.runtime!.workload.id);
    expect((await cliExec(fx, NAME, ["cat", "/sandbox/restart-note"])).stdout).toBe("kept\n");
    // The old generation's containers are gone.
    const old = await docker(fx, "ps", "-a", "--filter", `label=sandgate.sandbox=${before.id}`, "--filter", `label=sandgate.generation=${before.generation}`, "--format", "{{.ID}}");
    expect(old.stdout).toBe("");
  }, 240_000);
});
