// `sandbox logs` against a real dockerd (live-restore) through the real gateway and CLI:
// stdout and stderr apart, --tail, --since; a follow that lives through a daemon restart
// and a gateway restart with no line lost or twice; the previous generation's output
// readable after stop/start (and a Completed workload's after its containers are gone),
// gone after delete; the container log bound on HostConfig.LogConfig and what it keeps;
// long lines whole; the supervisor's log without the control token or a secret value.
import { spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import { existsSync, readFileSync, readdirSync, statSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CLI_ARGS, cli } from "../support/cli-runner.js";
import { deleteAllAndCheckMonitors, startDockerFixture, type DockerFixture } from "../support/docker-fixture.js";
import { eventually } from "../support/gateway-fixture.js";
import { engineGet, waitDeleted, waitPhase } from "../support/sandbox-helpers.js";

let fx: DockerFixture;
/** A small bound, so that a test can show it holding (256 KiB × 2 files per container). */
const BOUND = { maxBytes: 256 * 1024, files: 2 };

beforeAll(async () => {
  fx = await startDockerFixture({ liveRestore: true, name: "logs", containerLog: BOUND });
});
afterAll(async () => {
  if (fx) await deleteAllAndCheckMonitors(fx);
  await fx?.close();
});

const logsCli = (name: string, ...args: string[]) => cli(["sandbox", "logs", name, ...args], fx.cliEnv);

async function create(name: string, command: string[], body: Record<string, unknown> = {}): Promise<any> {
  const r = await fx.t.api("POST", "/v1/sandboxes", { name, command, ...body });
  expect(r.status, JSON.stringify(r.body)).toBe(201);
  return r.body;
}

/** The records of GET .../logs (end record left out). */
async function records(name: string, query = ""): Promise<{ t: string; s: string; l: string; p?: true }[]> {
  const res = await fx.t.fetch(`/v1/sandboxes/${name}/logs${query}`, { headers: { authorization: `Bearer ${fx.t.token}` } });
  const text = await res.text();
  if (res.status !== 200) throw new Error(`logs ${name}${query}: ${res.status} ${text}`);
  return text.split("\n").filter((l) => l !== "").map((l) => JSON.parse(l)).filter((r) => "t" in r);
}

function follow(name: string): { p: ChildProcessWithoutNullStreams; out: () => string; err: () => string; exit: Promise<number | null> } {
  const p = spawn(CLI_ARGS[0]!, [...CLI_ARGS.slice(1), "sandbox", "logs", name, "-f"], { env: { ...process.env, SANDGATE_URL: undefined, SANDGATE_TOKEN: undefined, ...fx.cliEnv }, stdio: "pipe" });
  let out = "";
  let err = "";
  p.stdout.on("data", (b: Buffer) => (out += b.toString()));
  p.stderr.on("data", (b: Buffer) => (err += b.toString()));
  return { p, out: () => out, err: () => err, exit: new Promise((resolve) => p.on("close", (code) => resolve(code))) };
}

/** The numbers of lines "<prefix> <n>" in text, in order. */
const numbers = (text: string, prefix: string): number[] => text.split("\n").filter((l) => l.startsWith(`${prefix} `)).map((l) => Number(l.slice(prefix.length + 1)));

describe("sandbox logs on a real daemon", () => {
  it("stdout and stderr apart; --tail is the last N lines; --since is inclusive; the log bound is on both containers", { timeout: 240_000 }, async () => {
    await create("lg-basic", ["sh", "-c", 'for i in 1 2 3 4 5 6 7 8 9 10; do echo "out $i"; echo "err $i" >&2; done; exec sleep 2147483647']);
    const s = await waitPhase(fx, "lg-basic", "Ready");
    await eventually(async () => ((await records("lg-basic")).length === 20 ? true : undefined), 60_000, "20 lines");

    const all = await logsCli("lg-basic");
    expect(all.code, all.stderr).toBe(0);
    expect(all.stdout).toBe([1, 2, 3, 4, 5, 6, 7, 8, 9, 10].map((i) => `out ${i}\n`).join(""));
    expect(all.stderr).toBe([1, 2, 3, 4, 5, 6, 7, 8, 9, 10].map((i) => `err ${i}\n`).join(""));

    const full = (await logsCli("lg-basic", "--json")).stdout.trim().split("\n").map((l) => JSON.parse(l));
    expect(full).toHaveLength(20);
    expect(full.filter((r) => r.s === "out").map((r) => r.l)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10].map((i) => `out ${i}`));
    const tail = (await logsCli("lg-basic", "--json", "--tail", "4")).stdout.trim().split("\n").map((l) => JSON.parse(l));
    expect(tail).toEqual(full.slice(-4));
    const at = full[7].t as string;
    const since = (await logsCli("lg-basic", "--json", "--since", at)).stdout.trim().split("\n").map((l) => JSON.parse(l));
    expect(since).toEqual(full.filter((r) => r.t >= at));
    expect((await logsCli("lg-basic", "--since", "1h")).stdout).toBe(all.stdout);
    const stamped = await logsCli("lg-basic", "--timestamps", "--tail", "2");
    // Docker copies stdout and stderr separately: across the two, its log's order is its own.
    const stampedLines = (stamped.stdout + stamped.stderr).split("\n").filter((l) => l !== "");
    expect(stampedLines).toHaveLength(2);
    for (const l of stampedLines) expect(l).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z (out|err) (9|10)$/);
    expect(stampedLines.map((l) => l.slice(0, 30)).sort()).toEqual(full.slice(-2).map((r) => r.t as string).sort());

    for (const role of ["workload", "supervisor"] as const) {
      const c = await engineGet(fx, `/containers/${s.runtime![role].id}/json`);
      expect(c.HostConfig.LogConfig, role).toEqual({ Type: "json-file", Config: { "max-size": String(BOUND.maxBytes), "max-file": String(BOUND.files) } });
    }
  });

  it("a follow lives through a live-restore daemon restart and a gateway restart: every line once, in order", { timeout: 600_000 }, async () => {
    await create("lg-follow", ["sh", "-c", 'i=0; while :; do i=$((i+1)); echo "n $i"; if [ $((i % 3)) = 0 ]; then echo "e $i" >&2; fi; sleep 0.05; done']);
    await waitPhase(fx, "lg-follow", "Ready");
    const f = follow("lg-follow");
    try {
      await eventually(() => (numbers(f.out(), "n").length >= 20 ? true : undefined), 120_000, "20 lines");
      await fx.dockerd.restart({ downMs: 1500 });
      const afterDaemon = Math.max(...numbers(f.out(), "n"));
      await eventually(() => (Math.max(...numbers(f.out(), "n")) >= afterDaemon + 40 ? true : undefined), 180_000, "lines after the daemon restart");
      await waitPhase(fx, "lg-follow", "Ready", { ms: 120_000 });

      await fx.restartGateway();
      const afterGateway = Math.max(...numbers(f.out(), "n"));
      await eventually(() => (Math.max(...numbers(f.out(), "n")) >= afterGateway + 40 ? true : undefined), 180_000, "lines after the gateway restart");
    } finally {
      f.p.kill("SIGINT");
    }
    expect(await f.exit).toBe(0);
    const n = numbers(f.out(), "n");
    expect(n.length).toBeGreaterThan(100);
    // Contiguous from the first line: nothing lost, nothing twice, in order.
    expect(n).toEqual(n.map((_, i) => i + 1));
    const e = numbers(f.err(), "e");
    expect(e).toEqual(e.map((_, i) => 3 * (i + 1)));
    expect(e.at(-1)!).toBeGreaterThanOrEqual(n.at(-1)! - 3);
    expect(f.out().split("\n").filter((l) => l !== "" && !l.startsWith("n "))).toEqual([]);
  });

  it("the previous generation stays readable after stop/start, a Completed workload's output after its containers are gone; delete removes both", { timeout: 300_000 }, async () => {
    const body = await create("lg-gen", ["sh", "-c", 'n=$(cat /sandbox/n 2>/dev/null || echo 0); n=$((n+1)); echo $n > /sandbox/n; echo "run $n"; echo "err $n" >&2; exec sleep 2147483647']);
    const id = body.id as string;
    await waitPhase(fx, "lg-gen", "Ready");
    await eventually(async () => ((await records("lg-gen")).length === 2 ? true : undefined), 60_000, "generation 1's lines");
    expect((await fx.t.api("POST", "/v1/sandboxes/lg-gen/stop")).status).toBe(202);
    await waitPhase(fx, "lg-gen", "Stopped");
    // Its containers are gone; its output was kept, privately.
    const stopped = await logsCli("lg-gen");
    expect([stopped.code, stopped.stdout, stopped.stderr]).toEqual([0, "run 1\n", "err 1\n"]);
    const dir = join(fx.t.home.dir, "logs", id);
    expect(statSync(dir).mode & 0o777).toBe(0o700);
    for (const file of readdirSync(dir)) expect(statSync(join(dir, file)).mode & 0o777, file).toBe(0o600);

    expect((await fx.t.api("POST", "/v1/sandboxes/lg-gen/start")).status).toBe(202);
    await waitPhase(fx, "lg-gen", "Ready", { generation: 2 });
    await eventually(async () => ((await records("lg-gen")).length === 2 ? true : undefined), 60_000, "generation 2's lines");
    const current = await logsCli("lg-gen");
    expect([current.stdout, current.stderr]).toEqual(["run 2\n", "err 2\n"]);
    const previous = await logsCli("lg-gen", "--previous");
    expect([previous.code, previous.stdout, previous.stderr]).toEqual([0, "run 1\n", "err 1\n"]);
    expect((await logsCli("lg-gen", "--generation", "1")).stdout).toBe("run 1\n");
    const supervisor = await logsCli("lg-gen", "--supervisor", "--previous");
    expect(supervisor.stdout).toMatch(/"msg":"supervisor listening"/);

    const doneId = (await create("lg-done", ["sh", "-c", "echo finished; echo 'with a warning' >&2"])).id as string;
    await waitPhase(fx, "lg-done", "Completed");
    await eventually(async () => {
      const r = await fx.engine.listContainers({ all: true, filters: { label: [`sandgate.sandbox=${doneId}`] } });
      return r.kind === "ok" && r.body.length === 0 ? true : undefined;
    }, 60_000, "the Completed sandbox's containers to be removed");
    const done = await logsCli("lg-done");
    expect([done.code, done.stdout, done.stderr]).toEqual([0, "finished\n", "with a warning\n"]);

    expect((await fx.t.api("DELETE", "/v1/sandboxes/lg-gen")).status).toBe(202);
    await waitDeleted(fx, "lg-gen");
    expect(existsSync(dir)).toBe(false);
    const gone = await logsCli("lg-gen", "--previous");
    expect(gone.code).toBe(4);
    expect(gone.stderr).toBe('sandgate: no sandbox named "lg-gen"\n');
  });

  it("a stop keeps the whole output: what a follow printed until the stop is what is kept, to the last line", { timeout: 300_000 }, async () => {
    await create("lg-stop", ["sh", "-c", 'i=0; while :; do i=$((i+1)); echo "t $i"; sleep 0.01; done']);
    await waitPhase(fx, "lg-stop", "Ready");
    const f = follow("lg-stop");
    await eventually(() => (numbers(f.out(), "t").length >= 50 ? true : undefined), 120_000, "50 lines");
    expect((await fx.t.api("POST", "/v1/sandboxes/lg-stop/stop")).status).toBe(202);
    // The follow ends on its own when the workload is stopped.
    expect(await f.exit).toBe(0);
    await waitPhase(fx, "lg-stop", "Stopped");
    const kept = await logsCli("lg-stop");
    expect(kept.code).toBe(0);
    const n = numbers(kept.stdout, "t");
    expect(n).toEqual(n.map((_, i) => i + 1));
    // Killed before it was copied: nothing it wrote after the copy was lost.
    expect(kept.stdout).toBe(f.out());
  });

  it("Docker's bound holds: a flood keeps only the newest output, live and once kept; long lines come back whole", { timeout: 300_000 }, async () => {
    // 3 MB of numbered lines, then one 40,000-byte line (Docker cuts it at 16 KiB), then a marker.
    await create("lg-flood", ["sh", "-c", 'i=0; while [ $i -lt 30000 ]; do i=$((i+1)); echo "flood $i ................................................................................"; done; head -c 40000 /dev/zero | tr "\\0" x; echo; echo last; exec sleep 2147483647']);
    await waitPhase(fx, "lg-flood", "Ready");
    await eventually(async () => ((await logsCli("lg-flood", "--tail", "1")).stdout === "last\n" ? true : undefined), 120_000, "the flood to be written");
    const live = await logsCli("lg-flood");
    expect(live.code).toBe(0);
    expect(Buffer.byteLength(live.stdout)).toBeLessThanOrEqual(BOUND.maxBytes * BOUND.files);
    const lines = live.stdout.split("\n");
    expect(lines.at(-2)).toBe("last");
    expect(lines.at(-3)).toBe("x".repeat(40_000));
    const kept = live.stdout.split("\n").filter((l) => l.startsWith("flood ")).map((l) => Number(/^flood (\d+) /.exec(l)![1]));
    expect(kept[0]).toBeGreaterThan(1);
    expect(kept.at(-1)).toBe(30_000);
    expect(kept).toEqual(kept.map((_, i) => kept[0]! + i));

    expect((await fx.t.api("POST", "/v1/sandboxes/lg-flood/stop")).status).toBe(202);
    await waitPhase(fx, "lg-flood", "Stopped");
    const archived = await logsCli("lg-flood");
    expect(archived.stdout.split("\n").at(-2)).toBe("last");
    expect(archived.stdout.split("\n").at(-3)).toBe("x".repeat(40_000));
    const id = (await fx.t.api("GET", "/v1/sandboxes/lg-flood")).body.id as string;
    const dir = join(fx.t.home.dir, "logs", id);
    const bytes = readdirSync(dir).reduce((n, f) => n + statSync(join(dir, f)).size, 0);
    // The kept copy (JSON records, both containers) stays within the bound of each.
    expect(bytes).toBeLessThanOrEqual(2 * BOUND.maxBytes * BOUND.files + 64 * 1024);
  });

  it("the supervisor's log carries neither its control token nor a secret value", { timeout: 240_000 }, async () => {
    const VALUE = `ghp_logs-${Math.random().toString(36).slice(2)}${Date.now()}`;
    expect((await fx.t.api("PUT", "/v1/secrets/logs-github", { value: VALUE })).status).toBe(200);
    const policy = "version: 1\nnetwork:\n  rules:\n    - name: gh\n      endpoints:\n        - host: api.github.test\n          port: 443\n          protocol: https\n          credentials:\n            - secret: logs-github\n";
    const body = await create("lg-sup", ["sleep", "2147483647"], { policy });
    await waitPhase(fx, "lg-sup", "Ready");
    await eventually(async () => ((await logsCli("lg-sup", "--supervisor")).stdout.includes('"msg":"secrets received"') ? true : undefined), 60_000, "the secret delivered");
    const token = readFileSync(join(fx.t.home.dir, "launch", `${body.id as string}-g1`, "token"), "utf8").trim();
    expect(token.length).toBeGreaterThan(20);
    const sup = await logsCli("lg-sup", "--supervisor");
    const text = sup.stdout + sup.stderr;
    expect(text).toMatch(/"names":\["logs-github"\]/);
    for (const form of [VALUE, Buffer.from(VALUE).toString("base64"), token, ...token.split(".").filter((p) => p.length > 16)]) expect(text).not.toContain(form);
    const workload = await logsCli("lg-sup");
    for (const form of [VALUE, token]) expect(workload.stdout + workload.stderr).not.toContain(form);
  });
});
