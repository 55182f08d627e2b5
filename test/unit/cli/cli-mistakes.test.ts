// A user's mistakes at the command line (issue 12, item 4): each bad input gets
// one clear line naming the value and what is allowed, a documented exit code,
// and changes nothing. The real `sandgate` CLI against a real gateway (HTTP +
// SQLite) on the in-memory driver test double.

import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { spawn } from "node:child_process";
import { createServer, type Server } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { CLI_ARGS, CLI_TEST_TIMEOUT_MS, cli, type CliRun } from "../../support/cli-runner.js";
import { MemoryDriver } from "../../support/memory-driver.js";
import { eventually, startTestGateway, type TestGateway } from "../../support/gateway-fixture.js";
import { listenOnSocket } from "../../support/api-client.js";

// Spawn-heavy: see CLI_TEST_TIMEOUT_MS.
vi.setConfig({ testTimeout: CLI_TEST_TIMEOUT_MS });

// Tests that spawn the CLI a few dozen times one after another: on a loaded machine each
// spawn can take seconds, so their deadline only catches a hang.
const SPAWNS_MANY = 240_000;

/** One line on stderr, no stack trace; returns it. */
function oneLine(r: CliRun): string {
  const lines = r.stderr.trim().split("\n");
  expect(lines, r.stderr).toHaveLength(1);
  expect(r.stderr).not.toMatch(/\bat .+:\d+:\d+/);
  return lines[0]!;
}

const scratch = mkdtempSync(join(tmpdir(), "sg-mistakes-"));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));
function file(name: string, text: string): string {
  const p = join(scratch, name);
  writeFileSync(p, text);
  return p;
}

/** The CLI with no Docker daemon to reach: a gateway it starts never gets a runtime. */
const NO_DOCKER = { DOCKER_HOST: `unix://${join(scratch, "no-docker.sock")}` };

describe("CLI mistakes before a gateway runs", () => {
  const home = mkdtempSync(join(tmpdir(), "sg-mistakes-home-"));
  afterAll(() => rmSync(home, { recursive: true, force: true }));
  const files = (): string[] => readdirSync(home).sort();

  it("item 2: every numeric setting is checked at start, from flags and environment: one line naming it and its range, exit 2, nothing created", { timeout: SPAWNS_MANY }, async () => {
    const cases: [string[], Record<string, string>, RegExp][] = [
      [[], { SANDGATE_RECOVERY_DEADLINE: "abc" }, /^sandgate: SANDGATE_RECOVERY_DEADLINE must be a duration from 1 s to 1 d .*; got "abc"$/],
      [[], { SANDGATE_BOUNDARY_DEADLINE: "-5" }, /^sandgate: SANDGATE_BOUNDARY_DEADLINE must be a duration from 1 s to 1 d .*; got "-5"$/],
      [["--recovery-deadline", "0"], {}, /^sandgate: --recovery-deadline must be a duration from 1 s to 1 d .*; got "0"$/],
      // The flag wins over the environment, and is the one named.
      [["--boundary-deadline", "NaN"], { SANDGATE_BOUNDARY_DEADLINE: "30" }, /^sandgate: --boundary-deadline must be .*; got "NaN"$/],
      [["--port", "70000"], {}, /^sandgate: --port must be a whole number from 0 to 65535; got "70000" \(run with --help for usage\)$/],
      [["--port", "1e3"], {}, /^sandgate: --port must be a whole number from 0 to 65535; got "1e3"/],
      // The audit trail's bounds are the user's to set, within limits.
      [["--audit-keep", "5"], {}, /^sandgate: --audit-keep must be a whole number from 100 to 100000000; got "5"$/],
      [[], { SANDGATE_AUDIT_RATE: "lots" }, /^sandgate: SANDGATE_AUDIT_RATE must be a whole number from 1 to 100000; got "lots"$/],
      [["--audit-max-age", "forever"], {}, /^sandgate: --audit-max-age must be a duration from 1 h to 366 d .*; got "forever"$/],
      // So are the supervisor's limits.
      [["--supervisor-cpus", "0"], {}, /^sandgate: --supervisor-cpus must be a number from 0\.1 to 64; got "0"$/],
      [[], { SANDGATE_SUPERVISOR_MEMORY: "lots" }, /^sandgate: SANDGATE_SUPERVISOR_MEMORY must be a whole number from 64 to 65536; got "lots"$/],
      // And the range sandbox networks take their subnets from.
      [["--sandbox-subnets", "10.0.0.0/30"], {}, /^sandgate: --sandbox-subnets: invalid sandbox subnet range "10\.0\.0\.0\/30": the prefix must be \/8 to \/24$/],
      [[], { SANDGATE_SANDBOX_SUBNETS: "fd00::/64" }, /^sandgate: SANDGATE_SANDBOX_SUBNETS: invalid sandbox subnet range "fd00::\/64": an IPv4 range such as 198\.18\.0\.0\/15 is wanted$/],
      // And the bounds of every listener's connections.
      [["--header-timeout", "500ms"], {}, /^sandgate: --header-timeout must be a duration from 1 s to 10 m .*; got "500ms"$/],
      [[], { SANDGATE_IDLE_TIMEOUT: "2h" }, /^sandgate: SANDGATE_IDLE_TIMEOUT must be a duration from 1 s to 1 h .*; got "2h"$/],
      [["--max-connections", "0"], {}, /^sandgate: --max-connections must be a whole number from 1 to 1000000; got "0"$/],
      [[], { SANDGATE_MAX_UNAUTHENTICATED: "many" }, /^sandgate: SANDGATE_MAX_UNAUTHENTICATED must be a whole number from 1 to 1000000; got "many"$/],
      [["--proxy-connections", "100001"], {}, /^sandgate: --proxy-connections must be a whole number from 1 to 100000; got "100001"$/],
    ];
    for (const [args, env, message] of cases) {
      const r = await cli(["--home", home, "gateway", "start", "--port", "0", ...args], { ...NO_DOCKER, ...env });
      expect(r.code, `${args.join(" ")} ${JSON.stringify(env)}`).toBe(2);
      expect(oneLine(r)).toMatch(message);
      expect(files()).toEqual([]);
    }
    for (const [args, message] of [
      [["sandbox", "create", "x", "--cpus", "0.0001"], /^sandgate: --cpus must be a number from 0\.01 to 256; got "0\.0001"/],
      [["sandbox", "create", "x", "--memory", "lots"], /^sandgate: --memory must be a whole number from 16 to 1048576; got "lots"/],
      [["sandbox", "create", "x", "--timeout", "soon"], /^sandgate: --timeout must be a duration from 1 s to 1 d .*; got "soon"/],
      [["sandbox", "events", "x", "--tail", "0"], /^sandgate: --tail must be a whole number from 1 to 10000; got "0"/],
      [["audit", "x", "--after", "-1"], /^sandgate: --after must be a whole number from 0 to \d+; got "-1"/],
      [["policy", "set", "x", "--policy", "p.yaml", "--timeout", "601"], /^sandgate: --timeout must be a duration from 1 s to 10 m .*; got "601"/],
      [["gateway", "stop", "--timeout", "abc"], /^sandgate: --timeout must be a duration from 1 s to 1 d .*; got "abc"/],
    ] as [string[], RegExp][]) {
      const r = await cli(["--home", home, ...args]);
      expect(r.code, args.join(" ")).toBe(2);
      expect(oneLine(r)).toMatch(message);
    }
    expect(files()).toEqual([]);
  });

  it("item 3: a bad --log-level or SANDGATE_LOG_LEVEL, a malformed gateway.json, a bad --url: one line, no stack trace", { timeout: SPAWNS_MANY }, async () => {
    for (const [args, env, name] of [
      [["--log-level", "loud"], {}, "--log-level"],
      [[], { SANDGATE_LOG_LEVEL: "loud" }, "SANDGATE_LOG_LEVEL"],
    ] as [string[], Record<string, string>, string][]) {
      const r = await cli(["--home", home, "gateway", "start", "--port", "0", ...args], { ...NO_DOCKER, ...env });
      expect(r.code).toBe(2);
      expect(oneLine(r)).toBe(`sandgate: ${name} must be one of trace, debug, info, warn, error, fatal, silent; got "loud"`);
    }
    expect(files()).toEqual([]);

    const bad = mkdtempSync(join(tmpdir(), "sg-mistakes-addr-"));
    try {
      for (const [text, why] of [
        ["{not json", "not JSON"],
        ['{"url": 5, "pid": 1}', '"url" must be a unix:// or https:// address, got 5'],
        ['{"url": "unix:///x/api.sock", "pid": "abc"}', '"pid" must be a process id from 1 to 4194304, got "abc"'],
      ]) {
        writeFileSync(join(bad, "gateway.json"), text!);
        for (const args of [["sandbox", "list"], ["gateway", "stop"]]) {
          const r = await cli(["--home", bad, ...args]);
          expect(r.code, `${text} ${args.join(" ")}`).toBe(3);
          expect(oneLine(r)).toBe(`sandgate: cannot find the gateway: ${join(bad, "gateway.json")} is malformed (${why}); remove it, the gateway writes it again when it starts`);
        }
      }
      const url = await cli(["--url", "not a url", "sandbox", "list"]);
      expect(url.code).toBe(2);
      expect(oneLine(url)).toBe('sandgate: --url must be unix:///PATH or https://HOST:PORT; got "not a url"');
    } finally {
      rmSync(bad, { recursive: true, force: true });
    }
  });

  it("a home too long for its supervisors' health sockets (107 bytes a Unix socket path): one line naming it and the limit, exit 2, nothing created", async () => {
    const long = join(scratch, "h".repeat(60));
    const r = await cli(["--home", long, "gateway", "start", "--port", "0"], NO_DOCKER);
    expect(r.code).toBe(2);
    expect(oneLine(r)).toMatch(new RegExp(`^sandgate: the gateway home ${long} is too long for the supervisors' health sockets: .* is \\d+ bytes, a Unix socket path at most 107; choose a home of at most 51 bytes \\(--home, SANDGATE_HOME\\)$`));
    expect(existsSync(long)).toBe(false);
  });

  it("item 3: a corrupt state.db: one line saying so and what to do, exit 2, the file left as it was", async () => {
    const h = mkdtempSync(join(tmpdir(), "sg-mistakes-db-"));
    try {
      const garbage = "this is not a database, it is a shopping list: eggs, milk, bread, more eggs and some more text\n".repeat(20);
      writeFileSync(join(h, "state.db"), garbage);
      const r = await cli(["--home", h, "gateway", "start", "--port", "0"], NO_DOCKER);
      expect(r.code).toBe(2);
      const db = join(h, "state.db");
      expect(oneLine(r)).toBe(`sandgate: ${db} is not a readable Sandgate database (file is not a database); move it aside (mv ${db} ${db}.corrupt) to start with no sandboxes, or restore it from a backup`);
      expect(readFileSync(db, "utf8")).toBe(garbage);
      expect(existsSync(join(h, "gateway.json"))).toBe(false);
    } finally {
      rmSync(h, { recursive: true, force: true });
    }
  });

  describe("item 4: gateway start on a busy port", () => {
    let holder: Server;
    let port: number;
    beforeAll(async () => {
      holder = createServer();
      await new Promise<void>((r) => holder.listen(0, "127.0.0.1", () => r()));
      port = (holder.address() as { port: number }).port;
    });
    afterAll(() => new Promise<void>((r) => holder.close(() => r())));

    it("in the foreground: one line naming the port and the process that holds it, exit 2, the process ends", async () => {
      const h = mkdtempSync(join(tmpdir(), "sg-mistakes-port-"));
      try {
        const r = await cli(["--home", h, "gateway", "start", "--port", String(port)], NO_DOCKER);
        expect(r.code).toBe(2);
        expect(oneLine(r)).toMatch(new RegExp(`^sandgate: cannot listen on 127\\.0\\.0\\.1:${port} \\(the API\\): the port is in use; it is held by pid ${process.pid} \\(.*\\); stop that process or choose another port$`));
        expect(existsSync(join(h, "gateway.json"))).toBe(false);
      } finally {
        rmSync(h, { recursive: true, force: true });
      }
    });

    it("with --detach: refused before it detaches, one line naming the port and the process, exit 2", async () => {
      const h = mkdtempSync(join(tmpdir(), "sg-mistakes-detach-"));
      try {
        const r = await cli(["--home", h, "gateway", "start", "--port", String(port), "--detach"], NO_DOCKER);
        expect(r.code).toBe(2);
        expect(oneLine(r)).toMatch(new RegExp(`^sandgate: cannot listen on 127\\.0\\.0\\.1:${port} \\(the API\\): the port is in use; it is held by pid ${process.pid} `));
        expect(existsSync(join(h, "gateway.log"))).toBe(false);
        expect(r.stdout).toBe("");
      } finally {
        rmSync(h, { recursive: true, force: true });
      }
    });
  });

  it("gateway start --detach that fails in the child reports it with the log's last lines, exit 2, instead of waiting", async () => {
    const h = mkdtempSync(join(tmpdir(), "sg-mistakes-detach-"));
    try {
      writeFileSync(join(h, "state.db"), "not a database, but a mistake\n".repeat(200));
      const r = await cli(["--home", h, "gateway", "start", "--detach"], NO_DOCKER);
      expect(r.code).toBe(2);
      const lines = r.stderr.trim().split("\n");
      expect(lines[0]).toMatch(/^starting gateway \(pid \d+\); log: /);
      expect(lines).toContainEqual(expect.stringMatching(new RegExp(`^  \\| sandgate: ${join(h, "state.db").replace(/[.]/g, "\\.")} is not a readable Sandgate database`)));
      expect(lines.at(-1)).toBe(`sandgate: the gateway exited during start-up (exit code 2); see ${join(h, "gateway.log")}`);
      expect(r.stderr).not.toMatch(/\bat .+:\d+:\d+/);
      expect(r.stdout).toBe("");
    } finally {
      rmSync(h, { recursive: true, force: true });
    }
  });
});

describe("item 8: gateway stop checks that the pid is the gateway", () => {
  it("a stale gateway.json naming another live process: exit 3, one line, nothing signalled", async () => {
    const h = mkdtempSync(join(tmpdir(), "sg-mistakes-stale-"));
    const other = spawn("sleep", ["60"], { stdio: "ignore" });
    try {
      writeFileSync(join(h, "gateway.json"), JSON.stringify({ url: `unix://${join(h, "api.sock")}`, pid: other.pid, startedAt: "", version: "0" }));
      const r = await cli(["--home", h, "gateway", "stop"]);
      expect(r.code).toBe(3);
      expect(oneLine(r)).toBe(`sandgate: the gateway is not running: ${join(h, "gateway.json")} names pid ${other.pid}, which is now "sleep 60", not a sandgate gateway; nothing was signalled (remove the stale file)`);
      expect(other.exitCode).toBeNull();
      expect(other.signalCode).toBeNull();
      expect(() => process.kill(other.pid!, 0)).not.toThrow();
    } finally {
      other.kill("SIGKILL");
      rmSync(h, { recursive: true, force: true });
    }
  });

  it("a real gateway (started with --detach, showing its progress) is stopped, exit 0", async () => {
    const h = mkdtempSync(join(tmpdir(), "sg-mistakes-real-"));
    try {
      const started = await cli(["--home", h, "gateway", "start", "--port", "0", "--detach", "--header-timeout", "3s"], { ...NO_DOCKER, SANDGATE_PROXY_CONNECTIONS: "64" });
      expect(started.code, started.stderr).toBe(0);
      // Its socket, and the TCP listener --port asked for (TLS, on the port it got).
      const { pid, listeners } = JSON.parse(readFileSync(join(h, "gateway.json"), "utf8")) as { pid: number; listeners: string[] };
      expect(listeners).toEqual([`unix://${join(h, "api.sock")}`, expect.stringMatching(/^https:\/\/127\.0\.0\.1:\d+$/)]);
      expect(started.stdout).toBe(`gateway listening on ${listeners.join(", ")} (pid ${pid})\n`);
      expect(started.stderr).toMatch(/^starting gateway \(pid \d+\); log: /);
      expect(started.stderr).toMatch(/warning: the runtime is not ready yet/);
      // The detached gateway got every setting, from a flag or the environment, as flags.
      const argv = readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0");
      const after = (flag: string): string | undefined => argv[argv.indexOf(flag) + 1];
      expect([after("--header-timeout"), after("--idle-timeout"), after("--max-connections"), after("--max-unauthenticated"), after("--proxy-connections")]).toEqual(["3s", "60s", "1024", "128", "64"]);
      const stopped = await cli(["--home", h, "gateway", "stop"]);
      expect([stopped.code, stopped.stdout, stopped.stderr]).toEqual([0, `gateway (pid ${pid}) stopped\n`, ""]);
    } finally {
      rmSync(h, { recursive: true, force: true });
    }
  });
});

describe("CLI mistakes against a gateway", () => {
  let t: TestGateway;
  let driver: MemoryDriver;
  let home: string[];
  beforeAll(async () => {
    driver = new MemoryDriver();
    t = await startTestGateway(driver);
    home = ["--home", t.home.dir];
  });
  afterAll(() => t.close());

  const snapshot = (): unknown => [
    t.gw.sqlite!.db.prepare("SELECT id, name, phase, generation FROM sandboxes ORDER BY id").all(),
    t.gw.sqlite!.db.prepare("SELECT count(*) AS n FROM events").get(),
    t.gw.sqlite!.db.prepare("SELECT count(*) AS n FROM policies").get(),
  ];

  it("item 7: policy process limits out of range are refused with the field path and the range (exit 2), nothing created", async () => {
    const before = snapshot();
    const cases: [string, RegExp][] = [
      ["limits: { cpus: 0.0001 }", /process\.limits\.cpus: expected a number of CPUs from 0\.01 to 256, got 0\.0001/],
      ["limits: { pids: 1 }", /process\.limits\.pids: expected 16-1000000, got 1/],
      ["limits: { memoryMb: 8 }", /process\.limits\.memoryMb: expected 16-1048576, got 8/],
    ];
    for (const [limits, message] of cases) {
      const r = await cli([...home, "sandbox", "create", "lim", "--policy", file("lim.yaml", `version: 1\nprocess:\n  ${limits}\n`)]);
      expect(r.code, limits).toBe(2);
      expect(oneLine(r)).toMatch(message);
    }
    expect(snapshot()).toEqual(before);
  });

  it("item 1: policy check exits 0 when allowed and 8 when denied, as a table and as --json", async () => {
    const policy = file("one.yaml", "version: 1\nnetwork:\n  rules:\n    - name: api\n      endpoints:\n        - { host: api.example.com, port: 443, protocol: https }\n");
    expect((await cli([...home, "sandbox", "create", "chk", "--policy", policy])).code).toBe(0);
    const allow = await cli([...home, "policy", "check", "chk", "--url", "https://api.example.com/x"]);
    expect([allow.code, allow.stdout]).toEqual([0, "allow  (rule api, revision 1)\n"]);
    const deny = await cli([...home, "policy", "check", "chk", "--url", "https://evil.example.com/"]);
    expect(deny.code).toBe(8);
    expect(deny.stdout).toMatch(/^deny /);
    expect(deny.stderr).toBe("");
    const denyJson = await cli([...home, "policy", "check", "chk", "--url", "https://evil.example.com/", "--json"]);
    expect(denyJson.code).toBe(8);
    expect(JSON.parse(denyJson.stdout).decision.allow).toBe(false);
  });

  it("item 5: a policy over 1 MiB: the CLI says its size and the limit (exit 2); the API answers 413 likewise; nothing changes", async () => {
    await cli([...home, "sandbox", "create", "big"]);
    const before = snapshot();
    const big = file("big.yaml", `version: 1\n#${"x".repeat(5_000_000)}\n`);
    for (const args of [["policy", "set", "big", "--policy", big], ["sandbox", "create", "big2", "--policy", big]]) {
      const r = await cli([...home, ...args]);
      expect(r.code, args.join(" ")).toBe(2);
      expect(oneLine(r)).toBe(`sandgate: policy ${big} is 5.0 MB; the limit is 1 MiB`);
    }
    // Over the body limit, and under it but over the policy limit: 413 naming the policy's size.
    for (const n of [5_000_000, 1_500_000]) {
      const r = await t.api("PUT", "/v1/sandboxes/big/policy", { policy: `version: 1\n#${"x".repeat(n)}` });
      expect(r.status).toBe(413);
      expect(r.body.error).toEqual({ code: "too_large", message: `policy is ${(n / 1e6).toFixed(1)} MB; the limit is 1 MiB` });
    }
    expect(snapshot()).toEqual(before);
  });

  it("item 5: an HTTP error the gateway answers while cutting the connection is never reported as a missing gateway", async () => {
    // A server that cuts the upload at its first bytes (as a gateway may when the body is over its
    // limit and the client is still sending): the gateway is there, so this is not "not running".
    const cutter = createServer((sock) => {
      sock.once("data", () => sock.destroy());
    });
    const url = await listenOnSocket(cutter);
    try {
      const r = await cli(["--url", url, "policy", "set", "x", "--policy", file("mid.yaml", `version: 1\n#${"y".repeat(900_000)}\n`)], { SANDGATE_TOKEN: "t" });
      expect(r.code).toBe(1);
      expect(oneLine(r)).toMatch(new RegExp(`^sandgate: the gateway at ${url} closed the connection during PUT /v1/sandboxes/x/policy \\(\\w+\\); see its log$`));
    } finally {
      await new Promise<void>((r) => cutter.close(() => r()));
    }
  });

  it("item 6: a name over 63 characters and an exec argv over the limit: clear 400s and exit 2", async () => {
    const long = "a".repeat(200);
    for (const args of [["sandbox", "get", long], ["sandbox", "stop", long], ["policy", "get", long]]) {
      const r = await cli([...home, ...args]);
      expect(r.code, args.join(" ")).toBe(2);
      expect(oneLine(r)).toBe(`sandgate: invalid sandbox name "${"a".repeat(40)}"… (200 characters): 1-63 characters: lowercase letters, digits and '-', starting and ending with a letter or digit`);
    }
    const api = await t.api("GET", `/v1/sandboxes/${long}`);
    expect(api.status).toBe(400);
    expect(api.body.error.code).toBe("invalid_request");
    // A name that could be one is still just not found.
    expect((await t.api("GET", `/v1/sandboxes/${"a".repeat(63)}`)).status).toBe(404);

    await cli([...home, "sandbox", "create", "ex"]);
    const tooLong = await cli([...home, "sandbox", "exec", "ex", "--", "echo", "z".repeat(9000)]);
    expect(tooLong.code).toBe(2);
    expect(oneLine(tooLong)).toBe("sandgate: the command line is 9004 bytes in 2 arguments; the limit is 8192 bytes and 256 arguments");
    const tooMany = await cli([...home, "sandbox", "exec", "ex", "--", ...Array.from({ length: 300 }, () => "a")]);
    expect(tooMany.code).toBe(2);
    expect(oneLine(tooMany)).toMatch(/^sandgate: the command line is 300 bytes in 300 arguments; the limit is 8192 bytes and 256 arguments$/);
  });

  it("item 9: stop and delete are idempotent: exit 0, saying it was already so; nothing changes", async () => {
    await cli([...home, "sandbox", "create", "idem"]);
    expect((await cli([...home, "sandbox", "stop", "idem"])).stdout).toBe("idem  Stopped  generation 1\n");
    const before = snapshot();
    const again = await cli([...home, "sandbox", "stop", "idem"]);
    expect([again.code, again.stdout, again.stderr]).toEqual([0, "idem  Stopped  generation 1  (already stopped)\n", ""]);
    const json = await cli([...home, "sandbox", "stop", "idem", "--json"]);
    expect(json.code).toBe(0);
    expect(JSON.parse(json.stdout)).toMatchObject({ name: "idem", phase: "Stopped" });
    expect(snapshot()).toEqual(before);

    expect((await cli([...home, "sandbox", "delete", "idem"])).stdout).toBe("idem  deleted\n");
    const after = snapshot();
    const gone = await cli([...home, "sandbox", "delete", "idem"]);
    expect([gone.code, gone.stdout, gone.stderr]).toEqual([0, "idem  already deleted\n", ""]);
    expect(snapshot()).toEqual(after);
    // Stop of what never existed is still "not found"; start of a Ready sandbox still "not allowed".
    expect((await cli([...home, "sandbox", "stop", "never"])).code).toBe(4);
  });

  it("messages (issue 31, item 10): an option meant for the command names -- as the way; help shows no (default: {}); durations in their units", async () => {
    const exec = await cli([...home, "sandbox", "exec", "nobody", "ls", "-la"]);
    expect([exec.code, oneLine(exec)]).toEqual([2, "sandgate: unknown option '-la'; the command's own options go after --, e.g. sandgate sandbox exec NAME -- ls -la (run with --help for usage)"]);
    for (const args of [["sandbox", "create", "--help"], ["sandbox", "exec", "--help"]]) expect((await cli(args)).stdout, args.join(" ")).not.toContain("(default: {})");
    const ttl = await cli([...home, "sandbox", "create", "never", "--ttl", "400d"]);
    expect(oneLine(ttl)).toBe('sandgate: --ttl must be a duration from 1 s to 366 d (e.g. 60, 90s, 5m, 2h, 7d); got "400d" (run with --help for usage)');
  });

  it("messages (issue 31, item 10): Ctrl-C while create waits for Ready says the sandbox goes on and how to delete it, exit 130; it does go on", async () => {
    let release!: () => void;
    driver.gate = new Promise<void>((r) => (release = r));
    try {
      const p = spawn(CLI_ARGS[0]!, [...CLI_ARGS.slice(1), ...home, "sandbox", "create", "held"], { env: { ...process.env, SANDGATE_URL: undefined, SANDGATE_TOKEN: undefined } });
      let out = "";
      let err = "";
      p.stdout.on("data", (b: Buffer) => (out += b.toString()));
      p.stderr.on("data", (b: Buffer) => (err += b.toString()));
      const exit = new Promise<number | null>((r) => p.on("close", (code) => r(code)));
      // Accepted (the gateway has it) and waiting (the CLI said so, its handler in place); the launch is held.
      await eventually(async () => ((await t.api("GET", "/v1/sandboxes/held")).status === 200 && err.includes('creating sandbox "held"') ? true : undefined), 120_000, `the create to be accepted; stderr so far: ${err}`);
      expect((await t.api("GET", "/v1/sandboxes/held")).body.phase).toBe("Provisioning");
      p.kill("SIGINT");
      expect(await exit, err).toBe(130);
      expect(out).toBe("");
      const said = err.trim().split("\n").filter((l) => l.startsWith("sandgate:"));
      expect(said).toEqual([`sandgate: interrupted: sandbox "held" goes on being created; to remove it: sandgate --home ${t.home.dir} sandbox delete held`]);
      expect(err.trimEnd().split("\n").at(-1)).toBe(said[0]);
    } finally {
      release();
      driver.gate = undefined;
    }
    await eventually(async () => ((await t.api("GET", "/v1/sandboxes/held")).body.phase === "Ready" ? true : undefined), 120_000, "held to be Ready");
    expect((await cli([...home, "sandbox", "delete", "held"])).code).toBe(0);
  });

  it("messages (issue 31, item 10): an event's detail says its reason once", async () => {
    /** Each event's DETAIL cell by the CHANGE it made. */
    const details = async (name: string): Promise<Map<string, string>> => {
      const r = await cli([...home, "sandbox", "events", name]);
      expect(r.code, r.stderr).toBe(0);
      const [head, ...rows] = r.stdout.trimEnd().split("\n");
      const at = head!.indexOf("DETAIL");
      return new Map(rows.flatMap((l) => {
        const change = /(\S+ → \S+)/.exec(l)?.[1];
        return change === undefined ? [] : [[change, l.slice(at)] as const];
      }));
    };
    // A failed launch: its message is the reason's detail.
    driver.missingImages.add("gone:1");
    expect((await cli([...home, "sandbox", "create", "ev-img", "--image", "gone:1"])).code).toBe(1);
    expect((await details("ev-img")).get("Provisioning → Error")).toBe("ProvisioningFailed: No such image: gone:1");
    // A workload that exits during start-up: its last output, once.
    const verify = vi.spyOn(driver, "verify").mockResolvedValueOnce({ ready: false, checks: [], exited: { exitCode: 3, output: ["first line", "to stderr"] } });
    expect((await cli([...home, "sandbox", "create", "ev-exit"])).code).toBe(1);
    verify.mockRestore();
    expect((await details("ev-exit")).get("Provisioning → Error")).toBe("WorkloadExited (exit code 3): exited during start-up; last output: first line | to stderr");

    // A stop the gateway made (--ttl): its message names the reason.
    expect((await cli([...home, "sandbox", "create", "ev-ttl", "--ttl", "1", "--no-wait"])).code).toBe(0);
    await eventually(async () => ((await t.api("GET", "/v1/sandboxes/ev-ttl")).body.phase === "Stopped" ? true : undefined), 120_000, "ev-ttl stopped by its TTL");
    const ttl = await details("ev-ttl");
    expect(ttl.get("Ready → Stopping")).toMatch(/^stopped by the gateway: TtlExpired: its TTL of 1s ran out at \S+$/);
    expect(ttl.get("Stopping → Stopped")).toMatch(/^TtlExpired: its TTL of 1s ran out at \S+: containers removed; workspace kept$/);

    // A failure the monitor proved: its message starts with the reason's code.
    expect((await cli([...home, "sandbox", "create", "ev-mon"])).code).toBe(0);
    const s = (await t.gw.store.get("ev-mon"))!;
    await t.gw.store.transition(s.id, {
      expect: { phase: "Ready", generation: 1 },
      next: { phase: "Error", generation: 1, reason: { code: "WorkloadExited", exitCode: 3, detail: "finished at 2026-12-03T13:16:36Z" } },
      message: "WorkloadExited: proven by inspect",
    });
    expect((await details("ev-mon")).get("Ready → Error")).toBe("WorkloadExited (exit code 3): finished at 2026-12-03T13:16:36Z: proven by inspect");
  });

  it("docker habits (issue 31, item 11): stop, start and rm take several names, rm -f, inspect; a failure is reported and the rest still done", async () => {
    for (const n of ["ha", "hb", "hc"]) expect((await cli([...home, "sandbox", "create", n])).code).toBe(0);
    const inspect = await cli([...home, "sandbox", "inspect", "ha", "--json"]);
    expect([inspect.code, JSON.parse(inspect.stdout).name]).toEqual([0, "ha"]);

    const stop = await cli([...home, "sandbox", "stop", "ha", "never", "hb"]);
    expect(stop.code).toBe(4);
    expect(stop.stdout).toBe("ha  Stopped  generation 1\nhb  Stopped  generation 1\n");
    // (Progress lines besides: "Ready → Stopping"…)
    expect(stop.stderr.trim().split("\n").filter((l) => l.startsWith("sandgate:"))).toEqual([expect.stringMatching(/^sandgate: .*never/)]);

    const start = await cli([...home, "sandbox", "start", "ha", "hb"]);
    expect(start.code, start.stderr).toBe(0);
    expect(start.stdout.trim().split("\n").map((l) => l.split(/\s+/).slice(0, 2).join(" "))).toEqual(["ha Ready", "hb Ready"]);

    const rm = await cli([...home, "sandbox", "rm", "-f", "ha", "hb", "hc"]);
    expect([rm.code, rm.stdout]).toEqual([0, "ha  deleted\nhb  deleted\nhc  deleted\n"]);
    expect((await cli([...home, "sandbox", "list", "-q"])).stdout.split("\n")).not.toContain("ha");

    // A secret that is not there is already deleted, as a sandbox is.
    const secret = await cli([...home, "secret", "delete", "never-set"]);
    expect([secret.code, secret.stdout, secret.stderr]).toEqual([0, "secret never-set already deleted (there is no such secret)\n", ""]);
  });

  it("item 11: exec -t (and connect) with stdin not a TTY: an error saying so (exit 2), never lost output", async () => {
    await cli([...home, "sandbox", "create", "tty"]);
    for (const args of [["sandbox", "exec", "tty", "-t", "--", "echo", "hi"], ["sandbox", "connect", "tty"]]) {
      const r = await cli([...home, ...args], {}, "some input\n");
      expect(r.code, args.join(" ")).toBe(2);
      expect(r.stdout).toBe("");
      expect(oneLine(r)).toBe("sandgate: the input is not a TTY: -t (and connect) need a terminal on stdin; drop -t to pipe input");
    }
  });

  it("item 10: policy get prints the YAML the user wrote (comments and all); --json the parsed policy", async () => {
    const yaml = "# our one API\nversion: 1\nnetwork:\n  rules:\n    - name: api   # the only one\n      endpoints:\n        - { host: api.example.com, port: 443, protocol: https }\n";
    expect((await cli([...home, "sandbox", "create", "pol", "--policy", file("pol.yaml", yaml)])).code).toBe(0);
    const r = await cli([...home, "policy", "get", "pol"]);
    expect(r.code).toBe(0);
    const [rev, boundary, ...rest] = r.stdout.split("\n");
    expect(rev).toMatch(/^# revision 1, accepted \d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ$/);
    expect(boundary).toMatch(/^# boundary: /);
    expect(rest.join("\n")).toBe(yaml);
    // What it prints is a policy file again.
    expect((await cli([...home, "policy", "set", "pol", "--policy", file("back.yaml", r.stdout)])).code).toBe(0);
    const j = await cli([...home, "policy", "get", "pol", "--json"]);
    const body = JSON.parse(j.stdout);
    expect(body).toMatchObject({ revision: 2, source: r.stdout, policy: { version: 1, network: { rules: [{ name: "api" }] } } });
    expect(body.createdAt).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/);
  });

  it("item 10: one human time format in tables; RFC 3339 in JSON; container ids only for the live generation", async () => {
    await cli([...home, "sandbox", "create", "tm"]);
    const HUMAN = /\d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ/;
    const events = await cli([...home, "sandbox", "events", "tm"]);
    expect(events.stdout.split("\n")[1]).toMatch(new RegExp(`^\\d+\\s+${HUMAN.source}\\s+1\\s+phase`));
    const list = await cli([...home, "sandbox", "list"]);
    expect(list.stdout).toMatch(new RegExp(`\\ntm\\s+Ready\\s+1\\s+-\\s+\\S+\\s+\\S+\\s+${HUMAN.source}`));
    const live = await cli([...home, "sandbox", "get", "tm"]);
    expect(live.stdout).toMatch(new RegExp(`^created\\s+${HUMAN.source}$`, "m"));
    expect(live.stdout).toMatch(/^workload\s+\S+ started /m);
    const json = JSON.parse((await cli([...home, "sandbox", "get", "tm", "--json"])).stdout);
    for (const t of [json.createdAt, json.updatedAt]) expect(t).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/);

    await cli([...home, "sandbox", "stop", "tm"]);
    const stopped = await cli([...home, "sandbox", "get", "tm"]);
    expect(stopped.stdout).toMatch(/^workload\s+-$/m);
    expect(stopped.stdout).toMatch(/^supervisor\s+-$/m);
    expect((await cli([...home, "sandbox", "list"])).stdout).toMatch(/\ntm\s+Stopped\s+1\s+-\s+-\s+-\s/);

    // A generation that ended in Error keeps its runtime record (its teardown owed), but its containers are not live.
    await cli([...home, "sandbox", "create", "tm-err"]);
    const s = (await t.gw.store.get("tm-err"))!;
    expect(s.runtime).not.toBeNull();
    await t.gw.store.transition(s.id, { expect: { phase: "Ready", generation: 1 }, next: { phase: "Error", generation: 1, reason: { code: "WorkloadExited", exitCode: 3 } } });
    expect((await t.gw.store.get("tm-err"))!.runtime).not.toBeNull();
    const ended = await cli([...home, "sandbox", "get", "tm-err"]);
    expect(ended.stdout).toMatch(/^phase\s+Error$/m);
    expect(ended.stdout).toMatch(/^workload\s+-$/m);
    expect(ended.stdout).toMatch(/^supervisor\s+-$/m);
  });
});

describe("item 10: bare commands print help on stdout", () => {
  it("sandgate and sandgate sandbox: help on stdout, exit 0, nothing on stderr", async () => {
    for (const args of [[], ["sandbox"], ["policy"]]) {
      const r = await cli(args);
      expect([r.code, r.stderr], args.join(" ")).toEqual([0, ""]);
      expect(r.stdout).toMatch(/^Usage: sandgate/);
    }
  });
});
