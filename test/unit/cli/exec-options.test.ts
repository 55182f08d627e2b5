// Exec beyond its command, through the real API and the real CLI on the in-memory
// driver (TEST DOUBLE): -e/--env-file/-w/-u reach the runtime as asked (and -u only as
// the workload's own user), signals and --timeout end the command with 128+n and 124,
// --detach and exec-status, and the bounded table of detached execs.
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import WebSocket from "ws";
import { CLI_ARGS, cli, type CliRun } from "../../support/cli-runner.js";
import { MemoryDriver } from "../../support/memory-driver.js";
import { eventually, startTestGateway, type TestGateway } from "../../support/gateway-fixture.js";

let t: TestGateway;
let driver: MemoryDriver;
let home: string[];
let dir: string;

beforeAll(async () => {
  driver = new MemoryDriver();
  t = await startTestGateway(driver, { service: { detachedExecs: 3 } });
  home = ["--home", t.home.dir];
  dir = mkdtempSync(join(tmpdir(), "sg-exec-opts-"));
  for (const name of ["ex", "fixed"]) {
    const policy = name === "fixed" ? 'version: 1\nprocess:\n  user: "1000:1000"\n' : undefined;
    expect((await t.api("POST", "/v1/sandboxes", { name, ...(policy ? { policy } : {}) })).status).toBe(201);
    await eventually(async () => ((await t.api("GET", `/v1/sandboxes/${name}`)).body.phase === "Ready" ? true : undefined), 10_000, `${name} Ready`);
  }
});

afterAll(async () => {
  await t.close();
  rmSync(dir, { recursive: true, force: true });
});

/** One line on stderr, no stack trace. */
function oneLine(r: CliRun): string {
  const lines = r.stderr.trim().split("\n");
  expect(lines, r.stderr).toHaveLength(1);
  expect(r.stderr).not.toMatch(/\bat .+:\d+:\d+/);
  return lines[0]!;
}

interface WsRun {
  stdout: string;
  exit: number | undefined;
  frames: Record<string, unknown>[];
  /** HTTP status when the upgrade was refused. */
  refused?: { status: number; body: { error: { code: string; message: string } } };
}

/** An exec over the WebSocket; `onOpen` may send control frames. */
function wsExec(name: string, params: [string, string][], onOpen?: (ws: WebSocket, out: () => string) => void): Promise<WsRun> {
  const q = new URLSearchParams(params);
  if (!q.has("tty")) q.set("tty", "0");
  const ws = new WebSocket(t.wsUrl(`/v1/sandboxes/${name}/exec?${q.toString()}`), { headers: { authorization: `Bearer ${t.token}` } });
  const run: WsRun = { stdout: "", exit: undefined, frames: [] };
  return new Promise((resolve, reject) => {
    ws.on("unexpected-response", (_req, res) => {
      let body = "";
      res.on("data", (b: Buffer) => (body += b.toString()));
      res.on("end", () => resolve({ ...run, refused: { status: res.statusCode ?? 0, body: JSON.parse(body) } }));
    });
    ws.on("open", () => {
      ws.send(JSON.stringify({ type: "eof" }));
      onOpen?.(ws, () => run.stdout);
    });
    ws.on("message", (d: Buffer, bin: boolean) => {
      if (bin) {
        if (d[0] === 1) run.stdout += d.subarray(1).toString();
        return;
      }
      const f = JSON.parse(d.toString()) as Record<string, unknown>;
      run.frames.push(f);
      if (f.type === "exit") run.exit = f.code as number;
    });
    ws.on("close", () => resolve(run));
    ws.on("error", (err) => (run.refused ? undefined : reject(err)));
  });
}

describe("exec options over the API", () => {
  it("env, workdir and user reach the runtime as asked; the exec does not get the gateway's environment", async () => {
    const r = await wsExec("ex", [["cmd", "sg-env"], ["env", "A=1"], ["env", "B=x=y z"], ["workdir", "/sandbox/sub dir"], ["user", "2000000000"]]);
    expect(r.exit).toBe(0);
    // The user is the workload's full identity, even when asked by uid alone.
    expect(r.stdout).toBe("cwd=/sandbox/sub dir\nuser=2000000000:2000000000\nA=1\nB=x=y z\n");
    const plain = await wsExec("ex", [["cmd", "sg-env"]]);
    expect(plain.stdout).toBe("cwd=(default)\nuser=(default)\n");
  });

  it("refuses root and any other user, and a user the policy does not name, with a 400 that says why; nothing runs", async () => {
    const before = driver.execs;
    for (const [name, user, why] of [
      ["ex", "0", 'user "0": root (uid 0) is never allowed; exec runs as the workload\'s user 2000000000:2000000000 only'],
      ["ex", "0:0", 'user "0:0": root (uid 0) is never allowed; exec runs as the workload\'s user 2000000000:2000000000 only'],
      ["ex", "1000", 'user "1000": any other uid or gid would be an identity of the host; exec runs as the workload\'s user 2000000000:2000000000 only'],
      ["ex", "2000000000:0", 'user "2000000000:0": any other uid or gid would be an identity of the host; exec runs as the workload\'s user 2000000000:2000000000 only'],
      ["ex", "root", 'user "root": expected a numeric uid or uid:gid; exec runs as the workload\'s user 2000000000:2000000000 only'],
      // The policy fixes the user: -u cannot override it, not even with the gateway's own workload id.
      ["fixed", "2000000000", 'user "2000000000": any other uid or gid would be an identity of the host; exec runs as the workload\'s user 1000:1000 only'],
      ["fixed", "0", 'user "0": root (uid 0) is never allowed; exec runs as the workload\'s user 1000:1000 only'],
    ] as const) {
      const r = await wsExec(name, [["cmd", "sg-env"], ["user", user]]);
      expect(r.refused, `${name} -u ${user}`).toEqual({ status: 400, body: { error: { code: "invalid_request", message: why } } });
    }
    expect(driver.execs).toBe(before);
    const ok = await wsExec("fixed", [["cmd", "sg-env"], ["user", "1000"]]);
    expect(ok.stdout).toBe("cwd=(default)\nuser=1000:1000\n");
  });

  it("refuses bad env, workdir and timeout values with a 400 naming them", async () => {
    for (const [k, v, why] of [
      ["env", "NOPE", 'env: expected KEY=VALUE, got "NOPE"'],
      ["env", "A B=1", 'env: "A B" is not a valid variable name (letters, digits and \'_\', not starting with a digit) in "A B=1"; expected KEY=VALUE'],
      ["workdir", "relative", 'workdir: working directory "relative": expected an absolute path (starting with "/")'],
      ["timeout", "soon", 'timeout must be a duration from 1 s to 30 d (e.g. 60, 90s, 5m, 2h, 7d); got "soon"'],
      ["timeout", "0", 'timeout must be a duration from 1 s to 30 d (e.g. 60, 90s, 5m, 2h, 7d); got "0"'],
    ] as const) {
      const r = await wsExec("ex", [["cmd", "true"], [k, v]]);
      expect(r.refused, `${k}=${v}`).toEqual({ status: 400, body: { error: { code: "invalid_request", message: why } } });
    }
    const many = await wsExec("ex", [["cmd", "true"], ...Array.from({ length: 257 }, (_, i): [string, string] => ["env", `V${i}=`])]);
    expect(many.refused?.body.error.message).toMatch(/^env: the exec environment is \d+ bytes in 257 variables; the limit is 8192 bytes and 256 variables$/);
  });

  it("a signal frame reaches the command's process group; its exit is 128+n", async () => {
    driver.signals.length = 0;
    const r = await wsExec("ex", [["cmd", "sleep"]], (ws) => ws.send(JSON.stringify({ type: "signal", signal: "INT" })));
    expect(r.exit).toBe(130);
    expect(driver.signals).toEqual(["INT"]);
    const q = await wsExec("ex", [["cmd", "sleep"]], (ws) => ws.send(JSON.stringify({ type: "signal", signal: "QUIT" })));
    expect(q.exit).toBe(131);
  });

  it("a runtime that cannot signal answers signal-failed, and the session stays up", async () => {
    driver.canSignal = false;
    try {
      const r = await wsExec("ex", [["cmd", "sleep"]], (ws) => {
        ws.send(JSON.stringify({ type: "signal", signal: "INT" }));
        ws.on("message", (d: Buffer, bin: boolean) => {
          if (!bin && JSON.parse(d.toString()).type === "signal-failed") ws.close();
        });
      });
      expect(r.frames).toContainEqual({ type: "signal-failed", signal: "INT", message: "this runtime cannot signal an exec's command" });
      expect(r.exit).toBeUndefined();
      const bad = await wsExec("ex", [["cmd", "sleep"]], (ws) => {
        ws.send(JSON.stringify({ type: "signal", signal: "USR1" }));
        ws.on("message", (d: Buffer, bin: boolean) => {
          if (!bin && JSON.parse(d.toString()).type === "error") ws.close();
        });
      });
      expect(bad.frames).toContainEqual({ type: "error", message: "bad control frame" });
    } finally {
      driver.canSignal = true;
    }
  });

  it("--timeout: SIGTERM at expiry, exit 124; a command that ignores TERM gets KILL after the grace", async () => {
    driver.signals.length = 0;
    const r = await wsExec("ex", [["cmd", "sleep"], ["timeout", "1"]]);
    expect(r.exit).toBe(124);
    expect(driver.signals).toEqual(["TERM"]);
    driver.signals.length = 0;
    const stubborn = await wsExec("ex", [["cmd", "sleep"], ["cmd", "ignore-term"], ["timeout", "1s"]]);
    expect(stubborn.exit).toBe(124);
    expect(driver.signals).toEqual(["TERM", "KILL"]);
    // A command that ends in time keeps its own code.
    expect((await wsExec("ex", [["cmd", "exit"], ["cmd", "3"], ["timeout", "60"]])).exit).toBe(3);
  }, 30_000);

  it("--timeout still ends the command when its client went away first", async () => {
    driver.signals.length = 0;
    await wsExec("ex", [["cmd", "sleep"], ["timeout", "1"]], (ws, out) => {
      // Gone as soon as the command runs.
      const iv = setInterval(() => {
        if (out().includes("sleeping")) {
          clearInterval(iv);
          ws.terminate();
        }
      }, 10);
    });
    await eventually(() => (driver.signals.includes("TERM") ? true : undefined), 10_000, "the timeout's SIGTERM");
  });

  it("--timeout on a runtime that cannot signal ends the session: exit 124", async () => {
    driver.canSignal = false;
    try {
      const r = await wsExec("ex", [["cmd", "sleep"], ["timeout", "1"]]);
      expect(r.exit).toBe(124);
    } finally {
      driver.canSignal = true;
    }
  });

  it("an open session is activity (sandbox get shows it); its end closes it", async () => {
    let seen: unknown;
    await wsExec("ex", [["cmd", "sleep"]], (ws, out) => {
      const iv = setInterval(() => {
        if (!out().includes("sleeping")) return;
        clearInterval(iv);
        void t.api("GET", "/v1/sandboxes/ex").then((r) => {
          seen = r.body.expiry;
          ws.send(JSON.stringify({ type: "signal", signal: "TERM" }));
        });
      }, 10);
    });
    expect(seen).toMatchObject({ openSessions: 1, lastActivityAt: expect.any(String) });
    await eventually(async () => ((await t.api("GET", "/v1/sandboxes/ex")).body.expiry.openSessions === 0 ? true : undefined), 5_000, "no session open");
  });
});

describe("detached execs over the API", () => {
  it("starts a command, answers its id, and its status: running, then its exit code (124 when its timeout ended it)", async () => {
    const started = await t.api("POST", "/v1/sandboxes/ex/execs", { cmd: ["sleep"], timeout: 1 });
    expect(started.status).toBe(201);
    expect(started.body).toMatchObject({ id: expect.stringMatching(/^ex_[0-9a-f]{16}$/), sandbox: "ex", cmd: ["sleep"], state: "running", exitCode: null });
    const id = started.body.id as string;
    expect((await t.api("GET", `/v1/sandboxes/ex/execs/${id}`)).body.state).toBe("running");
    const done = await eventually(async () => {
      const r = await t.api("GET", `/v1/sandboxes/ex/execs/${id}`);
      return r.body.state === "exited" ? r.body : undefined;
    }, 15_000, "the detached exec to end");
    expect(done).toMatchObject({ state: "exited", exitCode: 124, timedOut: true, endedAt: expect.any(String) });
    const quick = await t.api("POST", "/v1/sandboxes/ex/execs", { cmd: ["exit", "3"], env: { A: "1" }, workdir: "/tmp", user: "2000000000:2000000000" });
    expect(driver.execOptions.at(-1)).toMatchObject({ cmd: ["exit", "3"], env: { A: "1" }, cwd: "/tmp", user: "2000000000:2000000000", tty: false });
    await eventually(async () => ((await t.api("GET", `/v1/sandboxes/ex/execs/${quick.body.id}`)).body.exitCode === 3 ? true : undefined), 5_000, "exit 3");
    expect((await t.api("GET", "/v1/sandboxes/ex/execs")).body.execs.map((e: { id: string }) => e.id)).toEqual(expect.arrayContaining([id, quick.body.id]));
  }, 30_000);

  it("refuses bad input the way attached execs do, and answers 400/404 for a bad or unknown id", async () => {
    expect((await t.api("POST", "/v1/sandboxes/ex/execs", { cmd: ["true"], user: "0" })).body.error.message).toMatch(/^user "0": root \(uid 0\) is never allowed/);
    expect((await t.api("POST", "/v1/sandboxes/ex/execs", { cmd: [] })).status).toBe(400);
    expect((await t.api("POST", "/v1/sandboxes/ex/execs", { cmd: ["true"], tty: true })).status).toBe(400);
    const bad = await t.api("GET", "/v1/sandboxes/ex/execs/nope");
    expect(bad).toEqual({ status: 400, body: { error: { code: "invalid_request", message: 'invalid exec id "nope": expected ex_ and 16 hex digits, as exec --detach printed' } } });
    const unknown = await t.api("GET", "/v1/sandboxes/ex/execs/ex_0000000000000000");
    expect(unknown.status).toBe(404);
    expect(unknown.body.error.message).toBe('no detached exec "ex_0000000000000000" in sandbox "ex" (ended ones are kept for an hour; a gateway restart forgets them)');
    expect((await t.api("POST", "/v1/sandboxes/nope/execs", { cmd: ["true"] })).status).toBe(404);
  });

  it("the table is bounded: an ended entry makes room; when all are running, 409 and nothing starts", async () => {
    expect((await t.api("POST", "/v1/sandboxes", { name: "table" })).status).toBe(201);
    await eventually(async () => ((await t.api("GET", "/v1/sandboxes/table")).body.phase === "Ready" ? true : undefined), 10_000, "Ready");
    const ended = await t.api("POST", "/v1/sandboxes/table/execs", { cmd: ["exit", "0"] });
    await eventually(async () => ((await t.api("GET", `/v1/sandboxes/table/execs/${ended.body.id}`)).body.state === "exited" ? true : undefined), 5_000, "ended");
    const running: string[] = [];
    for (let i = 0; i < 3; i++) {
      const r = await t.api("POST", "/v1/sandboxes/table/execs", { cmd: ["sleep"] });
      expect(r.status, JSON.stringify(r.body)).toBe(201);
      running.push(r.body.id);
    }
    // The ended one made room for the third.
    expect((await t.api("GET", `/v1/sandboxes/table/execs/${ended.body.id}`)).status).toBe(404);
    const before = driver.execs;
    const full = await t.api("POST", "/v1/sandboxes/table/execs", { cmd: ["sleep"] });
    expect(full.status).toBe(409);
    expect(full.body.error.message).toBe('sandbox "table" has 3 detached execs running, the limit (gateway start --detached-execs); wait for one to end (sandgate sandbox exec-status table)');
    expect(driver.execs).toBe(before);
    // Deleting the sandbox drops its table; the commands went with its containers.
    expect((await t.api("DELETE", "/v1/sandboxes/table")).status).toBe(202);
    await eventually(async () => ((await t.api("GET", "/v1/sandboxes/table")).status === 404 ? true : undefined), 10_000, "deleted");
    expect((await t.api("GET", "/v1/status")).body.execs).toMatchObject({ detachedPerSandbox: 3 });
  });
});

describe("the CLI", () => {
  it("-e, --env-file and -w reach the command, -e over the file; KEY alone from the CLI's environment", async () => {
    const file = join(dir, "vars.env");
    writeFileSync(file, "# settings\nA=from-file\nB=file b\nFROM_SHELL\n");
    const r = await cli([...home, "sandbox", "exec", "ex", "--env-file", file, "-e", "A=from-flag", "-w", "/sandbox/app", "-u", "2000000000:2000000000", "--", "sg-env"], { FROM_SHELL: "shell value" });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toBe("cwd=/sandbox/app\nuser=2000000000:2000000000\nA=from-flag\nB=file b\nFROM_SHELL=shell value\n");
  });

  it("never passes its own environment (the token) unless asked", async () => {
    const r = await cli([...home, "sandbox", "exec", "ex", "--", "sg-env"], { SANDGATE_TOKEN: t.token, SECRET_THING: "s3cret" });
    expect(r.stdout).toBe("cwd=(default)\nuser=(default)\n");
  });

  it("bad -e, --env-file, -w, -u and --timeout: one line, exit 2, nothing runs", async () => {
    const before = driver.execs;
    const bad = join(dir, "bad.env");
    writeFileSync(bad, "A=1\nnot valid\n");
    for (const [args, line] of [
      [["-e", "NOPE"], /^sandgate: option '-e, --env <KEY=VALUE>' argument 'NOPE' is invalid\. expected KEY=VALUE, got "NOPE" \(run with --help for usage\)$/],
      [["--env-file", bad], new RegExp(`^sandgate: --env-file ${bad} line 2: "not valid" is not a valid variable name`)],
      [["-w", "rel"], /^sandgate: -w: working directory "rel": expected an absolute path/],
      [["-u", "0"], /^sandgate: user "0": root \(uid 0\) is never allowed; exec runs as the workload's user 2000000000:2000000000 only$/],
      [["--timeout", "forever"], /--timeout must be a duration from 1 s to 30 d/],
      [["--detach", "-t"], /^sandgate: --detach runs the command with no terminal and no input: drop -t and -i$/],
    ] as const) {
      const r = await cli([...home, "sandbox", "exec", "ex", ...args, "--", "sg-env"]);
      expect(r.code, args.join(" ")).toBe(2);
      expect(oneLine(r)).toMatch(line);
    }
    expect(driver.execs).toBe(before);
  });

  it("a missing --env-file: node itself looks at --env-file anywhere in argv (Node 20, and Node 24 still): its message, exit 9", async () => {
    const missing = join(dir, "missing.env");
    const r = await cli([...home, "sandbox", "exec", "ex", "--env-file", missing, "--", "sg-env"]);
    expect([r.code, r.stderr]).toEqual([9, `${process.execPath}: ${missing}: not found\n`]);
  });

  it("--timeout ends the command with 124", async () => {
    const r = await cli([...home, "sandbox", "exec", "ex", "--timeout", "1s", "--", "sleep"]);
    expect(r.code).toBe(124);
  });

  it("--detach prints the exec id; exec-status shows it running, then with its exit code", async () => {
    const r = await cli([...home, "sandbox", "exec", "ex", "--detach", "--timeout", "1", "--", "sleep"]);
    expect(r.code, r.stderr).toBe(0);
    const id = r.stdout.trim();
    expect(id).toMatch(/^ex_[0-9a-f]{16}$/);
    const running = await cli([...home, "sandbox", "exec-status", "ex", id]);
    expect(running.stdout).toMatch(/^state\s+(running|exited 124 \(timed out\))$/m);
    await eventually(async () => ((await cli([...home, "sandbox", "exec-status", "ex", id, "--json"])).stdout.includes('"exitCode": 124') ? true : undefined), 20_000, "exit 124 in exec-status");
    const all = await cli([...home, "sandbox", "exec-status", "ex"]);
    expect(all.stdout).toMatch(/^ID\s+STATE\s+STARTED\s+ENDED\s+COMMAND$/m);
    expect(all.stdout).toContain(`${id}  exited 124 (timed out)`);
    const json = await cli([...home, "sandbox", "exec", "ex", "--detach", "--json", "--", "exit", "0"]);
    expect(JSON.parse(json.stdout)).toMatchObject({ sandbox: "ex", cmd: ["exit", "0"] });
    const unknown = await cli([...home, "sandbox", "exec-status", "ex", "ex_0000000000000000"]);
    expect(unknown.code).toBe(4);
  }, 60_000);
});

/** The CLI as a process the test signals: resolves with its exit code, once it printed `ready`. */
function spawnExec(args: string[], env: Record<string, string> = {}): { started: Promise<void>; exited: Promise<{ code: number | null; stderr: string }>; kill(sig: NodeJS.Signals): void } {
  const p = spawn(CLI_ARGS[0]!, [...CLI_ARGS.slice(1), ...home, "sandbox", "exec", ...args], { env: { ...process.env, SANDGATE_URL: undefined, SANDGATE_TOKEN: undefined, ...env }, stdio: ["pipe", "pipe", "pipe"] });
  let out = "";
  let err = "";
  const started = new Promise<void>((resolve) => {
    p.stdout.on("data", (b: Buffer) => {
      out += b.toString();
      // The command's first output has come through the open session: the CLI forwards signals now.
      if (out.includes("sleeping")) resolve();
    });
  });
  p.stderr.on("data", (b: Buffer) => (err += b.toString()));
  const exited = new Promise<{ code: number | null; stderr: string }>((resolve) => p.on("close", (code) => resolve({ code, stderr: err })));
  return { started, exited, kill: (sig) => p.kill(sig) };
}

describe("signals sent to the CLI go to the command", () => {
  it("Ctrl-C (SIGINT): the command gets INT, the CLI exits 130", async () => {
    driver.signals.length = 0;
    const x = spawnExec(["ex", "--", "sleep"]);
    await x.started;
    x.kill("SIGINT");
    expect((await x.exited).code).toBe(130);
    expect(driver.signals).toEqual(["INT"]);
  });

  it("SIGTERM, SIGHUP and SIGQUIT are forwarded too: 143, 129, 131", async () => {
    for (const [sig, code] of [["SIGTERM", 143], ["SIGHUP", 129], ["SIGQUIT", 131]] as const) {
      driver.signals.length = 0;
      const x = spawnExec(["ex", "--", "sleep"]);
      await x.started;
      x.kill(sig);
      expect((await x.exited).code, sig).toBe(code);
      expect(driver.signals).toEqual([sig.slice(3)]);
    }
  }, 60_000);

  it("a command that ignores Ctrl-C: the third one gives up waiting (exit 130, saying the command may still run)", async () => {
    driver.signals.length = 0;
    const x = spawnExec(["ex", "--", "sleep", "ignore-all"]);
    await x.started;
    for (let i = 1; i <= 3; i++) {
      x.kill("SIGINT");
      if (i < 3) await eventually(() => (driver.signals.length === i ? true : undefined), 10_000, `INT ${i} delivered`);
    }
    const r = await x.exited;
    expect(r.code).toBe(130);
    expect(r.stderr).toBe("sandgate: interrupted 3 times; not waiting for the command any longer (it may still run)\n");
    expect(driver.signals).toEqual(["INT", "INT"]);
  });

  it("a signal the gateway cannot deliver: one line saying so, exit 128+n", async () => {
    driver.canSignal = false;
    try {
      const x = spawnExec(["ex", "--", "sleep"]);
      await x.started;
      x.kill("SIGINT");
      const r = await x.exited;
      expect(r.code).toBe(130);
      expect(r.stderr).toBe("sandgate: SIGINT was not delivered: this runtime cannot signal an exec's command; the command may still run\n");
    } finally {
      driver.canSignal = true;
    }
  });
});
