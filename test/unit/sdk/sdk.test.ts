// The SDK (src/sdk) against a live gateway on the in-memory driver (TEST DOUBLE):
// finding the gateway as the CLI does, the typed errors (the CLI's codes and messages,
// checked against the CLI itself), sandboxes, exec (exit code, output callbacks in
// order and with backpressure, stdin, env, cwd, AbortSignal → INT), policy, watch (a
// loop that breaks leaves no stream), and `await using` (stop, delete, none).
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, expectTypeOf, it } from "vitest";
import type { z } from "zod";
import type { ApiErrorCode as GatewayApiErrorCode } from "../../../src/gateway/errors.js";
import type { ProposalView as GatewayProposalView } from "../../../src/api/responses.js";
import type { ProposalView as SdkProposalView } from "../../../src/sdk/index.js";
import type { eventView, sandboxSummaryView, sandboxView } from "../../../src/gateway/api/views.js";
import type { CreateSandboxBody } from "../../../src/api/schemas.js";
import type { CheckPolicyResult, StatusView } from "../../../src/api/responses.js";
import type { GatewayStatus, PolicyCheck } from "../../../src/sdk/index.js";
import type { EXEC_SIGNALS as DRIVER_SIGNALS } from "../../../src/driver/contract.js";
import { EXEC_SIGNALS, Sandgate, SandgateError, type ApiErrorCode, type CreateSandboxInput, type EventView, type SandboxSummaryView, type SandboxView } from "../../../src/sdk/index.js";
import { exec } from "../../../src/sdk/exec.js";
import { Transport } from "../../../src/sdk/transport.js";
import { waitForPhase } from "../../../src/sdk/wait.js";
import { CLI_TEST_TIMEOUT_MS, cli } from "../../support/cli-runner.js";
import { eventually, startTestGateway, type TestGateway } from "../../support/gateway-fixture.js";
import { MemoryDriver } from "../../support/memory-driver.js";
import { failure } from "../../support/sdk-failure.js";

let t: TestGateway;
let driver: MemoryDriver;
let sg: Sandgate;
let dir: string;
/** A home with nothing in it: no address, no token. */
let empty: string;

beforeAll(async () => {
  driver = new MemoryDriver();
  t = await startTestGateway(driver);
  dir = mkdtempSync(join(tmpdir(), "sg-sdk-"));
  empty = join(dir, "empty");
  sg = await Sandgate.connect({ home: t.home.dir, env: {} });
});

afterAll(async () => {
  await sg[Symbol.asyncDispose]();
  await t.close();
  rmSync(dir, { recursive: true, force: true });
});

/** The same failure through the CLI: its one line is the SDK's message, its exit code the SDK's exitCode. */
async function sameAsCli(err: SandgateError, args: string[], env: Record<string, string | undefined> = {}): Promise<void> {
  const r = await cli(args, env);
  expect(r.stderr).toBe(`sandgate: ${err.message}\n`);
  expect(r.code).toBe(err.exitCode);
}

const status = async (): Promise<any> => (await t.api("GET", "/v1/status")).body;

describe("the SDK's types are the gateway's", () => {
  it("error codes, signals, views and the create body agree (checked by tsc)", () => {
    expectTypeOf<ApiErrorCode>().toEqualTypeOf<GatewayApiErrorCode>();
    expectTypeOf<(typeof EXEC_SIGNALS)[number]>().toEqualTypeOf<(typeof DRIVER_SIGNALS)[number]>();
    expectTypeOf<ReturnType<typeof sandboxView>>().toExtend<Omit<SandboxView, "expiry">>();
    expectTypeOf<ReturnType<typeof sandboxSummaryView>>().toExtend<SandboxSummaryView>();
    expectTypeOf<ReturnType<typeof eventView>>().toExtend<EventView>();
    expectTypeOf<CreateSandboxInput>().toExtend<CreateSandboxBody>();
    expectTypeOf<SdkProposalView>().toEqualTypeOf<GatewayProposalView>();
    // Kept wider than the answers on purpose (one decision shape, an open status): still every answer fits.
    expectTypeOf<z.output<typeof CheckPolicyResult>>().toExtend<PolicyCheck>();
    expectTypeOf<StatusView>().toExtend<GatewayStatus>();
    expect(EXEC_SIGNALS).toEqual(["INT", "TERM", "HUP", "QUIT", "KILL"]);
  });
});

describe("connect finds the gateway as the CLI does", () => {
  it("through its home, SANDGATE_HOME, an explicit url and token, and SANDGATE_URL with SANDGATE_TOKEN", async () => {
    const ways = [
      await Sandgate.connect({ home: t.home.dir, env: {} }),
      await Sandgate.connect({ env: { SANDGATE_HOME: t.home.dir } }),
      await Sandgate.connect({ url: t.url, token: t.token, home: empty, env: {} }),
      await Sandgate.connect({ home: empty, env: { SANDGATE_URL: t.url, SANDGATE_TOKEN: t.token } }),
    ];
    for (const c of ways) {
      expect(c.url).toBe(t.url);
      expect((await c.status()).pid).toBe(process.pid);
    }
  });

  it("nothing at the address, no address, a malformed address file: not_running (exit 3), as the CLI says it", async () => {
    const noAddress = await failure(Sandgate.connect({ home: empty, env: {} }));
    expect(noAddress.code).toBe("not_running");
    expect(noAddress.exitCode).toBe(3);
    expect(noAddress.message).toBe(`the gateway is not running (no address in ${join(empty, "gateway.json")}); start it with: sandgate gateway start`);
    await sameAsCli(noAddress, ["--home", empty, "gateway", "status"]);

    // A socket nothing listens on (a gateway killed before it could remove it).
    const stale = join(dir, "stale");
    mkdirSync(stale, { recursive: true, mode: 0o700 });
    const sock = join(stale, "api.sock");
    // A socket file bound and never listened on: connect is refused, as after a SIGKILL.
    execFileSync("python3", ["-c", "import socket, sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])", sock]);
    writeFileSync(join(stale, "gateway.json"), JSON.stringify({ url: `unix://${sock}`, listeners: [`unix://${sock}`], pid: 1 }));
    writeFileSync(join(stale, "token"), "tok\n");
    const refused = await failure(Sandgate.connect({ home: stale, env: {} }));
    expect(refused.code).toBe("not_running");
    expect(refused.message).toMatch(new RegExp(`^the gateway is not running at unix://${sock.replace(/[.]/g, "\\.")}: ECONNREFUSED; start it with`));
    await sameAsCli(refused, ["--home", stale, "gateway", "status"]);

    // The exec session, given no address, says the same before it dials anything.
    const noUrl = await failure(exec(new Transport({ home: empty, token: "t", env: {} }), "x", ["true"]));
    expect([noUrl.code, noUrl.message]).toEqual([noAddress.code, noAddress.message]);

    writeFileSync(join(stale, "gateway.json"), "{not json");
    const malformed = await failure(Sandgate.connect({ home: stale, env: {} }));
    expect(malformed.code).toBe("not_running");
    expect(malformed.message).toBe(`cannot find the gateway: ${join(stale, "gateway.json")} is malformed (not JSON); remove it, the gateway writes it again when it starts`);
  }, CLI_TEST_TIMEOUT_MS);

  it("a wrong token and no token: unauthorized (exit 7), blaming where the token came from, as the CLI says it; a bad url: invalid_request (exit 2)", async () => {
    // The token option: the message blames it, not the environment (issue 31, item 10).
    const wrong = await failure(Sandgate.connect({ url: t.url, token: "wrong", home: empty, env: {} }));
    expect(wrong.code).toBe("unauthorized");
    expect(wrong.exitCode).toBe(7);
    expect(wrong.message).toBe(`the gateway refused the API token given as the token option (missing or wrong bearer token); pass the token of the gateway at ${t.url} (the token file in its home)`);
    // SANDGATE_TOKEN: that one, as the CLI says it.
    const wrongEnv = await failure(Sandgate.connect({ url: t.url, home: empty, env: { SANDGATE_TOKEN: "wrong" } }));
    expect([wrongEnv.code, wrongEnv.exitCode]).toEqual(["unauthorized", 7]);
    expect(wrongEnv.message).toBe(`the gateway refused the API token in SANDGATE_TOKEN (missing or wrong bearer token); set it to the token of the gateway at ${t.url}, or unset it to use ${join(empty, "token")}`);
    await sameAsCli(wrongEnv, ["--home", empty, "--url", t.url, "gateway", "status"], { SANDGATE_TOKEN: "wrong" });
    // The home's token file of another gateway.
    const other = join(dir, "other-token");
    mkdirSync(other, { recursive: true, mode: 0o700 });
    writeFileSync(join(other, "token"), "not-this-gateways\n");
    const wrongFile = await failure(Sandgate.connect({ url: t.url, home: other, env: {} }));
    expect(wrongFile.message).toBe(`the gateway refused the API token in ${join(other, "token")} (missing or wrong bearer token); check that it is the token of the gateway at ${t.url}`);
    await sameAsCli(wrongFile, ["--home", other, "--url", t.url, "gateway", "status"]);

    const none = await failure(Sandgate.connect({ url: t.url, home: empty, env: {} }));
    expect(none.code).toBe("unauthorized");
    expect(none.message).toBe(`no API token found in ${join(empty, "token")}; start the gateway once to create it`);

    // Set but empty: said so, with what to do, not "no token file" (issue 31, item 10).
    const emptyEnv = await failure(Sandgate.connect({ url: t.url, home: t.home.dir, env: { SANDGATE_TOKEN: "" } }));
    expect([emptyEnv.code, emptyEnv.exitCode]).toEqual(["unauthorized", 7]);
    expect(emptyEnv.message).toBe(`SANDGATE_TOKEN is set but empty: set it to the gateway's API token, or unset it to use the token file ${t.home.token}`);
    await sameAsCli(emptyEnv, ["--home", t.home.dir, "gateway", "status"], { SANDGATE_TOKEN: "" });
    const emptyOption = await failure(Sandgate.connect({ url: t.url, token: " ", home: t.home.dir, env: {} }));
    expect(emptyOption.message).toBe(`the token option is empty: pass the gateway's API token (the token file in its home), or leave the option out to use SANDGATE_TOKEN or ${t.home.token}`);
    writeFileSync(join(other, "token"), "\n");
    const emptyFile = await failure(Sandgate.connect({ url: t.url, home: other, env: {} }));
    expect(emptyFile.message).toBe(`the token file ${join(other, "token")} is empty; remove it and restart the gateway to make a new one`);
    rmSync(join(other, "token"));
    mkdirSync(join(other, "token"));
    const unreadable = await failure(Sandgate.connect({ url: t.url, home: other, env: {} }));
    expect(unreadable.message).toBe(`cannot read the API token ${join(other, "token")} (EISDIR): run this as the account that runs the gateway, or set SANDGATE_TOKEN`);

    const badUrl = await failure(Sandgate.connect({ url: "ftp://x", env: {} }));
    expect([badUrl.code, badUrl.exitCode, badUrl.message]).toEqual(["invalid_request", 2, 'url must be unix:///PATH or https://HOST:PORT; got "ftp://x"']);
    const badEnv = await failure(Sandgate.connect({ env: { SANDGATE_URL: "localhost:7420" } }));
    expect(badEnv.message).toBe('SANDGATE_URL must be unix:///PATH or https://HOST:PORT; got "localhost:7420"');
    await sameAsCli(badEnv, ["gateway", "status"], { SANDGATE_URL: "localhost:7420" });
  }, CLI_TEST_TIMEOUT_MS);
});

describe("sandboxes", () => {
  it("create waits for Ready; get by name and by id; list filters by label and phase, in name order; delete waits until gone and is idempotent", async () => {
    const progress: string[] = [];
    const a = await sg.sandboxes.create({ name: "sdk-a", labels: { team: "sdk" } }, { onEvent: (e) => progress.push(`${e.oldPhase ?? "-"}>${e.newPhase ?? "-"}`) });
    expect(a.phase).toBe("Ready");
    expect(progress).toContain("Provisioning>Ready");
    const b = await sg.sandboxes.create({ name: "sdk-b", labels: { team: "sdk" } });
    await sg.sandboxes.create({ name: "sdk-c" });
    expect((await sg.sandboxes.get("sdk-a")).id).toBe(a.id);
    expect((await sg.sandboxes.get(a.id)).name).toBe("sdk-a");

    const names = async (o: Parameters<typeof sg.sandboxes.list>[0]): Promise<string[]> => {
      const out: string[] = [];
      for await (const s of sg.sandboxes.list(o)) out.push(s.name);
      return out;
    };
    expect(await names({ labels: { team: "sdk" } })).toEqual(["sdk-a", "sdk-b"]);
    expect(await names({ labels: { team: "sdk" }, limit: 1 })).toEqual(["sdk-a"]);
    await b.stop();
    expect(b.phase).toBe("Stopped");
    expect(await names({ labels: { team: "sdk" }, phase: "Stopped" })).toEqual(["sdk-b"]);
    // Stop again: already stopped, not an error.
    expect((await b.stop()).phase).toBe("Stopped");
    expect((await b.start()).phase).toBe("Ready");

    await sg.sandboxes.delete("sdk-c");
    expect((await failure(sg.sandboxes.get("sdk-c"))).code).toBe("not_found");
    await sg.sandboxes.delete("sdk-c"); // already gone: fine
    await a.delete();
    await b.delete();
    expect(await names({ labels: { team: "sdk" } })).toEqual([]);
  });

  it("errors carry the API's code and the CLI's exit code and message: not_found 4, already_exists 5, invalid_request 2, not_allowed 5", async () => {
    const missing = await failure(sg.sandboxes.get("no-such"));
    expect([missing.code, missing.exitCode]).toEqual(["not_found", 4]);
    await sameAsCli(missing, ["--home", t.home.dir, "sandbox", "get", "no-such"]);

    await sg.sandboxes.create({ name: "sdk-dup" }, { wait: false });
    const taken = await failure(sg.sandboxes.create({ name: "sdk-dup" }));
    expect([taken.code, taken.exitCode]).toEqual(["already_exists", 5]);
    await sameAsCli(taken, ["--home", t.home.dir, "sandbox", "create", "sdk-dup", "--no-wait"]);

    const badName = await failure(sg.sandboxes.create({ name: "Not_A_Name" }));
    expect([badName.code, badName.exitCode]).toEqual(["invalid_request", 2]);
    await sameAsCli(badName, ["--home", t.home.dir, "sandbox", "create", "Not_A_Name", "--no-wait"]);

    const stopped = await sg.sandboxes.get("sdk-dup");
    await stopped.stop();
    const notReady = await failure(stopped.exec(["echo", "hi"]));
    expect([notReady.code, notReady.exitCode]).toEqual(["not_allowed", 5]);
    await sameAsCli(notReady, ["--home", t.home.dir, "sandbox", "exec", stopped.id, "--", "echo", "hi"]);
    await stopped.delete();
  }, CLI_TEST_TIMEOUT_MS);

  it("a create whose wait fails gets its dispose action before the error: nothing is left behind", async () => {
    const err = await failure(sg.sandboxes.create({ name: "sdk-broken", image: "does-not-exist:latest" }, { dispose: "delete" }));
    expect([err.code, err.exitCode]).toEqual(["sandbox_failed", 1]);
    expect(err.message).toMatch(/^sandbox "sdk-broken" is Error/);
    expect((await failure(sg.sandboxes.get("sdk-broken"))).code).toBe("not_found");
  });

  it("bad options are refused before anything is asked of the gateway", async () => {
    const before = driver.calls.length;
    expect((await failure(sg.sandboxes.create({ name: "sdk-opt" }, { dispose: "drop" as never }))).message).toBe('dispose: expected one of stop, delete, none, got "drop"');
    expect((await failure(sg.sandboxes.create({ name: "sdk-opt" }, { timeout: 0 }))).code).toBe("invalid_request");
    expect((await failure(sg.sandboxes.list({ limit: 0 }).next())).code).toBe("invalid_request");
    expect(driver.calls.length).toBe(before);
    expect((await failure(sg.sandboxes.get("sdk-opt"))).code).toBe("not_found");
  });
});

describe("exec", () => {
  let sb: Awaited<ReturnType<typeof sg.sandboxes.create>>;
  beforeAll(async () => {
    sb = await sg.sandboxes.create({ name: "sdk-ex" }, { dispose: "delete" });
  });
  afterAll(async () => {
    await sb[Symbol.asyncDispose]();
  });

  it("resolves with the command's exit code; stdout and stderr go to their callbacks", async () => {
    expect(await sb.exec(["exit", "3"])).toBe(3);
    expect(await sb.exec(["exit", "0"])).toBe(0);
    let out = "";
    let err = "";
    expect(await sb.exec(["sg-stderr", "to", "stderr"], { onStdout: (c) => void (out += c.toString()), onStderr: (c) => void (err += c.toString()) })).toBe(0);
    expect([out, err]).toEqual(["out\n", "to stderr\n"]);
  });

  it("stdin (text, bytes, a stream) reaches the command; env, cwd and user reach the runtime as asked", async () => {
    const run = async (stdin: Parameters<typeof sb.exec>[1] extends infer O ? (O extends { stdin?: infer S } ? S : never) : never): Promise<string> => {
      let out = "";
      expect(await sb.exec(["cat"], { stdin, onStdout: (c) => void (out += c.toString()) })).toBe(0);
      return out;
    };
    expect(await run("hello\n")).toBe("hello\n");
    expect(await run(Buffer.from([0x68, 0x69]))).toBe("hi");
    expect(
      await run(
        (async function* () {
          yield "a";
          yield Buffer.from("b");
          yield "c";
        })(),
      ),
    ).toBe("abc");
    let out = "";
    expect(await sb.exec(["sg-env"], { env: { MODE: "ci", EMPTY: "" }, cwd: "/sandbox/app", onStdout: (c) => void (out += c.toString()) })).toBe(0);
    expect(out).toBe(`cwd=/sandbox/app\nuser=(default)\nEMPTY=\nMODE=ci\n`);
    expect(driver.execOptions.at(-1)).toMatchObject({ cmd: ["sg-env"], cwd: "/sandbox/app", env: { MODE: "ci", EMPTY: "" } });
  });

  it("an AbortSignal sends the command INT (exit 130), or the signal asked for; one aborted before is not started", async () => {
    for (const [abortSignal, code] of [[undefined, 130], ["TERM", 143]] as const) {
      const ac = new AbortController();
      const signalsBefore = driver.signals.length;
      const code_ = await sb.exec(["sleep"], { signal: ac.signal, ...(abortSignal ? { abortSignal } : {}), onStdout: (c) => (c.toString().includes("sleeping") ? ac.abort() : undefined) });
      expect(code_).toBe(code);
      expect(driver.signals.slice(signalsBefore)).toEqual([abortSignal ?? "INT"]);
    }
    const execs = driver.execs;
    const ac = new AbortController();
    ac.abort();
    await expect(sb.exec(["echo", "never"], { signal: ac.signal })).rejects.toThrow(/aborted/);
    expect(driver.execs).toBe(execs);
    expect(sg.openStreams).toBe(0);
  });

  it("a signal the runtime cannot deliver: signal_failed with the CLI's exit code (128+n)", async () => {
    driver.canSignal = false;
    try {
      const ac = new AbortController();
      const err = await failure(sb.exec(["sleep"], { signal: ac.signal, onStdout: () => ac.abort() }));
      expect([err.code, err.exitCode]).toEqual(["signal_failed", 130]);
      expect(err.message).toBe("SIGINT was not delivered: this runtime cannot signal an exec's command; the command may still run");
    } finally {
      driver.canSignal = true;
    }
  });

  it("output is not held: while a callback's promise is pending the command is held back; every byte then arrives in order", async () => {
    const TOTAL = 64 * 1024 * 1024;
    const CHUNK = 64 * 1024;
    let sent = 0;
    async function* input(): AsyncGenerator<Buffer> {
      for (let i = 0; sent < TOTAL; i++) {
        sent += CHUNK;
        yield Buffer.alloc(CHUNK, i % 251);
      }
    }
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    let got = 0;
    let inOrder = true;
    const done = sb.exec(["cat"], {
      stdin: input(),
      onStdout: async (c) => {
        // Every byte of input chunk i is i % 251: the first and last byte of each piece of
        // a chunk in this output show it is the input, in order.
        for (let off = 0; off < c.length; ) {
          const n = Math.floor((got + off) / CHUNK);
          const end = Math.min(c.length, (n + 1) * CHUNK - got);
          if (c[off] !== n % 251 || c[end - 1] !== n % 251) inOrder = false;
          off = end;
        }
        got += c.length;
        await held;
      },
    });
    await eventually(async () => {
      const before = sent;
      await new Promise((r) => setTimeout(r, 300));
      return sent === before && sent > 0 ? true : undefined;
    }, 60_000, "the input to stop");
    expect(sent).toBeLessThan(TOTAL / 2);
    release();
    expect(await done).toBe(0);
    expect(got).toBe(TOTAL);
    expect(inOrder).toBe(true);
  }, 120_000);

  it("a callback that throws ends the session with its error", async () => {
    const closed = driver.closedExecs;
    await expect(sb.exec(["sleep"], { onStdout: () => { throw new Error("reader failed"); } })).rejects.toThrow("reader failed");
    await eventually(() => (driver.closedExecs > closed ? true : undefined), 10_000, "the session closed");
  });

  it("bad input is one line before anything runs: cmd, env, cwd, abortSignal", async () => {
    const execs = driver.execs;
    expect((await failure(sb.exec([]))).message).toBe("cmd: expected a non-empty array of strings, got []");
    expect((await failure(sb.exec(["x"], { env: { "1BAD": "v" } }))).code).toBe("invalid_request");
    const cwd = await failure(sb.exec(["x"], { cwd: "relative" }));
    expect([cwd.code, cwd.exitCode, cwd.message]).toEqual(["invalid_request", 2, 'cwd: working directory "relative": expected an absolute path (starting with "/")']);
    expect((await failure(sb.exec(["x"], { abortSignal: "STOP" as never }))).code).toBe("invalid_request");
    expect(driver.execs).toBe(execs);
  });
});

describe("policy", () => {
  it("set makes a revision, get returns its text; an invalid one changes nothing (invalid_request)", async () => {
    await using sb = await sg.sandboxes.create({ name: "sdk-pol" }, { dispose: "delete" });
    const r = await sb.policy.set("version: 1\n# allow nothing yet\n");
    expect(r).toMatchObject({ revision: 2, enforced: null });
    expect((await sb.policy.get()).source).toBe("version: 1\n# allow nothing yet\n");
    const bad = await failure(sb.policy.set("version: 9\n"));
    expect([bad.code, bad.exitCode]).toEqual(["invalid_request", 2]);
    expect((await sb.policy.get()).revision).toBe(2);
    expect((await sb.policy.check("https://example.com/")).decision.allow).toBe(false);
  });

  it("with wait, a revision no supervisor acknowledges is a timeout (exit 6) naming it; a bad wait is refused before anything", async () => {
    await using sb = await sg.sandboxes.create({ name: "sdk-polw" }, { dispose: "delete" });
    const err = await failure(sb.policy.set("version: 1\n", { wait: 1 }));
    expect([err.code, err.exitCode]).toEqual(["timeout", 6]);
    expect(err.message).toBe("revision 2 is stored but the supervisor did not acknowledge it within 1 s (-)");
    for (const wait of [0, 601, Number.NaN]) expect((await failure(sb.policy.set("version: 1\n", { wait }))).code).toBe("invalid_request");
    expect((await sb.policy.get()).revision).toBe(2);
  });
});

describe("waiting for a phase", () => {
  /**
   * A create held in Provisioning until `release`, and a waiter on it whose reads are an hour
   * apart unless something wakes it; `read` resolves once it has read the sandbox.
   */
  async function held(gw: TestGateway, name: string, signal?: AbortSignal): Promise<{ waited: Promise<SandboxView | null>; read: Promise<void>; release: () => void }> {
    let release!: () => void;
    driver.gate = new Promise((r) => (release = r));
    expect((await gw.api("POST", "/v1/sandboxes", { name })).status).toBe(201);
    let firstRead!: () => void;
    const read = new Promise<void>((r) => (firstRead = r));
    const waited = waitForPhase(new Transport({ home: gw.home.dir, env: {} }), name, { until: ["Ready"], timeoutMs: 3_600_000, backstopMs: 3_600_000, onEvent: () => firstRead(), ...(signal ? { signal } : {}) });
    waited.catch(() => undefined);
    return {
      waited,
      read,
      release: () => {
        driver.gate = undefined;
        release();
      },
    };
  }
  const streams = async (n: number, what: string): Promise<void> => {
    await eventually(async () => ((await status()).watch.streams === n ? true : undefined), 10_000, what);
  };

  it("is woken by the sandbox's watch stream: with an hour between reads it still ends when Ready is committed, and closes the stream", async () => {
    const before = (await status()).watch.streams as number;
    const w = await held(t, "sdk-bell");
    // The waiter has read the sandbox (Provisioning) and opened its stream: only the stream can wake it now.
    await streams(before + 1, "the waiter's watch stream");
    w.release();
    expect((await w.waited)?.phase).toBe("Ready");
    await streams(before, "the watch stream closed");
    await t.api("DELETE", "/v1/sandboxes/sdk-bell");
  });

  it("with no watch stream to be had (the gateway at its stream limit) it reads every WAIT_POLL_MS instead, and still ends", async () => {
    const full = await startTestGateway(driver, { watch: { maxStreams: 0 } });
    try {
      const w = await held(full, "sdk-nobell");
      // Released once the waiter has read the sandbox in Provisioning: from then on the hour
      // between reads would hold it, unless it knows it has no stream and polls.
      await w.read;
      w.release();
      expect((await w.waited)?.phase).toBe("Ready");
    } finally {
      await full.api("DELETE", "/v1/sandboxes/sdk-nobell");
      await full.close();
    }
  });

  it("an abort while it waits ends it with the signal's reason, and closes the stream", async () => {
    const before = (await status()).watch.streams as number;
    const ac = new AbortController();
    const w = await held(t, "sdk-bell-abort", ac.signal);
    await streams(before + 1, "the waiter's watch stream");
    ac.abort(new Error("caller gave up"));
    await expect(w.waited).rejects.toThrow("caller gave up");
    await streams(before, "the watch stream closed");
    w.release();
    await t.api("DELETE", "/v1/sandboxes/sdk-bell-abort");
  });
});

describe("watch", () => {
  it("gives committed events in order; a loop that breaks closes its stream", async () => {
    const created = await sg.sandboxes.create({ name: "sdk-w" }, { dispose: "delete" });
    const seen: string[] = [];
    for await (const { event, sandbox } of sg.watch({ sandbox: "sdk-w", after: 0 })) {
      seen.push(`${event.kind}:${event.newPhase ?? "-"}`);
      expect(sandbox?.name).toBe("sdk-w");
      if (event.newPhase === "Ready") break;
    }
    expect(seen.at(0)).toBe("phase:Provisioning");
    expect(seen.at(-1)).toBe("phase:Ready");
    await eventually(async () => ((await status()).watch.streams === 0 ? true : undefined), 10_000, "the watch stream closed");
    expect(sg.openStreams).toBe(0);

    // Live: a stop as it happens.
    const live: string[] = [];
    const reading = (async () => {
      for await (const { event } of sg.watch({ sandbox: created.id })) {
        if (event.kind === "phase") live.push(event.newPhase ?? "-");
        if (event.newPhase === "Stopped") return;
      }
    })();
    await eventually(async () => ((await status()).watch.streams === 1 ? true : undefined), 10_000, "watching");
    await created.stop();
    await reading;
    expect(live).toEqual(["Stopping", "Stopped"]);
    await eventually(async () => ((await status()).watch.streams === 0 ? true : undefined), 10_000, "the watch stream closed");
    await created[Symbol.asyncDispose]();
  });

  it("disposing the client ends its open watches (quietly) and exec sessions (connection_lost), and leaves no stream", async () => {
    const c = await Sandgate.connect({ home: t.home.dir, env: {} });
    await using sb = await c.sandboxes.create({ name: "sdk-drop" }, { dispose: "delete" });
    let started!: () => void;
    const sleeping = new Promise<void>((r) => (started = r));
    const closed = driver.closedExecs;
    const running = failure(sb.exec(["sleep"], { onStdout: () => started() }));
    await sleeping;
    const ended = (async () => {
      const seen: unknown[] = [];
      for await (const e of c.watch()) seen.push(e);
      return seen.length;
    })();
    await eventually(async () => ((await status()).watch.streams === 1 ? true : undefined), 10_000, "watching");
    expect(c.openStreams).toBe(2);
    await c[Symbol.asyncDispose]();
    expect(await ended).toBe(0);
    const dropped = await running;
    expect([dropped.code, dropped.message]).toEqual(["connection_lost", "the exec session was closed: the client was disposed"]);
    await eventually(() => (driver.closedExecs > closed ? true : undefined), 10_000, "the exec session closed at the gateway");
    expect(c.openStreams).toBe(0);
    await eventually(async () => ((await status()).watch.streams === 0 ? true : undefined), 10_000, "the watch stream closed");
  });
});

describe("await using", () => {
  const phase = async (name: string): Promise<string> => {
    const r = await t.api("GET", `/v1/sandboxes/${name}`);
    return r.status === 404 ? "gone" : (r.body.phase as string);
  };

  it("stops the sandbox by default, deletes it with dispose: delete, leaves it with none; also when the scope throws", async () => {
    {
      await using sb = await sg.sandboxes.create({ name: "sdk-u-stop" });
      expect(sb.phase).toBe("Ready");
    }
    expect(await phase("sdk-u-stop")).toBe("Stopped");
    {
      await using sb = await sg.sandboxes.create({ name: "sdk-u-del" }, { dispose: "delete" });
      expect(await phase(sb.name)).toBe("Ready");
    }
    expect(await phase("sdk-u-del")).toBe("gone");
    {
      await using sb = await sg.sandboxes.create({ name: "sdk-u-keep" }, { dispose: "none" });
      expect(sb.dispose).toBe("none");
    }
    expect(await phase("sdk-u-keep")).toBe("Ready");
    await expect(
      (async () => {
        await using sb = await sg.sandboxes.get("sdk-u-keep", { dispose: "delete" });
        expect(sb.dispose).toBe("delete");
        throw new Error("the agent failed");
      })(),
    ).rejects.toThrow("the agent failed");
    expect(await phase("sdk-u-keep")).toBe("gone");
    // A sandbox deleted under a stopping handle: its disposal is not an error.
    {
      await using sb = await sg.sandboxes.create({ name: "sdk-u-gone" });
      await sg.sandboxes.delete(sb.id);
    }
    expect(await phase("sdk-u-gone")).toBe("gone");
    await sg.sandboxes.delete("sdk-u-stop");
  });
});
