// policy validate, diff, replay and suggest through the API and the real CLI against a
// real gateway whose audit table (a real SQLite file) holds the recorded traffic.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { CLI_TEST_TIMEOUT_MS, cli } from "../../support/cli-runner.js";
import { eventually, startTestGateway, type TestGateway } from "../../support/gateway-fixture.js";
import { MemoryDriver } from "../../support/memory-driver.js";
import { ACTIVE, TIGHTER } from "../../support/review-policies.js";

// Spawn-heavy: see CLI_TEST_TIMEOUT_MS.
vi.setConfig({ testTimeout: CLI_TEST_TIMEOUT_MS });

describe("policy validate, diff, replay, suggest: API and CLI against a gateway", () => {
  let t: TestGateway;
  let dir: string;
  const run = (...args: string[]) => cli(["--home", t.home.dir, ...args]);

  beforeAll(async () => {
    t = await startTestGateway(new MemoryDriver());
    dir = mkdtempSync(join(tmpdir(), "sg-review-"));
    writeFileSync(join(dir, "active.yaml"), ACTIVE);
    writeFileSync(join(dir, "tighter.yaml"), TIGHTER);
    writeFileSync(join(dir, "bad.yaml"), "version: 1\nnetwork:\n  rules:\n    - name: x\n      endpoints: [{ host: 'a b', port: 99999, protocol: https }]\n");
    expect((await t.api("POST", "/v1/sandboxes", { name: "rev", policy: ACTIVE })).status).toBe(201);
    const s = await eventually(async () => ((await t.api("GET", "/v1/sandboxes/rev")).body?.phase === "Ready" ? (await t.api("GET", "/v1/sandboxes/rev")).body : undefined));
    const at = (h: number) => new Date(Date.UTC(2026, 11, 1, h)).toISOString();
    const egress = (host: string, decision: "allow" | "deny", extra: Record<string, unknown>) => ({ type: "egress", time: at(0), decision, host, port: 443, protocol: "https", ...extra });
    await t.gw.store.appendAudit([
      { sandboxId: s.id, generation: 1, time: at(1), decision: "allow", count: 10, event: egress("api.example.com", "allow", { rule: "api" }) },
      { sandboxId: s.id, generation: 1, time: at(2), decision: "deny", count: 4, event: egress("pypi.org", "deny", { reason: "no_matching_rule" }) },
      { sandboxId: s.id, generation: 1, time: at(3), decision: "allow", count: 1, event: egress("api.example.com", "allow", { rule: "api" }) },
    ]);
  });
  afterAll(async () => {
    await t.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("validate: exit 0 for a valid file, 2 naming every problem, offline", async () => {
    const ok = await cli(["policy", "validate", join(dir, "tighter.yaml")]);
    expect(ok.code).toBe(0);
    expect(ok.stdout).toBe(`${join(dir, "tighter.yaml")}: valid (1 rule, 1 deny entry)\n`);
    // Several problems: one per line, under a line that counts them.
    const bad = await cli(["policy", "validate", join(dir, "bad.yaml")]);
    expect(bad.code).toBe(2);
    const lines = bad.stderr.trim().split("\n");
    expect(lines[0]).toBe(`sandgate: ${join(dir, "bad.yaml")}: invalid policy, ${lines.length - 1} problems:`);
    expect(lines.length).toBeGreaterThanOrEqual(3);
    expect(lines.find((l) => /^ {2}.*host/.test(l))).toBeDefined();
    expect(lines.find((l) => /^ {2}.*port/.test(l))).toBeDefined();
    writeFileSync(join(dir, "one-bad.yaml"), "version: 2\n");
    const one = await cli(["policy", "validate", join(dir, "one-bad.yaml")]);
    expect(one.stderr.trim().split("\n")).toEqual([expect.stringMatching(new RegExp(`^sandgate: ${join(dir, "one-bad.yaml")}: invalid policy: version`))]);
    expect((await cli(["policy", "validate", join(dir, "missing.yaml")])).code).toBe(2);
  });

  it("diff: the changes against the active revision", async () => {
    const r = await run("policy", "diff", "rev", "--policy", join(dir, "tighter.yaml"));
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain("rule removed: api\n  - https api.example.com:443");
    const same = await run("policy", "diff", "rev", "--policy", join(dir, "active.yaml"));
    expect(same.stdout).toBe("no change against revision 1\n");
  });

  it("replay: the recorded traffic the candidate would deny, counted; --since narrows the window", async () => {
    const r = await run("policy", "replay", "rev", "--policy", join(dir, "tighter.yaml"), "--json");
    expect(r.code, r.stderr).toBe(0);
    const body = JSON.parse(r.stdout);
    expect(body.window).toMatchObject({ records: 3, requests: 15, truncated: false });
    expect(body.newlyDenied).toEqual([{ request: "https api.example.com:443", count: 11, lastSeen: "2026-12-01T03:00:00.000Z", because: "no_matching_rule" }]);
    const late = JSON.parse((await run("policy", "replay", "rev", "--policy", join(dir, "tighter.yaml"), "--since", "2026-12-01T02:30:00Z", "--json")).stdout);
    expect(late.newlyDenied).toEqual([{ request: "https api.example.com:443", count: 1, lastSeen: "2026-12-01T03:00:00.000Z", because: "no_matching_rule" }]);
    const bad = await run("policy", "replay", "rev", "--policy", join(dir, "tighter.yaml"), "--since", "yesterday");
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/--since must be an RFC 3339 time .* or a duration back from now .*"yesterday"/);
    // A duration back from now, as logs takes it: all of the week-old records, or none of them.
    const week = JSON.parse((await run("policy", "replay", "rev", "--policy", join(dir, "tighter.yaml"), "--since", "36500d", "--json")).stdout);
    expect(week.window).toMatchObject({ records: 3, requests: 15 });
    const recent = JSON.parse((await run("policy", "replay", "rev", "--policy", join(dir, "tighter.yaml"), "--since", "1h", "--json")).stdout);
    expect(recent.window).toMatchObject({ records: 0, requests: 0 });
    const suggest = JSON.parse((await run("policy", "suggest", "rev", "--since", "1h", "--json")).stdout);
    expect(suggest).toMatchObject({ rules: [], covers: 0 });
  });

  it("suggest → validate → set: the policy with the rules added on stdout validates as it is, its replay allows the denials it was made for and nothing else, and once set nothing is left to suggest", async () => {
    // A sandbox of its own: this test changes its policy.
    expect((await t.api("POST", "/v1/sandboxes", { name: "sug", policy: ACTIVE })).status).toBe(201);
    const s = await eventually(async () => ((await t.api("GET", "/v1/sandboxes/sug")).body?.phase === "Ready" ? (await t.api("GET", "/v1/sandboxes/sug")).body : undefined));
    const time = new Date(Date.UTC(2026, 11, 1, 2)).toISOString();
    const denied = (host: string, port: number, protocol: string, count: number, extra: Record<string, unknown> = {}) =>
      ({ sandboxId: s.id, generation: 1, time, decision: "deny", count, event: { type: "egress", time, decision: "deny", host, port, protocol, reason: "no_matching_rule", ...extra } });
    await t.gw.store.appendAudit([
      denied("pypi.org", 443, "https", 4),
      // http and https of one host on one port: two rules, two names.
      denied("dual.test", 8443, "http", 1, { method: "GET", path: "/a/b" }),
      denied("dual.test", 8443, "https", 1),
      // Seen (let through by audit mode) at a private address: its rule allows exactly that one.
      { ...denied("inner.test", 443, "https", 2, { address: "10.1.2.3" }), decision: "would_deny", event: { type: "egress", time, decision: "would_deny", host: "inner.test", port: 443, protocol: "https", reason: "no_matching_rule", address: "10.1.2.3" } },
    ]);
    const r = await run("policy", "suggest", "sug");
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^version: 1$/m);
    expect(r.stdout).toContain("- name: api\n"); // the policy's own rules, as the user wrote them
    expect(r.stderr).toMatch(/^4 rules covering 8 denied requests, added to revision 1's policy below;/m);
    expect(r.stderr).toContain("allowPrivate for the private address each was seen at (check it is meant): inner.test\n");
    const file = join(dir, "suggested.yaml");
    writeFileSync(file, r.stdout);
    expect((await cli(["policy", "validate", file])).stdout).toBe(`${file}: valid (6 rules, 0 deny entries)\n`);
    const json = JSON.parse((await run("policy", "suggest", "sug", "--json")).stdout);
    expect(json.rules.map((x: { name: string }) => x.name)).toEqual(["suggested-dual-test-8443", "suggested-dual-test-8443-https", "suggested-inner-test-443", "suggested-pypi-org-443"]);
    expect(json.rules[2].endpoints[0].allowPrivate).toEqual(["10.1.2.3/32"]);
    const replayed = JSON.parse((await run("policy", "replay", "sug", "--policy", file, "--json")).stdout);
    expect(replayed.newlyDenied).toEqual([]);
    expect(replayed.newlyAllowed.map((l: { request: string; count: number }) => [l.request, l.count]).sort()).toEqual([
      ["GET http://dual.test:8443/a/b", 1],
      ["https dual.test:8443", 1],
      ["https pypi.org:443", 4],
    ]);
    // inner.test went through (audit mode); the suggestion lets it through enforcing too.
    expect(replayed.wouldDeny).toEqual([]);
    const set = await run("policy", "set", "sug", "--policy", file);
    expect(set.code, set.stderr).toBe(0);
    const after = await run("policy", "suggest", "sug");
    expect(after.stderr).toContain("nothing to suggest");
  });

  it("an invalid candidate is a 400 naming the problem; an unknown sandbox a 404", async () => {
    const bad = await t.api("POST", "/v1/sandboxes/rev/policy/replay", { policy: "version: 2\n" });
    expect(bad.status).toBe(400);
    expect(bad.body.error.message).toMatch(/invalid policy/);
    expect((await t.api("POST", "/v1/sandboxes/nope/policy/diff", { policy: ACTIVE })).status).toBe(404);
  });
});
