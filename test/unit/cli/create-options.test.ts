// create --workdir/--env-file/--ttl/--idle-stop and `sandbox restart`, through the real
// CLI and API on the in-memory driver (TEST DOUBLE): what reaches the spec, what bad
// values say, a TTL and an idle stop ending in Stopped with their reason, and restart
// making a new generation.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { cli, runProgram, type CliRun } from "../../support/cli-runner.js";
import { PROJECT_ROOT } from "../../support/cli-build.js";
import { MemoryDriver } from "../../support/memory-driver.js";
import { eventually, startTestGateway, type TestGateway } from "../../support/gateway-fixture.js";

let t: TestGateway;
let driver: MemoryDriver;
let home: string[];
let dir: string;

beforeAll(async () => {
  driver = new MemoryDriver();
  t = await startTestGateway(driver);
  home = ["--home", t.home.dir];
  dir = mkdtempSync(join(tmpdir(), "sg-create-opts-"));
});

afterAll(async () => {
  await t.close();
  rmSync(dir, { recursive: true, force: true });
});

function oneLine(r: CliRun): string {
  const lines = r.stderr.trim().split("\n");
  expect(lines, r.stderr).toHaveLength(1);
  expect(r.stderr).not.toMatch(/\bat .+:\d+:\d+/);
  return lines[0]!;
}

const get = async (name: string) => (await t.api("GET", `/v1/sandboxes/${name}`)).body;
const phaseOf = (name: string, phase: string, ms = 20_000) => eventually(async () => ((await get(name)).phase === phase ? get(name) : undefined), ms, `${name} ${phase}`);

const BIN = join(PROJECT_ROOT, "bin", "sandgate.js");

describe("create options", () => {
  it("--workdir, --env-file (with -e over it), --ttl and --idle-stop reach the spec; get shows them", async () => {
    const file = join(dir, "app.env");
    writeFileSync(file, "# app\nMODE=file\nLEVEL=3\nFROM_SHELL\n");
    const r = await cli([...home, "sandbox", "create", "opts", "--workdir", "/sandbox/app", "--env-file", file, "-e", "MODE=flag", "--ttl", "2h", "--idle-stop", "30m"], { FROM_SHELL: "yes" });
    expect(r.code, r.stderr).toBe(0);
    const s = await get("opts");
    expect(s.spec).toMatchObject({ workdir: "/sandbox/app", env: { MODE: "flag", LEVEL: "3", FROM_SHELL: "yes" }, ttlSeconds: 7200, idleStopSeconds: 1800 });
    expect(s.expiry.ttlDeadline).toEqual(expect.any(String));
    const shown = await cli([...home, "sandbox", "get", "opts"]);
    expect(shown.stdout).toMatch(/^workdir\s+\/sandbox\/app$/m);
    expect(shown.stdout).toMatch(/^ttl\s+2h per run; this one stops at \d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ$/m);
    expect(shown.stdout).toMatch(/^idle stop\s+30m; last activity \d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ$/m);
    // The default: /sandbox, no TTL, no idle stop.
    await cli([...home, "sandbox", "create", "plain"]);
    const plain = await cli([...home, "sandbox", "get", "plain"]);
    expect(plain.stdout).toMatch(/^workdir\s+\/sandbox$/m);
    expect(plain.stdout).toMatch(/^ttl\s+-$/m);
    expect(plain.stdout).toMatch(/^idle stop\s+-$/m);
  }, 60_000);

  it("bad values: one line naming the flag, exit 2, nothing created", async () => {
    const bad = join(dir, "bad.env");
    writeFileSync(bad, "OK=1\n2BAD=x\n");
    for (const [args, line] of [
      [["--ttl", "0"], /--ttl must be a duration from 1 s to 366 d \(e\.g\. 60, 90s, 5m, 2h, 7d\); got "0"/],
      [["--ttl", "soon"], /--ttl must be a duration from 1 s to 366 d/],
      [["--idle-stop", "367d"], /--idle-stop must be a duration from 1 s to 366 d \(e\.g\. 60, 90s, 5m, 2h, 7d\); got "367d"/],
      [["--workdir", "app"], /^sandgate: --workdir: working directory "app": expected an absolute path \(starting with "\/"\)$/],
      [["--env-file", bad], new RegExp(`^sandgate: --env-file ${bad} line 2: "2BAD" is not a valid variable name`)],
      [["-e", "A B=1"], /"A B" is not a valid variable name/],
    ] as const) {
      const r = await cli([...home, "sandbox", "create", "never", ...args]);
      expect(r.code, args.join(" ")).toBe(2);
      expect(oneLine(r)).toMatch(line);
    }
    expect((await t.api("GET", "/v1/sandboxes/never")).status).toBe(404);
  }, 60_000);

  it("the sandbox's --env-file is the sandbox's only: NODE_OPTIONS in it reaches the spec, never the CLI's own node (issue 31, item 6)", async () => {
    const file = join(dir, "node.env");
    // Were the CLI's node to read it, an 8 MiB heap would crash it with a V8 trace.
    writeFileSync(file, "NODE_OPTIONS=--max-old-space-size=8 --require /nonexistent/preload.js\nNODE_EXTRA_CA_CERTS=/nonexistent.pem\n");
    // The command as a user runs it: bin/sandgate.js by its shebang (node first on PATH).
    const r = await runProgram(BIN, [...home, "sandbox", "create", "nodeenv", "--env-file", file], { env: { ...process.env, PATH: `${dirname(process.execPath)}:${process.env.PATH ?? ""}`, SANDGATE_URL: undefined, SANDGATE_TOKEN: undefined } });
    expect([r.code, r.stderr]).toEqual([0, expect.not.stringMatching(/V8|heap|Cannot find module|Warning/)]);
    expect((await get("nodeenv")).spec.env).toEqual({ NODE_OPTIONS: "--max-old-space-size=8 --require /nonexistent/preload.js", NODE_EXTRA_CA_CERTS: "/nonexistent.pem" });
  });

  it("the API checks them too: 400 naming the field", async () => {
    for (const [body, message] of [
      [{ ttl: "x" }, 'ttl must be a duration from 1 s to 366 d (e.g. 60, 90s, 5m, 2h, 7d); got "x"'],
      [{ idleStop: 0 }, "idleStop must be a duration from 1 s to 366 d (e.g. 60, 90s, 5m, 2h, 7d); got 0"],
      [{ workdir: "rel/dir" }, 'workdir: working directory "rel/dir": expected an absolute path (starting with "/")'],
      [{ workdir: "/a\u0000b" }, 'workdir: working directory "/a\\u0000b": contains a control character'],
    ] as const) {
      const r = await t.api("POST", "/v1/sandboxes", { name: "api-bad", ...body });
      expect(r).toEqual({ status: 400, body: { error: { code: "invalid_request", message } } });
    }
    expect((await t.api("POST", "/v1/sandboxes", { name: "api-ok", ttl: "90s", idleStop: 3600 })).body.spec).toMatchObject({ ttlSeconds: 90, idleStopSeconds: 3600 });
  });
});

describe("a short --ttl and --idle-stop", () => {
  it("--ttl: Stopped with reason TtlExpired, in get, list and events; a start clears it and runs another TTL", async () => {
    const r = await cli([...home, "sandbox", "create", "short", "--ttl", "1s"]);
    expect(r.code, r.stderr).toBe(0);
    const stopped = await phaseOf("short", "Stopped");
    expect(stopped.reason).toMatchObject({ code: "TtlExpired", detail: expect.stringMatching(/^its TTL of 1s ran out at /) });
    expect((await cli([...home, "sandbox", "get", "short"])).stdout).toMatch(/^reason\s+TtlExpired: its TTL of 1s ran out at /m);
    expect((await cli([...home, "sandbox", "list"])).stdout).toMatch(/^short\s+Stopped\s+1\s+TtlExpired\s/m);
    const events = (await t.api("GET", "/v1/sandboxes/short/events")).body.events as { newPhase: string | null; reasonText: string | null; message: string | null }[];
    expect(events.filter((e) => e.newPhase === "Stopping" || e.newPhase === "Stopped").map((e) => [e.newPhase, e.reasonText?.split(":")[0]])).toEqual([
      ["Stopping", "TtlExpired"],
      ["Stopped", "TtlExpired"],
    ]);
    // The workspace was kept: a stop, never a delete.
    expect(driver.workspaces.has(stopped.id)).toBe(true);
    // Started again: a new generation, no reason, and its own TTL runs out too.
    expect((await t.api("POST", "/v1/sandboxes/short/start")).status).toBe(202);
    const again = await eventually(async () => {
      const s = await get("short");
      return s.generation === 2 && s.phase === "Stopped" ? s : undefined;
    }, 20_000, "generation 2 stopped by its TTL");
    expect(again.reason.code).toBe("TtlExpired");
    // Its TTL counts from its own launch (1 s may end it before or after it is Ready).
    const gen2 = ((await t.api("GET", "/v1/sandboxes/short/events")).body.events as { generation: number; kind: string; newPhase: string }[])
      .filter((e) => e.generation === 2 && e.kind === "phase")
      .map((e) => e.newPhase);
    expect([gen2[0], ...gen2.slice(-2)]).toEqual(["Provisioning", "Stopping", "Stopped"]);
  }, 60_000);

  it("--idle-stop: with nothing happening, Stopped with reason IdleTimeout", async () => {
    expect((await cli([...home, "sandbox", "create", "idle", "--idle-stop", "1s"])).code).toBe(0);
    const s = await phaseOf("idle", "Stopped");
    expect(s.reason).toMatchObject({ code: "IdleTimeout", detail: expect.stringMatching(/^no exec, connect or egress for 1s \(last activity /) });
  }, 60_000);
});

describe("sandbox restart", () => {
  it("stops a Ready sandbox and starts it again as the next generation, same workspace", async () => {
    await cli([...home, "sandbox", "create", "rs"]);
    const before = await get("rs");
    const calls = driver.calls.length;
    const r = await cli([...home, "sandbox", "restart", "rs"]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toBe("rs  Ready  generation 2\n");
    expect(r.stderr).toMatch(/^stopping "rs" \(generation 1\)$/m);
    expect(r.stderr).toMatch(/^starting "rs" as generation 2$/m);
    // Stopped before it was provisioned again.
    const after = driver.calls.slice(calls);
    expect(after.findIndex((c) => c === `stop ${before.id} g1`)).toBeLessThan(after.findIndex((c) => c === "provision rs g2"));
    expect(driver.workspaces.has(before.id)).toBe(true);
    const json = await cli([...home, "sandbox", "restart", "rs", "--json"]);
    expect(JSON.parse(json.stdout)).toMatchObject({ name: "rs", phase: "Ready", generation: 3 });
  }, 60_000);

  it("a Stopped sandbox is only started; an unknown one is exit 4", async () => {
    await cli([...home, "sandbox", "create", "rs-stopped"]);
    await cli([...home, "sandbox", "stop", "rs-stopped"]);
    const r = await cli([...home, "sandbox", "restart", "rs-stopped"]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).not.toMatch(/stopping/);
    expect(r.stdout).toBe("rs-stopped  Ready  generation 2\n");
    const missing = await cli([...home, "sandbox", "restart", "nope"]);
    expect(missing.code).toBe(4);
    expect(oneLine(missing)).toBe('sandgate: no sandbox named "nope"');
  }, 60_000);

  it("a start that fails is named as the start step, exit 1", async () => {
    await t.api("POST", "/v1/sandboxes", { name: "rs-broken", image: "does-not-exist:latest" });
    await phaseOf("rs-broken", "Error");
    const r = await cli([...home, "sandbox", "restart", "rs-broken"]);
    expect(r.code).toBe(1);
    expect(r.stderr.trim().split("\n").at(-1)).toBe('sandgate: restart: start failed: sandbox "rs-broken" is Error: ProvisioningFailed: No such image: does-not-exist:latest');
  }, 60_000);
});
