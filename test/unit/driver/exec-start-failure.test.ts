// A command that is not in the sandbox (issue 31, item 10): Docker writes its runtime's
// error into the exec's stdout stream ("OCI runtime exec failed: ... executable file not
// found in $PATH: unknown") and records 126 or 127. The driver says it as a shell does: one
// line on stderr, `sandgate: CMD: command not found in the sandbox`, exit 127. The
// recognizer on Docker's real lines, then startExec against a FAKE engine that answers as
// dockerd does (the line in a stdout frame, or raw on a terminal; ExitCode 126 as Docker 20.10
// records a missing binary). test/integration/sandbox-exec.test.ts runs it on a real daemon.
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { EngineClient } from "../../../src/driver/docker/engine/client.js";
import { encodeFrame } from "../../../src/driver/docker/engine/demux.js";
import { startExec } from "../../../src/driver/docker/exec-session.js";
import { StartFailureWatch, execStartFailure } from "../../../src/driver/docker/exec-start-failure.js";
import type { ExecOptions, ExecSession, RuntimeRecord } from "../../../src/driver/contract.js";
import { CLI_TEST_TIMEOUT_MS, cli } from "../../support/cli-runner.js";
import { FakeEngine, UPGRADED, reply } from "../../support/fake-engine.js";
import { eventually, startTestGateway } from "../../support/gateway-fixture.js";
import { MemoryDriver } from "../../support/memory-driver.js";

/** Docker's lines as daemons write them (runc 1.1+, runc 1.0 as in Docker 20.10, crun). */
const NOT_FOUND = 'OCI runtime exec failed: exec failed: unable to start container process: exec: "nosuchcmd": executable file not found in $PATH: unknown\r\n';
const NOT_FOUND_RUNC_1_0 = 'OCI runtime exec failed: exec failed: container_linux.go:380: starting container process caused: exec: "nosuchcmd": executable file not found in $PATH: unknown\r\n';
const NOT_FOUND_CRUN = "OCI runtime exec failed: exec failed: executable file `nosuchcmd` not found in $PATH: No such file or directory: unknown\r\n";
const NO_PATH = 'OCI runtime exec failed: exec failed: unable to start container process: exec: "/opt/nope": stat /opt/nope: no such file or directory: unknown\r\n';
const DENIED = 'OCI runtime exec failed: exec failed: unable to start container process: exec: "/etc/passwd": permission denied: unknown\r\n';
const NO_CWD = 'OCI runtime exec failed: exec failed: unable to start container process: chdir to cwd ("/nope") set in config.json failed: no such file or directory: unknown\r\n';

describe("execStartFailure: Docker's line for a command that never started", () => {
  it.each<[string, string, string, string, number]>([
    ["not on the PATH", NOT_FOUND, "nosuchcmd", "sandgate: nosuchcmd: command not found in the sandbox\n", 127],
    ["not on the PATH (runc 1.0, Docker 20.10)", NOT_FOUND_RUNC_1_0, "nosuchcmd", "sandgate: nosuchcmd: command not found in the sandbox\n", 127],
    ["not on the PATH (crun)", NOT_FOUND_CRUN, "nosuchcmd", "sandgate: nosuchcmd: command not found in the sandbox\n", 127],
    ["a path that is not there", NO_PATH, "/opt/nope", "sandgate: /opt/nope: no such file in the sandbox\n", 127],
    ["a file that cannot be run", DENIED, "/etc/passwd", "sandgate: /etc/passwd: permission denied in the sandbox\n", 126],
    // Not about the command: Docker's words, without its prefixes.
    ["a working directory that is not there", NO_CWD, "ls", 'sandgate: ls: could not be started in the sandbox: chdir to cwd ("/nope") set in config.json failed: no such file or directory\n', 126],
    ["without the \\r", NOT_FOUND.replace("\r", ""), "nosuchcmd", "sandgate: nosuchcmd: command not found in the sandbox\n", 127],
  ])("%s", (_what, output, cmd, line, exitCode) => {
    expect(execStartFailure(output, cmd)).toEqual({ line, exitCode });
  });

  it("is nothing else: a command's own output, two lines, more after the line", () => {
    for (const output of ["hello\n", "", "OCI runtime exec failed", `${NOT_FOUND}more\n`, `x${NOT_FOUND}`, `${NOT_FOUND}${NOT_FOUND}`]) {
      expect(execStartFailure(output, "nosuchcmd"), JSON.stringify(output)).toBeNull();
    }
  });
});

describe("StartFailureWatch: holds stdout only while it could be Docker's line", () => {
  const watch = (): { w: StartFailureWatch; out: () => string } => {
    const got: Buffer[] = [];
    return { w: new StartFailureWatch((b) => got.push(b)), out: () => Buffer.concat(got).toString() };
  };

  it("Docker's line, however it is cut, is held and dropped; the failure is returned", () => {
    const { w, out } = watch();
    for (const ch of NOT_FOUND) w.push(Buffer.from(ch));
    expect(out()).toBe("");
    expect(w.end("nosuchcmd")).toEqual({ line: "sandgate: nosuchcmd: command not found in the sandbox\n", exitCode: 127 });
    expect(out()).toBe("");
  });

  it("a command's output passes at once when it cannot be the line, whole and in order", () => {
    const { w, out } = watch();
    w.push(Buffer.from("OCI"));
    expect(out()).toBe(""); // could still be
    w.push(Buffer.from(" runtime rocks\n"));
    expect(out()).toBe("OCI runtime rocks\n");
    w.push(Buffer.from("next\n"));
    expect(out()).toBe("OCI runtime rocks\nnext\n");
    expect(w.end("x")).toBeNull();
  });

  it("a command that prints the line and more, or writes to stderr, keeps every byte", () => {
    const more = watch();
    more.w.push(Buffer.from(NOT_FOUND));
    more.w.push(Buffer.from("and then some\n"));
    expect(more.w.end("nosuchcmd")).toBeNull();
    expect(more.out()).toBe(`${NOT_FOUND}and then some\n`);
    const released = watch();
    released.w.push(Buffer.from(NOT_FOUND));
    released.w.release(); // it wrote on stderr: it started
    expect(released.out()).toBe(NOT_FOUND);
    expect(released.w.end("nosuchcmd")).toBeNull();
    expect(released.out()).toBe(NOT_FOUND);
  });

  it("a line longer than any of Docker's is passed on, not held to the end", () => {
    const { w, out } = watch();
    w.push(Buffer.from(`OCI runtime exec failed: ${"x".repeat(5000)}`));
    expect(out()).toMatch(/^OCI runtime exec failed: x+$/);
  });
});

describe("startExec: a command that never started", () => {
  let fake: FakeEngine;
  let client: EngineClient;
  beforeEach(async () => {
    fake = await FakeEngine.start();
    client = new EngineClient({ socketPath: fake.socketPath });
  });
  afterEach(async () => {
    await client.close();
    await fake.close();
  });

  /** Every exec of any container: a stream of `frames`, then its end; Docker records exit `code`. */
  function answer(frames: Buffer[], code: number): void {
    fake.on("POST", /^\/containers\/[^/]+\/exec$/, reply.json(201, { Id: "e1" }));
    fake.on("GET", "/exec/e1/json", reply.json(200, { ID: "e1", Running: false, ExitCode: code, Pid: 0 }));
    fake.onUpgrade("POST", "/exec/e1/start", (socket) => {
      socket.write(UPGRADED);
      for (const f of frames) socket.write(f);
      socket.end();
    });
  }

  /** An exec whose stream carries `frames` then ends, and which Docker records as exited `code`. */
  async function run(tty: boolean, frames: Buffer[], code: number): Promise<{ stdout: string; stderr: string; code: number }> {
    answer(frames, code);
    const session = await startExec(client, "c1", { cmd: ["nosuchcmd", "-x"], tty });
    session.stdin.end();
    const read = async (s: NodeJS.ReadableStream): Promise<string> => {
      let text = "";
      for await (const c of s) text += (c as Buffer).toString();
      return text;
    };
    const [stdout, stderr] = await Promise.all([read(session.stdout), read(session.stderr)]);
    return { stdout, stderr, code: await session.exitCode };
  }

  it("Docker's line on stdout is one line on stderr, exit 127 (Docker 20.10 recorded 126)", async () => {
    expect(await run(false, [encodeFrame(1, Buffer.from(NOT_FOUND))], 126)).toEqual({ stdout: "", stderr: "sandgate: nosuchcmd: command not found in the sandbox\n", code: 127 });
  });

  it("on a terminal (one raw stream) the line is the terminal's, ended \\r\\n", async () => {
    expect(await run(true, [Buffer.from(NOT_FOUND)], 127)).toEqual({ stdout: "sandgate: nosuchcmd: command not found in the sandbox\r\n", stderr: "", code: 127 });
  });

  it("a command that ran and printed such a line keeps its output and its exit code", async () => {
    const r = await run(false, [encodeFrame(1, Buffer.from(NOT_FOUND)), encodeFrame(2, Buffer.from("its own stderr\n"))], 127);
    expect(r).toEqual({ stdout: NOT_FOUND, stderr: "its own stderr\n", code: 127 });
  });

  it("through the CLI and a gateway: `sandbox exec demo -- nosuchcmd` is one line on stderr, nothing on stdout, exit 127", async () => {
    /** TEST DOUBLE: the memory driver whose execs are the Docker driver's startExec, on the FAKE engine. */
    class FakeEngineExecs extends MemoryDriver {
      override exec(record: RuntimeRecord, opts: ExecOptions): Promise<ExecSession> {
        return startExec(client, record.workload.id, opts);
      }
    }
    answer([encodeFrame(1, Buffer.from(NOT_FOUND))], 126);
    const g = await startTestGateway(new FakeEngineExecs());
    try {
      expect((await g.api("POST", "/v1/sandboxes", { name: "demo" })).status).toBe(201);
      await eventually(async () => ((await g.api("GET", "/v1/sandboxes/demo")).body.phase === "Ready" ? true : undefined), 60_000, "demo Ready");
      expect(await cli(["--home", g.home.dir, "sandbox", "exec", "demo", "--", "nosuchcmd"])).toEqual({ code: 127, stdout: "", stderr: "sandgate: nosuchcmd: command not found in the sandbox\n" });
    } finally {
      await g.close();
    }
  }, CLI_TEST_TIMEOUT_MS);
});

describe("startExec: a signal before the daemon has recorded the exec's pid", () => {
  it("an exec shown Running with no Pid yet is waited for, not taken as gone", async () => {
    const fake = await FakeEngine.start();
    const client = new EngineClient({ socketPath: fake.socketPath });
    try {
      // dockerd marks an exec Running before containerd starts it and records the pid after.
      const answers = [{ Running: true, Pid: 0, ExitCode: null }, { Running: true, Pid: 0, ExitCode: null }, { Running: false, Pid: 0, ExitCode: 0 }];
      let inspected = 0;
      fake.on("POST", /^\/containers\/[^/]+\/exec$/, reply.json(201, { Id: "e1" }));
      fake.on("GET", "/exec/e1/json", (res, ctx) => reply.json(200, { ID: "e1", ...answers[Math.min(inspected++, answers.length - 1)] })(res, ctx));
      fake.onUpgrade("POST", "/exec/e1/start", (socket) => socket.write(UPGRADED));
      const proc = { stat: () => null, pidNamespace: () => "pid:[1]" };
      const session = await startExec(client, "c1", { cmd: ["sleep", "1000"], tty: false }, 1, proc);
      // Only once the daemon says the exec ended is it gone: every "no pid yet" was looked at again.
      expect(await session.signal!("INT")).toBe("gone");
      expect(inspected).toBe(3);
      session.close();
    } finally {
      await client.close();
      await fake.close();
    }
  });
});
