// `sandbox create --label`, `sandbox list` (labels, phase, -q, formats) and `sandbox
// prune` as a user meets them: the real CLI process against a real gateway (HTTP +
// SQLite) on the in-memory driver test double. Bad input is one line, exit 2, and
// changes nothing.

import { execFile } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parse as parseYaml } from "yaml";
import { PHASES, type Phase } from "../../../src/lifecycle/phases.js";
import { CLI_COMMAND, cli, type CliRun } from "../../support/cli-runner.js";
import { MemoryDriver } from "../../support/memory-driver.js";
import { eventually, startTestGateway, type TestGateway } from "../../support/gateway-fixture.js";

const SPAWNS = { timeout: 240_000 };

/** One line on stderr, no stack trace. */
function oneLine(r: CliRun): string {
  const lines = r.stderr.trim().split("\n");
  expect(lines, r.stderr).toHaveLength(1);
  expect(r.stderr).not.toMatch(/\bat .+:\d+:\d+/);
  return lines[0]!;
}

/** The memory driver, whose removals wait while `hold` is set (a test keeps a deletion under way). */
class HeldDriver extends MemoryDriver {
  hold: Promise<void> | undefined;
  override async remove(sandboxId: string): Promise<void> {
    await this.hold;
    return super.remove(sandboxId);
  }
}

let t: TestGateway;
let driver: HeldDriver;
let home: string[];
const state = () => t.gw.sqlite!.db.prepare("SELECT (SELECT count(*) FROM sandboxes) s, (SELECT count(*) FROM events) e, (SELECT max(updated_at) FROM sandboxes) u").get();

beforeAll(async () => {
  driver = new HeldDriver();
  t = await startTestGateway(driver);
  home = ["--home", t.home.dir];
});
afterAll(() => t.close());

async function create(name: string, labels: Record<string, string> = {}): Promise<string> {
  const r = await t.api("POST", "/v1/sandboxes", { name, labels });
  expect(r.status, JSON.stringify(r.body)).toBe(201);
  return r.body.id as string;
}

/** Puts a Ready sandbox in `phase` (Stopped through the API; Error and Completed as the gateway records them), last changed `ageMs` ago. */
async function settle(name: string, phase: Phase, ageMs = 0): Promise<void> {
  await t.gw.idle();
  if (phase === "Stopped") {
    expect((await t.api("POST", `/v1/sandboxes/${name}/stop`)).status).toBe(202);
    await t.gw.idle();
  } else if (phase !== "Ready") {
    const s = (await t.gw.store.get(name))!;
    const reason = phase === "Error" ? ({ code: "WorkloadExited", exitCode: 1 } as const) : null;
    expect(await t.gw.store.transition(s.id, { expect: { phase: "Ready", generation: s.generation }, next: { phase, generation: s.generation, reason } })).not.toBeNull();
  }
  if (ageMs > 0) t.gw.sqlite!.db.prepare("UPDATE sandboxes SET updated_at = ? WHERE name = ?").run(new Date(Date.now() - ageMs).toISOString(), name);
  expect((await t.gw.store.get(name))!.phase).toBe(phase);
}

const namesOf = (stdout: string): string[] => stdout.trimEnd().split("\n").slice(1).map((l) => l.split(/\s+/)[0]!);

describe("sandbox create --label", () => {
  it("keeps the labels; get shows them", SPAWNS, async () => {
    const r = await cli([...home, "sandbox", "create", "cl-made", "--label", "app=web", "--label", "example.com/team=a b", "--json"]);
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout).labels).toEqual({ app: "web", "example.com/team": "a b" });
    expect((await cli([...home, "sandbox", "get", "cl-made"])).stdout).toMatch(/^labels\s+app=web,example\.com\/team=a b$/m);
  });

  it("refuses a bad, reserved, hostile or repeated label before anything is sent: exit 2, one line, nothing created", SPAWNS, async () => {
    const before = state();
    const cases: [string, RegExp][] = [
      ["app", /^sandgate: --label: expected KEY=VALUE, got "app" \(run with --help for usage\)$/],
      ["sandgate.gateway=other", /^sandgate: --label: label key "sandgate.gateway" is reserved: keys starting with sandgate\., .* belong to Sandgate and Docker/],
      ["SandGate.Nonce=x", /is reserved/],
      [`k=${"v".repeat(300)}`, /^sandgate: --label: invalid value "v{40}"… \(300 characters\) of label "k": 0-256 printable ASCII characters/],
      [`${"k".repeat(200)}=v`, /^sandgate: --label: invalid label key "k{40}"… \(200 characters\)/],
      ["k=a\u001b[31mred", /^sandgate: --label: invalid value "a\\u001b\[31mred" of label "k"/],
      ["k=line\nsandgate.gateway=x", /^sandgate: --label: invalid value "line\\nsandgate.gateway=x"/],
    ];
    for (const [label, message] of cases) {
      const r = await cli([...home, "sandbox", "create", "cl-bad", "--label", label]);
      expect(r.code, label).toBe(2);
      expect(oneLine(r)).toMatch(message);
    }
    const twice = await cli([...home, "sandbox", "create", "cl-bad", "--label", "a=1", "--label", "a=2"]);
    expect(twice.code).toBe(2);
    expect(oneLine(twice)).toBe('sandgate: --label: label "a" is given twice');
    const many = await cli([...home, "sandbox", "create", "cl-bad", ...Array.from({ length: 65 }, (_, i) => ["--label", `k${i}=v`]).flat()]);
    expect(many.code).toBe(2);
    expect(oneLine(many)).toBe("sandgate: --label: 65 labels; a sandbox has at most 64");
    expect(state()).toEqual(before);
  });
});

describe("sandbox list", () => {
  beforeAll(async () => {
    await create("ls-a", { grp: "ls", tier: "web" });
    await create("ls-b", { grp: "ls", tier: "db" });
    await create("ls-c", { grp: "ls", tier: "web", zone: "x" });
    await settle("ls-c", "Stopped");
  });

  it("--label (repeatable, all must match) and --phase filter; -q prints names only", SPAWNS, async () => {
    expect(namesOf((await cli([...home, "sandbox", "list", "--label", "grp=ls"])).stdout)).toEqual(["ls-a", "ls-b", "ls-c"]);
    expect(namesOf((await cli([...home, "sandbox", "list", "--label", "grp=ls", "--label", "tier=web"])).stdout)).toEqual(["ls-a", "ls-c"]);
    expect((await cli([...home, "sandbox", "ls", "--label", "grp=ls", "--phase", "Stopped", "-q"])).stdout).toBe("ls-c\n");
    expect((await cli([...home, "sandbox", "ls", "--label", "grp=ls", "--phase", "Ready", "-q"])).stdout).toBe("ls-a\nls-b\n");
    expect((await cli([...home, "sandbox", "ls", "--label", "grp=nobody", "-q"])).stdout).toBe("");
    expect((await cli([...home, "sandbox", "ls", "--label", "grp=nobody"])).stdout).toBe("no sandboxes match\n");
    expect((await cli([...home, "sandbox", "ls", "--label", "grp=ls", "--limit", "2", "-q"])).stdout).toBe("ls-a\nls-b\n");
  });

  it("--format json (= --json), yaml, wide and table", SPAWNS, async () => {
    const json = await cli([...home, "sandbox", "list", "--label", "grp=ls", "--format", "json"]);
    const rows = JSON.parse(json.stdout) as { name: string; labels: Record<string, string>; phase: string }[];
    expect(rows.map((r) => [r.name, r.phase, r.labels])).toEqual([
      ["ls-a", "Ready", { grp: "ls", tier: "web" }],
      ["ls-b", "Ready", { grp: "ls", tier: "db" }],
      ["ls-c", "Stopped", { grp: "ls", tier: "web", zone: "x" }],
    ]);
    expect((await cli([...home, "sandbox", "list", "--label", "grp=ls", "--json"])).stdout).toBe(json.stdout);
    const yaml = await cli([...home, "sandbox", "list", "--label", "grp=ls", "--format", "yaml"]);
    expect(parseYaml(yaml.stdout)).toEqual(rows);
    expect((await cli([...home, "sandbox", "list", "--label", "grp=nobody", "--format", "yaml"])).stdout).toBe("[]\n");
    const wide = (await cli([...home, "sandbox", "list", "--label", "grp=ls", "--format", "wide"])).stdout.trimEnd().split("\n");
    expect(wide[0]).toMatch(/^NAME\s+PHASE\s+GEN\s+REASON\s+WORKLOAD\s+SUPERVISOR\s+CREATED\s+UPDATED\s+HOST\s+IMAGE\s+LABELS$/);
    expect(wide[3]).toMatch(/^ls-c\s+Stopped\s+1\s+-\s+-\s+-\s+\S+ \S+\s+\S+ \S+\s+\S+\s+\(default\)\s+grp=ls,tier=web,zone=x$/);
    expect(wide[1]).toMatch(/^ls-a\s+Ready\s+1\s+-\s+c\d+\s+c\d+\s/);
    const table = (await cli([...home, "sandbox", "list", "--label", "grp=ls", "--format", "table"])).stdout;
    expect(table.split("\n")[0]).toMatch(/^NAME\s+PHASE\s+GEN\s+REASON\s+WORKLOAD\s+SUPERVISOR\s+CREATED$/);
  });

  it("a bad phase, label, format or a contradiction is exit 2 in one line, naming what is allowed", SPAWNS, async () => {
    const bad = async (args: string[]): Promise<string> => {
      const r = await cli([...home, "sandbox", "list", ...args]);
      expect(r.code, args.join(" ")).toBe(2);
      expect(r.stdout).toBe("");
      return oneLine(r);
    };
    expect(await bad(["--phase", "ready"])).toBe(`sandgate: --phase must be one of ${PHASES.join(", ")}; got "ready" (run with --help for usage)`);
    expect(await bad(["--label", "grp"])).toBe('sandgate: --label: expected KEY=VALUE, got "grp" (run with --help for usage)');
    expect(await bad(["--label", "=x"])).toMatch(/^sandgate: --label: invalid label key ""/);
    expect(await bad(["--label", "a\u0007=x"])).toMatch(/^sandgate: --label: invalid label key "a\\u0007"/);
    expect(await bad(["--format", "xml"])).toBe('sandgate: --format must be one of table, json, yaml, wide; got "xml" (run with --help for usage)');
    expect(await bad(["--json", "--format", "yaml"])).toBe("sandgate: --json is --format json; it contradicts --format yaml");
    expect(await bad(["-q", "--json"])).toBe("sandgate: -q prints names only, one per line; it takes no --format or --json");
  });
});

describe("sandbox prune", () => {
  const HOUR = 3_600_000;
  /** Sandboxes of one test, by group label: name → [phase, age]. */
  async function fleet(grp: string, spec: Record<string, [Phase, number]>): Promise<Record<string, string>> {
    const ids: Record<string, string> = {};
    for (const name of Object.keys(spec)) ids[name] = await create(name, { grp });
    for (const [name, [phase, age]] of Object.entries(spec)) await settle(name, phase, age);
    return ids;
  }
  const left = async (grp: string): Promise<string[]> => (await t.gw.store.list()).filter((s) => s.labels.grp === grp).map((s) => s.name).sort();

  it("a bad --older-than, --phase, --label or --limit is exit 2 in one line and deletes nothing", SPAWNS, async () => {
    await fleet("pb", { "pb-1": ["Stopped", 0] });
    const before = state();
    const cases: [string[], RegExp][] = [
      [["--older-than", "yesterday"], /^sandgate: --older-than must be a duration from 0 s to 3650 d \(e\.g\. 60, 90s, 5m, 2h, 7d\); got "yesterday"/],
      [["--older-than", "-1h"], /--older-than must be a duration .*got "-1h"/],
      [["--older-than", "7w"], /--older-than must be a duration .*got "7w"/],
      [["--older-than", "99999d"], /--older-than must be a duration .*got "99999d"/],
      [["--phase", "Ready"], /^sandgate: --phase must be a comma-separated list of Completed, Error, Stopped \(prune deletes only sandboxes that have ended\); got "Ready"/],
      [["--phase", "Stopped,"], /--phase must be a comma-separated list .*got "Stopped,"/],
      [["--phase", "stopped"], /got "stopped"/],
      [["--label", "grp"], /^sandgate: --label: expected KEY=VALUE, got "grp"/],
      [["--limit", "0"], /^sandgate: --limit must be a whole number from 1 to 1000000; got "0"/],
    ];
    for (const [args, message] of cases) {
      const r = await cli([...home, "sandbox", "prune", "--force", "--label", "grp=pb", ...args]);
      expect(r.code, args.join(" ")).toBe(2);
      expect(r.stdout).toBe("");
      expect(oneLine(r)).toMatch(message);
    }
    expect(state()).toEqual(before);
    expect(await left("pb")).toEqual(["pb-1"]);
  });

  it("without --force and without a terminal it refuses (exit 2) and deletes nothing; --dry-run lists what it would delete", SPAWNS, async () => {
    await fleet("pr", { "pr-stopped": ["Stopped", 0], "pr-error": ["Error", 0], "pr-ready": ["Ready", 0] });
    const before = state();
    const r = await cli([...home, "sandbox", "prune", "--label", "grp=pr"]);
    expect(r.code).toBe(2);
    expect(r.stdout).toBe("");
    expect(oneLine(r)).toBe("sandgate: refusing to delete 2 sandboxes without confirmation: stdin is not a terminal; list them with --dry-run, delete them with --force");
    const dry = await cli([...home, "sandbox", "prune", "--label", "grp=pr", "--dry-run"]);
    expect(dry.code, dry.stderr).toBe(0);
    expect(namesOf(dry.stdout)).toEqual(["pr-error", "pr-stopped"]);
    expect(dry.stdout.split("\n")[0]).toMatch(/^NAME\s+PHASE\s+GEN\s+LAST CHANGE$/);
    const dryJson = JSON.parse((await cli([...home, "sandbox", "prune", "--label", "grp=pr", "--dry-run", "--json", "--phase", "Error"])).stdout) as { name: string; phase: string }[];
    expect(dryJson.map((c) => [c.name, c.phase])).toEqual([["pr-error", "Error"]]);
    expect(state()).toEqual(before);
    expect(await left("pr")).toEqual(["pr-error", "pr-ready", "pr-stopped"]);
  });

  it("--force deletes the ended sandboxes older than --older-than in the chosen phases, with progress and a summary; nothing running", SPAWNS, async () => {
    await fleet("pf", {
      "pf-old-stopped": ["Stopped", 3 * HOUR],
      "pf-old-error": ["Error", 3 * HOUR],
      "pf-old-completed": ["Completed", 3 * HOUR],
      "pf-new-stopped": ["Stopped", 0],
      "pf-old-ready": ["Ready", 3 * HOUR],
    });
    const nothing = await cli([...home, "sandbox", "prune", "--label", "grp=pf", "--older-than", "1d"]);
    expect(nothing.code).toBe(0);
    expect(nothing.stdout).toBe("nothing to prune\n");

    const r = await cli([...home, "sandbox", "prune", "--label", "grp=pf", "--older-than", "2h", "--phase", "Stopped,Error", "--force"]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toBe("pf-old-error  deleted\npf-old-stopped  deleted\npruned 2 of 2 sandboxes\n");
    expect(r.stderr).toBe("deleting pf-old-error (1/2)\ndeleting pf-old-stopped (2/2)\n");
    expect(await left("pf")).toEqual(["pf-new-stopped", "pf-old-completed", "pf-old-ready"]);

    const j = await cli([...home, "sandbox", "prune", "--label", "grp=pf", "--older-than", "30m", "--force", "--json"]);
    expect(j.code, j.stderr).toBe(0);
    expect(j.stderr).toBe("");
    expect((JSON.parse(j.stdout) as { name: string; result: string }[]).map((o) => [o.name, o.result])).toEqual([["pf-old-completed", "deleted"]]);
    expect(await left("pf")).toEqual(["pf-new-stopped", "pf-old-ready"]);
  });

  it("a sandbox started again after it was listed is skipped, never deleted", SPAWNS, async () => {
    await fleet("ps", { "ps-1": ["Stopped", 0], "ps-2": ["Stopped", 0] });
    let release!: () => void;
    driver.hold = new Promise((r) => (release = r));
    const run = cli([...home, "sandbox", "prune", "--label", "grp=ps", "--force"]);
    try {
      // ps-1's deletion is under way (its removal held): start ps-2 again before prune reaches it.
      await eventually(async () => ((await t.gw.store.get("ps-1"))?.phase === "Deleting" ? true : undefined), 60_000, "ps-1 Deleting");
      expect((await t.api("POST", "/v1/sandboxes/ps-2/start")).status).toBe(202);
    } finally {
      driver.hold = undefined;
      release();
    }
    const r = await run;
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toBe(
      'ps-1  deleted\nps-2  skipped: sandbox "ps-2" is at generation 2, not 1 as the request expects; nothing was done\npruned 1 of 2 sandboxes; 1 skipped (changed since listed)\n',
    );
    await t.gw.idle();
    expect(await left("ps")).toEqual(["ps-2"]);
    expect((await t.gw.store.get("ps-2"))!.phase).toBe("Ready");
  });
});

describe("sandbox prune on a terminal (tmux)", () => {
  const run = promisify(execFile);
  let dir: string;
  const tmux = async (...args: string[]): Promise<string> => (await run("tmux", ["-S", join(dir, "tmux.sock"), "-f", "/dev/null", ...args], { timeout: 10_000 })).stdout;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), "sg-prune-tty-"));
  });
  afterAll(async () => {
    await tmux("kill-server").catch(() => undefined);
    rmSync(dir, { recursive: true, force: true });
  });

  /** Runs prune in a tmux pane, answers the question, returns its exit code and the pane. */
  async function answer(grp: string, reply: string): Promise<{ code: number; pane: string }> {
    const status = join(dir, `${grp}.status`);
    rmSync(status, { force: true });
    await tmux("new-session", "-d", "-s", grp, "-x", "160", "-y", "40", `${CLI_COMMAND} --home ${t.home.dir} sandbox prune --label grp=${grp}; echo $? > ${status}; sleep 60`);
    const pane = (): Promise<string> => tmux("capture-pane", "-p", "-t", grp);
    await eventually(async () => ((await pane()).includes("[y/N]") ? true : undefined), 60_000, "the question").catch(async (err: unknown) => {
      throw new Error(`${(err as Error).message}\n--- pane ---\n${await pane()}`);
    });
    await tmux("send-keys", "-t", grp, reply, "Enter");
    const code = await eventually(() => {
      try {
        return Number(readFileSync(status, "utf8").trim());
      } catch {
        return undefined;
      }
    }, 60_000, "prune to end");
    return { code, pane: await pane() };
  }

  it("lists what it would delete and asks; n deletes nothing, y deletes them", SPAWNS, async () => {
    for (const name of ["tty-1", "tty-2"]) await create(name, { grp: "tty" });
    await settle("tty-1", "Stopped");
    await settle("tty-2", "Stopped");
    const no = await answer("tty", "n");
    expect(no.code).toBe(0);
    expect(no.pane).toMatch(/^NAME\s+PHASE\s+GEN\s+LAST CHANGE\s*\ntty-1\s+Stopped\s+1\s.*\ntty-2\s+Stopped/m);
    expect(no.pane).toMatch(/Delete these 2 sandboxes\? \[y\/N\] n\s*\nnothing deleted/);
    expect((await t.gw.store.list()).filter((s) => s.labels.grp === "tty")).toHaveLength(2);
    await tmux("kill-session", "-t", "tty");
    const yes = await answer("tty", "y");
    expect(yes.code).toBe(0);
    expect(yes.pane).toMatch(/tty-1 {2}deleted\s*\n(.*\n)?tty-2 {2}deleted\s*\n(.*\n)?pruned 2 of 2 sandboxes/);
    expect((await t.gw.store.list()).filter((s) => s.labels.grp === "tty")).toHaveLength(0);
  });
});
