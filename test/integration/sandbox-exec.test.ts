// Exec and interactive sessions on a real Docker sandbox, through the real CLI
// and the gateway's WebSocket relay: exit codes, separate stdout/stderr, stdin
// (small and large), refusal when not Ready, and `connect` under a real PTY
// (tmux) with the terminal size following a resize.

import { execFile } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CLI_COMMAND, cli } from "../support/cli-runner.js";
import { startDockerFixture, type DockerFixture } from "../support/docker-fixture.js";
import { eventually } from "../support/gateway-fixture.js";
import { cliExec, waitPhase } from "../support/sandbox-helpers.js";

const run = promisify(execFile);
const NAME = "ex";

let fx: DockerFixture;
let tmpDir: string;

/** tmux on a private server (socket in tmpDir): the test neither sees nor disturbs anyone else's sessions. */
async function tmux(...args: string[]): Promise<string> {
  const { stdout } = await run("tmux", ["-S", join(tmpDir, "tmux.sock"), "-f", "/dev/null", ...args], { timeout: 10_000 });
  return stdout;
}

beforeAll(async () => {
  tmpDir = mkdtempSync(join(tmpdir(), "sg-exec-test-"));
  fx = await startDockerFixture({ liveRestore: true, name: "exec" });
  const created = await fx.t.api("POST", "/v1/sandboxes", { name: NAME });
  if (created.status !== 201) throw new Error(`create: ${JSON.stringify(created.body)}`);
  await waitPhase(fx, NAME, "Ready");
});

afterAll(async () => {
  await tmux("kill-server").catch(() => undefined);
  await fx.close();
  rmSync(tmpDir, { recursive: true, force: true });
});

describe("sandgate sandbox exec", () => {
  it("preserves exit codes", async () => {
    expect(await cliExec(fx, NAME, ["true"])).toEqual({ code: 0, stdout: "", stderr: "" });
    expect((await cliExec(fx, NAME, ["sh", "-c", "exit 3"])).code).toBe(3);
    expect((await cliExec(fx, NAME, ["sh", "-c", "exit 255"])).code).toBe(255);
    const missing = await cliExec(fx, NAME, ["sh", "-c", "no-such-command-sg"]);
    expect(missing.code).toBe(127);
    expect(missing.stderr).toContain("no-such-command-sg");
    // A binary that does not exist never starts: Docker writes its runtime's error into the
    // stdout stream ("OCI runtime exec failed: ...") and 20.10 records 126; the driver says
    // it as a shell does, one line on stderr, exit 127 (issue 31, item 10).
    const direct = await cliExec(fx, NAME, ["no-such-binary-sg"]);
    expect(direct).toEqual({ code: 127, stdout: "", stderr: "sandgate: no-such-binary-sg: command not found in the sandbox\n" });
    const path = await cliExec(fx, NAME, ["/no/such/binary"]);
    expect(path).toEqual({ code: 127, stdout: "", stderr: "sandgate: /no/such/binary: no such file in the sandbox\n" });
  });

  it("keeps stdout and stderr apart", async () => {
    const r = await cliExec(fx, NAME, ["sh", "-c", "echo out; echo err >&2; echo out2; echo err2 >&2; exit 3"]);
    expect(r).toEqual({ code: 3, stdout: "out\nout2\n", stderr: "err\nerr2\n" });
  });

  it("relays a large stdout exactly", async () => {
    const r = await cliExec(fx, NAME, ["sh", "-c", "head -c 3000000 /dev/zero | tr '\\0' a; echo done >&2"]);
    expect(r.code).toBe(0);
    expect(r.stdout.length).toBe(3_000_000);
    expect(/^a+$/.test(r.stdout)).toBe(true);
    expect(r.stderr).toBe("done\n");
  });

  it("pipes stdin to the process and passes on EOF", async () => {
    expect(await cliExec(fx, NAME, ["cat"], "hello\n")).toEqual({ code: 0, stdout: "hello\n", stderr: "" });
    // No stdin at all: the process sees EOF at once instead of hanging.
    expect(await cliExec(fx, NAME, ["wc", "-c"])).toMatchObject({ code: 0, stdout: expect.stringMatching(/^\s*0\s*$/) });
  });

  it("pipes a large stdin exactly", async () => {
    const mib = "x".repeat(1024 * 1024);
    const r = await cliExec(fx, NAME, ["wc", "-c"], mib);
    expect(r.code).toBe(0);
    expect(r.stdout.trim()).toBe("1048576");
    expect(r.stderr).toBe("");
    // Content, not just length, survives the relay.
    const data = randomBytes(256 * 1024).toString("base64");
    const echoed = await cliExec(fx, NAME, ["cat"], data);
    expect(echoed.stdout).toBe(data);
  }, 120_000);

  it("refuses an unknown sandbox with exit 4", async () => {
    const r = await cliExec(fx, NAME + "-nope", ["true"]);
    expect(r.code).toBe(4);
    expect(r.stderr.trim().split("\n")).toHaveLength(1);
  });
});

describe("sandgate sandbox connect (real PTY in tmux)", () => {
  it("runs an interactive shell with a terminal that follows resizes, and exits with the shell's status", async () => {
    const session = "connect";
    const statusFile = join(tmpDir, "status");
    // The trailing sleep keeps the pane, and any error the CLI printed, for the failure message.
    const envPrefix = Object.entries(fx.cliEnv).map(([k, v]) => `${k}='${v}'`).join(" ");
    await tmux("new-session", "-d", "-s", session, "-x", "120", "-y", "40", `env ${envPrefix} ${CLI_COMMAND} sandbox connect ${NAME}; echo $? > ${statusFile}; sleep 60`);
    await tmux("set-option", "-t", session, "status", "off");
    const pane = (): Promise<string> => tmux("capture-pane", "-p", "-t", session);
    const send = (line: string): Promise<string> => tmux("send-keys", "-t", session, line, "Enter");
    /** Waits until the pane shows a line matching `re`, returns the match. */
    const see = (re: RegExp, what: string): Promise<RegExpMatchArray> =>
      eventually(async () => (await pane()).match(re) ?? undefined, 30_000, `${what} in the tmux pane`).catch(async (err: unknown) => {
        throw new Error(`${(err as Error).message}\n--- pane ---\n${await pane().catch(() => "(gone)")}`);
      });

    await see(/\$$/m, "a shell prompt"); // capture-pane drops trailing blanks
    await send("echo $((6*7))");
    await see(/^42\s*$/m, "the shell's answer 42");

    await send("tty");
    await see(/^\/dev\/pts\/\d+\s*$/m, "a /dev/pts terminal");

    // Without a status line the pane is the whole window: the size tmux was started with.
    await send("echo size=$(stty size)");
    await see(/^size=40 120\s*$/m, "the initial terminal size");

    await tmux("resize-window", "-t", session, "-x", "100", "-y", "30");
    const [w, h] = (await tmux("display-message", "-p", "-t", session, "#{pane_width} #{pane_height}")).trim().split(" ");
    expect([w, h]).toEqual(["100", "30"]);
    await send("clear; echo resized=$(stty size)");
    await see(/^resized=30 100\s*$/m, "the terminal size after the resize");

    await send("exit 5");
    const status = await eventually(() => (existsSync(statusFile) ? readFileSync(statusFile, "utf8").trim() || undefined : undefined), 30_000, "the CLI to exit");
    expect(status).toBe("5");
  });
});

describe("exec when the sandbox is not Ready", () => {
  it("is refused with a clear message and exit 5 while Stopped", async () => {
    // Its own sandbox: the shared one stays Ready for the other tests.
    const name = `${NAME}-stopped`;
    expect((await fx.t.api("POST", "/v1/sandboxes", { name })).status).toBe(201);
    await waitPhase(fx, name, "Ready");
    expect((await fx.t.api("POST", `/v1/sandboxes/${name}/stop`)).status).toBe(202);
    await waitPhase(fx, name, "Stopped");
    const r = await cliExec(fx, name, ["echo", "should-not-run"]);
    expect(r.code).toBe(5);
    expect(r.stdout).toBe("");
    expect(r.stderr).toBe(`sandgate: cannot exec in sandbox "${name}": it is Stopped; exec needs Ready\n`);
    // connect needs a terminal before anything else (as docker exec -it): without one, exit 2.
    const c = await cli(["sandbox", "connect", name], fx.cliEnv);
    expect(c.code).toBe(2);
    expect(c.stderr).toContain("the input is not a TTY");
  });
});
