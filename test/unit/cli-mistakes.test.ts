// A user's mistakes at the command line (issue 12, item 4): each bad input gets
// one clear line naming the value and what is allowed, a documented exit code,
// and changes nothing. The real `sandgate` CLI against a real gateway (HTTP +
// SQLite) on the in-memory driver test double.

import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { cli, type CliRun } from "../support/cli-runner.js";
import { MemoryDriver } from "../support/memory-driver.js";
import { startTestGateway, type TestGateway } from "../support/gateway-fixture.js";

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

describe("CLI mistakes against a gateway", () => {
  let t: TestGateway;
  let home: string[];
  beforeAll(async () => {
    t = await startTestGateway(new MemoryDriver());
    home = ["--home", t.home.dir];
  });
  afterAll(() => t.close());

  const snapshot = (): unknown => [
    t.gw.store.db.prepare("SELECT id, name, phase, generation FROM sandboxes ORDER BY id").all(),
    t.gw.store.db.prepare("SELECT count(*) AS n FROM events").get(),
    t.gw.store.db.prepare("SELECT count(*) AS n FROM policies").get(),
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
});
