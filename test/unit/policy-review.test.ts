// Reviewing a policy change: diff (pure), replay and suggest over recorded decisions
// (pure), and the same through the API and the real CLI against a real gateway whose
// audit table (a real SQLite file) holds the recorded traffic.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { diffPolicies } from "../../src/policy/diff.js";
import { parsePolicyYaml, type Policy } from "../../src/policy/index.js";
import { replay, type RecordedDecision } from "../../src/policy/replay.js";
import { suggestRules } from "../../src/policy/suggest.js";
import { recordedDecisions, suggestionYaml } from "../../src/gateway/sandboxes/policy-tools.js";
import { cli } from "../support/cli-runner.js";
import { eventually, startTestGateway, type TestGateway } from "../support/gateway-fixture.js";
import { MemoryDriver } from "../support/memory-driver.js";

function policy(yaml: string): Policy {
  const p = parsePolicyYaml(yaml);
  if (!p.ok) throw new Error(p.errors.join("; "));
  return p.policy;
}

const ACTIVE = `version: 1
network:
  rules:
    - name: api
      endpoints:
        - { host: api.example.com, port: 443, protocol: https }
    - name: web
      endpoints:
        - host: web.example.com
          port: 80
          protocol: http
          rules: [{ methods: [GET], paths: ["/docs/**"] }]
`;
const TIGHTER = `version: 1
network:
  rules:
    - name: web
      endpoints:
        - host: web.example.com
          port: 80
          protocol: http
          rules: [{ methods: [GET, POST], paths: ["/docs/**"] }]
  deny:
    - host: "*.evil.test"
`;

const rec = (r: Partial<RecordedDecision> & Pick<RecordedDecision, "host" | "decision">): RecordedDecision => ({ port: 443, protocol: "https", count: 1, time: "2026-12-01T00:00:00.000Z", ...r });

describe("diffPolicies", () => {
  it("names each rule removed, added or changed, with its endpoint lines, and the denies", () => {
    const changes = diffPolicies(policy(ACTIVE), policy(TIGHTER));
    expect(changes).toEqual([
      { kind: "rule removed", name: "api", lines: ["- https api.example.com:443"] },
      { kind: "rule changed", name: "web", lines: ["- http web.example.com:80 [GET /docs/**]", "+ http web.example.com:80 [GET,POST /docs/**]"] },
      { kind: "deny added", name: "deny[0]", lines: ["+ any *.evil.test"] },
    ]);
  });

  it("a policy against itself: no change; the fixed sections are reported when they differ", () => {
    expect(diffPolicies(policy(ACTIVE), policy(ACTIVE))).toEqual([]);
    const changes = diffPolicies(policy(ACTIVE), policy(`${ACTIVE}process:\n  limits: { pids: 64 }\n`));
    expect(changes.map((c) => [c.kind, c.name])).toEqual([["fixed section changed", "process"]]);
  });
});

describe("replay", () => {
  const records = [
    rec({ host: "api.example.com", decision: "allow", count: 40 }),
    rec({ host: "api.example.com", decision: "allow", count: 2, time: "2026-12-02T00:00:00.000Z" }),
    rec({ host: "web.example.com", port: 80, protocol: "http", method: "POST", path: "/docs/a", decision: "deny", reason: "method_not_allowed", count: 3 }),
    rec({ host: "web.example.com", port: 80, protocol: "http", method: "GET", path: "/docs/a", decision: "allow", count: 5 }),
    rec({ host: "x.evil.test", decision: "deny", reason: "no_matching_rule", count: 7 }),
    rec({ host: "api.example.com", decision: "deny", reason: "lockdown_control_session_lost", count: 9 }),
  ];

  it("what the candidate newly denies (grouped, counted, last seen) and newly allows; lockdown denials skipped", () => {
    const r = replay(records, policy(TIGHTER));
    expect(r.newlyDenied).toEqual([{ request: "https api.example.com:443", count: 42, lastSeen: "2026-12-02T00:00:00.000Z", because: "no_matching_rule" }]);
    expect(r.newlyAllowed).toEqual([{ request: "POST http://web.example.com:80/docs/a", count: 3, lastSeen: "2026-12-01T00:00:00.000Z", because: "rule web" }]);
    expect(r.unchanged).toEqual({ allowed: 5, denied: 7 });
    expect(r.skipped).toBe(9);
  });

  it("replaying under the active policy changes nothing", () => {
    const r = replay(records.filter((x) => x.decision === "allow" || x.reason !== "method_not_allowed"), policy(ACTIVE));
    expect(r.newlyDenied).toEqual([]);
    expect(r.newlyAllowed).toEqual([]);
  });
});

describe("suggestRules", () => {
  it("one rule per denied destination with the methods and first path segments seen; explicit denies, private addresses and lockdowns never", () => {
    const current = policy(`version: 1\nnetwork:\n  deny:\n    - host: "*.evil.test"\n`);
    const s = suggestRules(
      [
        rec({ host: "pypi.org", decision: "deny", reason: "no_matching_rule", count: 4 }),
        rec({ host: "h.test", port: 8080, protocol: "http", method: "GET", path: "/v1/a?x=1", decision: "deny", reason: "no_matching_rule" }),
        rec({ host: "h.test", port: 8080, protocol: "http", method: "POST", path: "/v2/b", decision: "deny", reason: "no_matching_rule" }),
        rec({ host: "x.evil.test", decision: "deny", reason: "explicit_deny", count: 3 }),
        rec({ host: "intranet.test", decision: "deny", reason: "private_address" }),
        rec({ host: "lock.test", decision: "deny", reason: "lockdown_gateway_sandbox_failed" }),
      ],
      current,
    );
    expect(s.covers).toBe(6);
    expect(s.rules.map((r) => r.endpoints[0])).toEqual([
      { host: "h.test", ports: [8080], protocol: "http", allowPrivate: [], rules: [{ methods: ["GET", "POST"], paths: ["/v1/**", "/v2/**"] }] },
      { host: "pypi.org", ports: [443], protocol: "https", allowPrivate: [] },
    ]);
    // The suggestion parses as a policy that allows what was denied.
    const merged = policy(`version: 1\n${suggestionYaml(s.rules)}`);
    expect(replay([rec({ host: "pypi.org", decision: "deny", reason: "no_matching_rule" })], merged).newlyAllowed).toHaveLength(1);
  });

  it("a denial the current policy now allows is not suggested again", () => {
    expect(suggestRules([rec({ host: "api.example.com", decision: "deny", reason: "no_matching_rule" })], policy(ACTIVE)).rules).toEqual([]);
  });
});

describe("recordedDecisions", () => {
  it("keeps egress decisions with their fields; dropped markers and malformed rows are skipped", () => {
    const base = { seq: 1, sandboxId: "sbx", generation: 1, time: "2026-12-01T00:00:00.000Z", count: 2 };
    const out = recordedDecisions([
      { ...base, decision: "deny", event: { type: "egress", decision: "deny", host: "a.test", port: 443, protocol: "https", reason: "no_matching_rule" } },
      { ...base, decision: "dropped", event: { type: "dropped", reason: "audit_rate_limit" } },
      { ...base, decision: "allow", event: { type: "egress", decision: "allow", host: "b.test", port: "443", protocol: "https" } },
      { ...base, decision: "allow", event: { type: "egress", decision: "allow", host: "c.test", port: 80, protocol: "gopher" } },
    ]);
    expect(out).toEqual([{ host: "a.test", port: 443, protocol: "https", decision: "deny", reason: "no_matching_rule", count: 2, time: base.time }]);
  });
});

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
    t.gw.store.appendAudit([
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
    expect(ok.stdout).toBe(`${join(dir, "tighter.yaml")}: valid (1 rules, 1 deny entries)\n`);
    const bad = await cli(["policy", "validate", join(dir, "bad.yaml")]);
    expect(bad.code).toBe(2);
    expect(bad.stderr.trim().split("\n")).toHaveLength(1);
    expect(bad.stderr).toMatch(/host/);
    expect(bad.stderr).toMatch(/port/);
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
    expect(bad.stderr).toMatch(/since: "yesterday" is not an RFC 3339 time/);
  });

  it("suggest: YAML on stdout for what was denied for want of a rule; changes nothing", async () => {
    const r = await run("policy", "suggest", "rev");
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain("host: pypi.org");
    expect(r.stderr).toMatch(/1 rules covering 4 denied requests/);
    const p = await t.api("GET", "/v1/sandboxes/rev/policy");
    expect(p.body.revision).toBe(1);
  });

  it("an invalid candidate is a 400 naming the problem; an unknown sandbox a 404", async () => {
    const bad = await t.api("POST", "/v1/sandboxes/rev/policy/replay", { policy: "version: 2\n" });
    expect(bad.status).toBe(400);
    expect(bad.body.error.message).toMatch(/invalid policy/);
    expect((await t.api("POST", "/v1/sandboxes/nope/policy/diff", { policy: ACTIVE })).status).toBe(404);
  });
});
