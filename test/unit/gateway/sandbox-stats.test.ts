// `sandbox stats` through the API and the real CLI, against a real gateway (HTTP, SQLite
// file) on the in-memory driver test double, whose stats are FAKE fixed numbers
// (FAKE_STATS): the shapes, the egress totals from the audit trail of the current
// generation, paging, the bound on runtime samples, and every refusal.
import { spawn } from "node:child_process";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { RuntimeRecord, WorkloadStats } from "../../../src/driver/contract.js";
import { STATS_CONCURRENCY } from "../../../src/gateway/stats/sandbox-stats.js";
import { CLI_ARGS, cli } from "../../support/cli-runner.js";
import { eventually, startTestGateway, type TestGateway } from "../../support/gateway-fixture.js";
import { FAKE_STATS, MemoryDriver } from "../../support/memory-driver.js";

const GIB = 1024 ** 3;
/** Tests that spawn the CLI several times: a deadline that only catches a hang on a loaded machine. */
const SPAWNS_TIMEOUT_MS = 240_000;

let driver: MemoryDriver;
let t: TestGateway;
const run = (...args: string[]) => cli(["--home", t.home.dir, ...args]);

beforeEach(async () => {
  driver = new MemoryDriver();
  t = await startTestGateway(driver);
});
afterEach(async () => {
  await t.close();
});

const phaseOf = async (name: string): Promise<string> => (await t.api("GET", `/v1/sandboxes/${name}`)).body.phase as string;
async function ready(name: string, body: Record<string, unknown> = {}): Promise<string> {
  const r = await t.api("POST", "/v1/sandboxes", { name, ...body });
  expect(r.status).toBe(201);
  await eventually(async () => ((await phaseOf(name)) === "Ready" ? true : undefined), 30_000, `${name} Ready`);
  return r.body.id as string;
}
async function stopped(name: string): Promise<void> {
  await ready(name);
  expect((await t.api("POST", `/v1/sandboxes/${name}/stop`)).status).toBe(202);
  await eventually(async () => ((await phaseOf(name)) === "Stopped" ? true : undefined), 30_000, `${name} Stopped`);
}

const at = (s: number) => new Date(Date.UTC(2026, 11, 1, 0, 0, s)).toISOString();
const egress = (decision: string, extra: Record<string, unknown>) => ({ type: "egress", time: at(0), decision, host: "api.example.com", port: 443, protocol: "https", ...extra });

/** Audit records of generation 1 of `id`: what GET .../stats sums, and one of another generation it must not. */
async function recordTraffic(id: string): Promise<void> {
  await t.gw.store.appendAudit([
    { sandboxId: id, generation: 1, time: at(5), decision: "allow", count: 2, event: egress("allow", { bytesOut: 100, bytesIn: 1000 }) },
    { sandboxId: id, generation: 1, time: at(6), decision: "deny", count: 3, event: egress("deny", { reason: "no_matching_rule" }) },
    { sandboxId: id, generation: 1, time: at(7), decision: "would_deny", count: 1, event: egress("would_deny", { bytesOut: 10, bytesIn: 20 }) },
    // A tunnel's close: its bytes count, it is not another request.
    { sandboxId: id, generation: 1, time: at(8), decision: "allow", count: 1, event: egress("allow", { activity: "close", bytesOut: 500, bytesIn: 600 }) },
    { sandboxId: id, generation: 1, time: at(9), decision: "dropped", count: 4, event: { type: "dropped", reason: "audit_rate_limit" } },
    { sandboxId: id, generation: 7, time: at(1), decision: "allow", count: 50, event: egress("allow", { bytesOut: 99_999, bytesIn: 99_999 }) },
  ]);
}
const TRAFFIC = { bytesOut: 610, bytesIn: 1620, allowed: 3, denied: 3, wouldDeny: 1, dropped: 4, since: at(5) };

describe("GET /v1/sandboxes/:name/stats", () => {
  it("gives a Ready sandbox's CPU, memory and pids (the runtime's), its workspace, and its generation's egress", async () => {
    const id = await ready("st", { disk: "64M" });
    await recordTraffic(id);
    const r = await t.api("GET", "/v1/sandboxes/st/stats");
    expect(r.status).toBe(200);
    expect(r.body).toEqual({
      id,
      name: "st",
      phase: "Ready",
      generation: 1,
      time: expect.stringMatching(/^\d{4}-\d\d-\d\dT/),
      cpuPercent: FAKE_STATS.cpuPercent,
      memory: FAKE_STATS.memory,
      pids: FAKE_STATS.pids,
      disk: { limitBytes: 64 * 1024 * 1024, usedBytes: null, capacityBytes: null },
      egress: TRAFFIC,
      dropped: null,
      error: null,
    });
    // By id too; a sandbox without traffic has zeros and no window.
    await ready("quiet");
    expect((await t.api("GET", `/v1/sandboxes/${id}/stats`)).body.name).toBe("st");
    expect((await t.api("GET", "/v1/sandboxes/quiet/stats")).body.egress).toEqual({ bytesOut: 0, bytesIn: 0, allowed: 0, denied: 0, wouldDeny: 0, dropped: 0, since: null });
  });

  it("refuses a sandbox that is not Ready (409 naming its phase), an unknown one (404), a malformed name (400)", async () => {
    await stopped("off");
    let provision: () => void = () => undefined;
    driver.gate = new Promise((r) => (provision = r)); // the launch waits: "slow" stays Provisioning
    try {
      await refusals();
    } finally {
      provision();
    }
  });

  /** Each refusal, while "slow" is held in Provisioning. */
  async function refusals(): Promise<void> {
    expect((await t.api("POST", "/v1/sandboxes", { name: "slow" })).status).toBe(201);
    for (const [name, phase] of [["off", "Stopped"], ["slow", "Provisioning"]]) {
      const r = await t.api("GET", `/v1/sandboxes/${name}/stats`);
      expect(r.status).toBe(409);
      expect(r.body.error).toEqual({ code: "not_allowed", message: `sandbox "${name}" is ${phase}: stats are measured only while it is Ready` });
    }
    expect((await t.api("GET", "/v1/sandboxes/nope/stats")).status).toBe(404);
    const bad = await t.api("GET", "/v1/sandboxes/Bad_Name!/stats");
    expect(bad.status).toBe(400);
    expect(bad.body.error.code).toBe("invalid_request");
  }

  it("503 naming the runtime's problem when it cannot measure", async () => {
    await ready("st");
    driver.statsError = "cannot connect to the Docker daemon";
    const r = await t.api("GET", "/v1/sandboxes/st/stats");
    expect(r.status).toBe(503);
    expect(r.body.error).toEqual({ code: "unavailable", message: 'cannot measure sandbox "st": cannot connect to the Docker daemon' });
  });
});

describe("GET /v1/stats: every Ready sandbox, a page at a time", () => {
  it("pages the Ready sandboxes in name order and leaves the others out", async () => {
    for (const n of ["c", "a", "b"]) await ready(n);
    await stopped("aa");
    const p1 = await t.api("GET", "/v1/stats?limit=2");
    expect(p1.status).toBe(200);
    expect(p1.body.stats.map((s: { name: string }) => s.name)).toEqual(["a", "b"]);
    expect(p1.body.next).toBe("b");
    const p2 = await t.api("GET", "/v1/stats?limit=2&after=b");
    expect(p2.body.stats.map((s: { name: string }) => s.name)).toEqual(["c"]);
    expect(p2.body.next).toBeNull();
    expect((await t.api("GET", "/v1/stats")).body.stats).toHaveLength(3);
    expect(p1.body.stats[0]).toMatchObject({ cpuPercent: FAKE_STATS.cpuPercent, memory: FAKE_STATS.memory, error: null });
  });

  it("a row the runtime cannot measure says why, with no figures; the page still answers", async () => {
    await ready("a");
    driver.statsError = "daemon restarting";
    const r = await t.api("GET", "/v1/stats");
    expect(r.status).toBe(200);
    expect(r.body.stats[0]).toMatchObject({ name: "a", cpuPercent: null, memory: null, pids: null, error: "daemon restarting" });
  });

  it("refuses a page size or cursor outside what is allowed, naming the value", async () => {
    for (const [q, msg] of [
      ["limit=0", 'limit: must be a whole number from 1 to 100; got "0"'],
      ["limit=101", 'limit: must be a whole number from 1 to 100; got "101"'],
      ["limit=ten", 'limit: must be a whole number from 1 to 100; got "ten"'],
    ]) {
      const r = await t.api("GET", `/v1/stats?${q}`);
      expect(r.status, q).toBe(400);
      expect(r.body.error.message).toBe(msg);
    }
    expect((await t.api("GET", "/v1/stats?after=Not_A_Name")).status).toBe(400);
    expect((await t.api("GET", "/v1/stats?phase=Ready")).status).toBe(400);
  });

  it(`asks the runtime for at most ${STATS_CONCURRENCY} samples at once, and measures every row`, async () => {
    const n = STATS_CONCURRENCY + 8;
    for (let i = 0; i < n; i++) await ready(`s-${String(i).padStart(2, "0")}`);
    const measure = driver.stats.bind(driver);
    let active = 0;
    let most = 0;
    const release: (() => void)[] = [];
    driver.stats = async (record: RuntimeRecord): Promise<WorkloadStats> => {
      most = Math.max(most, ++active);
      // Held until the test has seen how many were asked at once.
      await new Promise<void>((r) => release.push(r));
      active--;
      return measure(record);
    };
    const page = t.api("GET", "/v1/stats");
    await eventually(() => (release.length >= STATS_CONCURRENCY ? true : undefined), 30_000, "the first samples asked for");
    for (;;) {
      const next = release.shift();
      if (next) next();
      else if ((await Promise.race([page.then(() => "done"), new Promise((r) => setTimeout(() => r("wait"), 10))])) === "done") break;
    }
    const r = await page;
    expect(most).toBe(STATS_CONCURRENCY);
    expect(r.body.stats).toHaveLength(n);
    expect(r.body.stats.every((s: { error: string | null }) => s.error === null)).toBe(true);
  });
});

describe("sandgate sandbox stats", () => {
  it("--no-stream prints one table row for NAME; --json the view", { timeout: SPAWNS_TIMEOUT_MS }, async () => {
    const id = await ready("st");
    await recordTraffic(id);
    const r = await run("sandbox", "stats", "st", "--no-stream");
    expect(r.code, r.stderr).toBe(0);
    const lines = r.stdout.trimEnd().split("\n");
    expect(lines).toHaveLength(2);
    expect(lines[0]).toMatch(/^NAME\s+CPU %\s+MEM USAGE \/ LIMIT\s+MEM %\s+PIDS\s+DISK USED \/ LIMIT\s+EGRESS OUT \/ IN\s+ALLOWED\s+DENIED$/);
    expect(lines[1]!.split(/\s{2,}/)).toEqual(["st", "1.50%", "8 MiB / 256 MiB", "3.13%", "3 / 256", "- / 10 GiB", "610 B / 1.6 KiB", "3", "3"]);
    const j = await run("sandbox", "stats", "st", "--no-stream", "--json");
    expect(j.code, j.stderr).toBe(0);
    expect(JSON.parse(j.stdout)).toMatchObject({ name: "st", memory: FAKE_STATS.memory, disk: { limitBytes: 10 * GIB }, egress: TRAFFIC });
  });

  it("without NAME: one row per Ready sandbox in name order, others left out; --limit caps it", { timeout: SPAWNS_TIMEOUT_MS }, async () => {
    const none = await run("sandbox", "stats", "--no-stream");
    expect(none.code, none.stderr).toBe(0);
    expect(none.stdout).toBe("no Ready sandboxes\n");
    for (const n of ["b", "a", "c"]) await ready(n);
    await stopped("off");
    const r = await run("sandbox", "stats", "--no-stream");
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout.trimEnd().split("\n").slice(1).map((l) => l.split(/\s+/)[0])).toEqual(["a", "b", "c"]);
    const j = await run("sandbox", "stats", "--no-stream", "--json", "--limit", "2");
    expect(j.code, j.stderr).toBe(0);
    expect(JSON.parse(j.stdout).map((s: { name: string }) => s.name)).toEqual(["a", "b"]);
  });

  it("a sandbox not Ready, unknown, unmeasurable or a bad flag: one line and the documented exit code", { timeout: SPAWNS_TIMEOUT_MS }, async () => {
    await stopped("off");
    const off = await run("sandbox", "stats", "off", "--no-stream");
    expect(off.code).toBe(5);
    expect(off.stderr).toBe('sandgate: sandbox "off" is Stopped: stats are measured only while it is Ready\n');
    const nope = await run("sandbox", "stats", "nope", "--no-stream");
    expect(nope.code).toBe(4);
    expect(nope.stderr).toBe('sandgate: no sandbox named "nope"\n');
    const limit = await run("sandbox", "stats", "--limit", "0");
    expect(limit.code).toBe(2);
    expect(limit.stderr).toBe('sandgate: --limit must be a whole number from 1 to 1000000; got "0" (run with --help for usage)\n');
    await ready("st");
    driver.statsError = "daemon restarting";
    const down = await run("sandbox", "stats", "st", "--no-stream");
    expect(down.code).toBe(1);
    expect(down.stderr).toBe('sandgate: cannot measure sandbox "st": daemon restarting\n');
    expect(down.stdout).toBe("");
  });

  it("without --no-stream refreshes until Ctrl-C, then exits 0", { timeout: SPAWNS_TIMEOUT_MS }, async () => {
    await ready("st");
    const child = spawn(CLI_ARGS[0]!, [...CLI_ARGS.slice(1), "--home", t.home.dir, "sandbox", "stats", "--json"], { stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, SANDGATE_URL: undefined, SANDGATE_TOKEN: undefined } });
    let out = "";
    child.stdout.on("data", (d: Buffer) => (out += d.toString()));
    const exited = new Promise<number | null>((r) => child.once("exit", (code) => r(code)));
    // Two refreshes, the second after a change: it shows the new sandbox.
    await eventually(() => (out.split("\n").filter(Boolean).length >= 1 ? true : undefined), 60_000, "the first refresh");
    await ready("st2");
    await eventually(() => (out.includes('"st2"') ? true : undefined), 60_000, "a refresh with st2");
    child.kill("SIGINT");
    expect(await exited).toBe(0);
    const refreshes = out.trim().split("\n").map((l) => JSON.parse(l) as { name: string }[]);
    expect(refreshes[0]!.map((s) => s.name)).toEqual(["st"]);
    expect(refreshes.at(-1)!.map((s) => s.name)).toEqual(["st", "st2"]);
  });

  it("--help describes the command, NAME and every flag", async () => {
    const r = await run("sandbox", "stats", "--help");
    expect(r.code).toBe(0);
    for (const s of ["[name]", "--no-stream", "--limit <n>", "--json", "Ctrl-C"]) expect(r.stdout).toContain(s);
  });
});
