// The CLI as a new user meets it: a real `sandgate` process against a real
// gateway (HTTP + SQLite) on the in-memory driver test double.

import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { CLI_TEST_TIMEOUT_MS, cli, type CliRun as Run } from "../../support/cli-runner.js";
import { MemoryDriver } from "../../support/memory-driver.js";
import { freePort } from "../../support/net.js";
import { startTestGateway, type TestGateway } from "../../support/gateway-fixture.js";

// Spawn-heavy: see CLI_TEST_TIMEOUT_MS.
vi.setConfig({ testTimeout: CLI_TEST_TIMEOUT_MS });

/** One line, no stack trace. */
function oneLine(r: Run): string {
  const lines = r.stderr.trim().split("\n");
  expect(lines, r.stderr).toHaveLength(1);
  expect(r.stderr).not.toMatch(/\bat .+:\d+:\d+/);
  return lines[0]!;
}

describe("CLI without a gateway", () => {
  const emptyHome = mkdtempSync(join(tmpdir(), "sg-cli-empty-"));
  afterAll(() => rmSync(emptyHome, { recursive: true, force: true }));

  it("says the gateway is not running, in one line, exit 3", async () => {
    for (const args of [["sandbox", "list"], ["gateway", "status"]]) {
      const r = await cli(["--home", emptyHome, ...args]);
      expect(r.code).toBe(3);
      expect(oneLine(r)).toMatch(/^sandgate: the gateway is not running .*sandgate gateway start$/);
    }
  });

  it("says so too when the address file points at a dead gateway", async () => {
    writeFileSync(join(emptyHome, "token"), "x\n");
    const port = await freePort();
    const sock = join(emptyHome, "api.sock");
    writeFileSync(join(emptyHome, "gateway.json"), JSON.stringify({ url: `unix://${sock}`, listeners: [`unix://${sock}`, `https://127.0.0.1:${port}`], pid: 1 }));
    const r = await cli(["--home", emptyHome, "sandbox", "get", "demo"]);
    expect(r.code).toBe(3);
    expect(oneLine(r)).toBe(`sandgate: the gateway is not running at unix://${sock}: ENOENT; start it with: sandgate gateway start`);
    // An address file of a gateway from before the API moved to its socket says what to do.
    writeFileSync(join(emptyHome, "gateway.json"), JSON.stringify({ url: `http://127.0.0.1:${port}`, pid: 1 }));
    const old = await cli(["--home", emptyHome, "sandbox", "get", "demo"]);
    expect(old.code).toBe(3);
    expect(oneLine(old)).toBe(`sandgate: cannot find the gateway: ${join(emptyHome, "gateway.json")} was written by an older gateway (its API was plain HTTP at http://127.0.0.1:${port}); restart it: sandgate gateway stop, then sandgate gateway start`);
  });

  it("has --help everywhere, exit 0", async () => {
    for (const args of [["--help"], ["sandbox", "--help"], ["sandbox", "create", "--help"], ["gateway", "start", "--help"]]) {
      const r = await cli(args);
      expect(r.code, args.join(" ")).toBe(0);
      expect(r.stdout).toMatch(/Usage: sandgate/);
    }
  });

  it("rejects bad arguments with exit 2", async () => {
    const r = await cli(["--home", emptyHome, "sandbox", "create", "demo", "--memory", "lots"]);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/--memory must be a whole number from 16 to 1048576; got "lots"/);
    const unknown = await cli(["sandbox", "frobnicate"]);
    expect(unknown.code).toBe(2);
  });
});

describe("CLI against a gateway", () => {
  let t: TestGateway;
  let home: string[];
  beforeAll(async () => {
    t = await startTestGateway(new MemoryDriver());
    home = ["--home", t.home.dir];
  });
  afterAll(() => t.close());

  const rows = () => t.gw.sqlite!.db.prepare("SELECT (SELECT count(*) FROM sandboxes) s, (SELECT count(*) FROM events) e").get();

  it("create, list, get, stop, start, events and delete, as tables and as --json", async () => {
    // Other tests' sandboxes may be there too (any order): the end state is this start state.
    const listBefore = (await cli([...home, "sandbox", "list"])).stdout;
    const created = await cli([...home, "sandbox", "create", "demo", "--memory", "128", "-e", "A=1"]);
    expect(created.code, created.stderr).toBe(0);
    expect(created.stdout).toBe("demo  Ready  generation 1\n");
    expect(created.stderr).toMatch(/creating sandbox "demo"/);
    expect(created.stderr).toMatch(/Provisioning → Ready/);

    const list = await cli([...home, "sandbox", "list"]);
    expect(list.stdout).toMatch(/^NAME\s+PHASE\s+GEN/);
    expect(list.stdout).toMatch(/\ndemo\s+Ready\s+1\s/);

    const get = await cli([...home, "sandbox", "get", "demo", "--json"]);
    const s = JSON.parse(get.stdout);
    expect(s).toMatchObject({ name: "demo", phase: "Ready", generation: 1, spec: { env: { A: "1" }, resources: { memoryMb: 128 } } });

    const human = await cli([...home, "sandbox", "get", "demo"]);
    expect(human.stdout).toMatch(/^name\s+demo$/m);
    expect(human.stdout).toMatch(/^phase\s+Ready$/m);

    const stop = await cli([...home, "sandbox", "stop", "demo", "--json"]);
    expect(stop.code).toBe(0);
    expect(JSON.parse(stop.stdout).phase).toBe("Stopped");
    expect(stop.stderr).toBe(""); // --json keeps progress quiet

    const start = await cli([...home, "sandbox", "start", "demo"]);
    expect(start.stdout).toBe("demo  Ready  generation 2\n");

    const events = await cli([...home, "sandbox", "events", "demo", "--json"]);
    const phases = (JSON.parse(events.stdout) as { kind: string; newPhase: string }[]).filter((e) => e.kind === "phase").map((e) => e.newPhase);
    expect(phases).toEqual(["Provisioning", "Ready", "Stopping", "Stopped", "Provisioning", "Ready"]);

    const del = await cli([...home, "sandbox", "delete", "demo"]);
    expect(del.code).toBe(0);
    expect(del.stdout).toBe("demo  deleted\n");
    expect((await cli([...home, "sandbox", "list"])).stdout).toBe(listBefore);
    if ((await t.gw.store.list()).length === 0) expect(listBefore).toBe("no sandboxes\n");
  });

  it("unknown sandbox → exit 4; duplicate name → exit 5; invalid name → exit 2; wrong phase → exit 5; nothing changes", { timeout: 240_000 }, async () => {
    await cli([...home, "sandbox", "create", "taken"]);
    const before = rows();

    const unknown = await cli([...home, "sandbox", "get", "nope"]);
    expect(unknown.code).toBe(4);
    expect(oneLine(unknown)).toBe('sandgate: no sandbox named "nope"');

    const dup = await cli([...home, "sandbox", "create", "taken"]);
    expect(dup.code).toBe(5);
    expect(oneLine(dup)).toBe('sandgate: a sandbox named "taken" already exists');

    for (const bad of ["Bad_Name", "x".repeat(64), "-lead", "trail-"]) {
      const r = await cli([...home, "sandbox", "create", "--", bad]);
      expect(r.code, bad).toBe(2);
      expect(oneLine(r)).toMatch(/^sandgate: invalid sandbox name .*: 1-63 characters: lowercase letters, digits and '-'/);
    }

    const phase = await cli([...home, "sandbox", "start", "taken"]);
    expect(phase.code).toBe(5);
    expect(oneLine(phase)).toBe('sandgate: cannot start sandbox "taken": it is Ready; start is allowed from Stopped, Completed or Error');

    expect(rows()).toEqual(before);
  });

  it("wrong token → exit 7 with a hint where the token lives (an exec's WebSocket too); nothing changes", async () => {
    const before = rows();
    const refused = `sandgate: the gateway refused the API token in SANDGATE_TOKEN (missing or wrong bearer token); set it to the token of the gateway at ${t.url}, or unset it to use ${t.home.token}`;
    for (const args of [["sandbox", "create", "sneaky"], ["sandbox", "exec", "sneaky", "--", "true"]]) {
      const r = await cli([...home, ...args], { SANDGATE_TOKEN: "wrong" });
      expect(r.code, args.join(" ")).toBe(7);
      expect(oneLine(r)).toBe(refused);
    }
    expect(rows()).toEqual(before);
  });

  it("gateway status shows the running gateway", async () => {
    const r = await cli([...home, "gateway", "status", "--json"]);
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ url: t.url, pid: process.pid, driver: "memory (test double)" });
    // For people, a table: nested counters row by row, a list of objects (each listener's connections) by index.
    const table = await cli([...home, "gateway", "status"]);
    expect(table.code).toBe(0);
    const rows = new Map(table.stdout.trim().split("\n").slice(1).map((l) => l.split(/\s{2,}/) as [string, string]));
    expect(rows.get("url")).toBe(t.url);
    expect(rows.get("api.listeners")).toBe(JSON.stringify([t.url]));
    expect(rows.get("api.connections[0].url")).toBe(t.url);
    expect(rows.get("api.connections[0].limits.maxUnauthenticated")).toBe("128");
    expect(rows.get("api.connections[0].open.authenticated")).toMatch(/^\d+$/);
  });
});

describe("sandbox list at 250 sandboxes", () => {
  let t: TestGateway;
  let home: string[];
  /** URLs of the list requests the gateway answered (its debug request log drops the query). */
  const listRequests: string[] = [];
  const NAMES = Array.from({ length: 250 }, (_, i) => `many-${String(249 - i).padStart(3, "0")}`);
  const SORTED = [...NAMES].sort();
  beforeAll(async () => {
    t = await startTestGateway(new MemoryDriver(), {
      logSink: (line) => {
        const l = JSON.parse(line) as { msg?: string; method?: string; url?: string };
        if (l.msg === "request" && l.method === "GET" && l.url === "/v1/sandboxes") listRequests.push(l.url);
      },
    });
    home = ["--home", t.home.dir];
    for (let i = 0; i < NAMES.length; i += 25) {
      await Promise.all(NAMES.slice(i, i + 25).map(async (name) => expect((await t.api("POST", "/v1/sandboxes", { name })).status).toBe(201)));
    }
    await t.gw.idle();
  }, 120_000);
  afterAll(() => t.close());

  it("pages through every sandbox: each once, in name order, as a table and as one --json array", async () => {
    listRequests.length = 0;
    const json = await cli([...home, "sandbox", "list", "--json"]);
    expect(json.code, json.stderr).toBe(0);
    const rows = JSON.parse(json.stdout) as { name: string; phase: string; workload: string | null }[];
    expect(rows.map((s) => s.name)).toEqual(SORTED);
    expect(rows.every((s) => s.phase === "Ready" && s.workload !== null)).toBe(true);
    // More than one request: the CLI pages, it never asks for everything at once.
    expect(listRequests.length).toBeGreaterThanOrEqual(3);

    const table = await cli([...home, "sandbox", "ls"]);
    const lines = table.stdout.trimEnd().split("\n");
    expect(lines[0]).toMatch(/^NAME\s+PHASE\s+GEN\s+REASON\s+WORKLOAD\s+SUPERVISOR\s+CREATED$/);
    expect(lines.slice(1).map((l) => l.split(/\s+/)[0])).toEqual(SORTED);
    expect(lines[1]).toMatch(/^many-000\s+Ready\s+1\s+-\s+c\d+\s+c\d+\s+\d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ$/);
  });

  it("--limit N shows only the first N; a bad N is exit 2 naming the value", async () => {
    const some = await cli([...home, "sandbox", "list", "--limit", "120", "--json"]);
    expect((JSON.parse(some.stdout) as { name: string }[]).map((s) => s.name)).toEqual(SORTED.slice(0, 120));
    const few = await cli([...home, "sandbox", "list", "--limit", "3"]);
    expect(few.stdout.trimEnd().split("\n").slice(1).map((l) => l.split(/\s+/)[0])).toEqual(SORTED.slice(0, 3));
    for (const bad of ["0", "x"]) {
      const r = await cli([...home, "sandbox", "list", "--limit", bad]);
      expect(r.code, bad).toBe(2);
      expect(r.stderr).toContain(`--limit must be a whole number from 1 to 1000000; got "${bad}"`);
    }
  });
});
