// Reviewing a policy change: diff, replay and suggest over recorded decisions (pure).
// The same through the API and the CLI: cli-policy-review.test.ts.
import { describe, expect, it } from "vitest";
import { describeEndpoint, diffPolicies } from "../../../src/policy/diff.js";
import { canonicalJson } from "../../../src/policy/canonical.js";
import { parsePolicyYaml, type Endpoint, type Policy } from "../../../src/policy/index.js";
import { describeRequest, replay, type RecordedDecision } from "../../../src/policy/replay.js";
import { suggestRules } from "../../../src/policy/suggest.js";
import { ACTIVE, TIGHTER } from "../../support/review-policies.js";
import { recordedDecisions, recordedLookups, suggestedPolicyYaml, suggestionYaml } from "../../../src/gateway/sandboxes/policy-tools.js";
import { defaultPolicy } from "../../../src/policy/index.js";
import { nameDecision } from "../../../src/policy/dns.js";

function policy(yaml: string): Policy {
  const p = parsePolicyYaml(yaml);
  if (!p.ok) throw new Error(p.errors.join("; "));
  return p.policy;
}

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

// One rule "api" with one endpoint, written out; the endpoint's fields are the variable part.
const withEndpoint = (fields: string): string =>
  `version: 1\nnetwork:\n  rules:\n    - name: api\n      endpoints:\n        - { host: api.example.com, protocol: https${/\bports?:/.test(fields) ? "" : ", port: 443"}${fields} }\n`;

describe("diffPolicies: credentials and tls are changes the person sees", () => {
  const BASE = ", credentials: [{ secret: aws-prod }]";
  it.each([
    ["a credential added to an allowed endpoint", "", BASE, "secret aws-prod"],
    ["the bound secret changed", BASE, ", credentials: [{ secret: aws-dev }]", "secret aws-dev"],
    ["a body bound added", BASE, ", credentials: [{ secret: aws-prod, body: { maxBytes: 4096 } }]", "secret aws-prod body<=4096"],
    ["paths added", BASE, ', credentials: [{ secret: aws-prod, paths: ["/upload/**"] }]', "secret aws-prod on /upload/**"],
    ["a header injection added", BASE, ', credentials: [{ secret: aws-prod }, { header: authorization, value: "token {{secret:deploy-key}}" }]', 'header authorization: "token {{secret:deploy-key}}"'],
    ["the header template changed", ', credentials: [{ header: authorization, value: "token {{secret:a}}" }]', ', credentials: [{ header: authorization, value: "token {{secret:b}}" }]', 'header authorization: "token {{secret:b}}"'],
    ["tls passthrough to terminate", "", ", tls: terminate", "tls terminate"],
  ])("%s", (_what, before, after, shown) => {
    const changes = diffPolicies(policy(withEndpoint(before)), policy(withEndpoint(after)));
    expect(changes).toHaveLength(1);
    expect(changes[0]).toMatchObject({ kind: "rule changed", name: "api" });
    expect(changes[0]!.lines).toHaveLength(2);
    expect(changes[0]!.lines[0]).toMatch(/^- https api\.example\.com:443/);
    expect(changes[0]!.lines[1]).toMatch(/^\+ https api\.example\.com:443/);
    expect(changes[0]!.lines[1]).toContain(shown);
    // Both ways round.
    expect(diffPolicies(policy(withEndpoint(after)), policy(withEndpoint(before)))).toHaveLength(1);
  });

  it("the whole line of a credential: header, template, paths; binding, paths, body", () => {
    const e = policy(withEndpoint(', credentials: [{ header: x-key, value: "k={{secret:one}}", paths: ["/a/**"] }, { secret: two, paths: ["/b", "/c,d"], body: true }]')).network.rules[0]!.endpoints[0]!;
    expect(describeEndpoint(e)).toBe('https api.example.com:443 tls terminate credentials [header x-key: "k={{secret:one}}" on /a/**; secret two on /b,"/c,d" body<=65536]');
  });

  // Every field the boundary enforces, varied one at a time: no two variants print alike,
  // and no pair diffs as "no change".
  it("endpoints that differ in any one field never print alike", () => {
    const variants = [
      "",
      ", tls: terminate",
      ", port: 8443",
      ", ports: [443, 8443]",
      ", allowPrivate: [10.0.0.0/8]",
      ", allowPrivate: [10.0.0.0/8, 192.168.0.0/16]",
      ", rules: [{ methods: [GET] }]",
      ', rules: [{ methods: [GET], paths: ["/a,/b"] }]',
      ', rules: [{ methods: [GET], paths: ["/a", "/b"] }]',
      ", rules: [{ methods: [GET] }, { methods: [POST] }]",
      ", rules: [{ methods: [GET, POST] }]",
      ", credentials: [{ secret: s1 }]",
      ", credentials: [{ secret: s2 }]",
      ", credentials: [{ secret: s1 }, { secret: s2 }]",
      ", credentials: [{ secret: s1, body: true }]",
      ", credentials: [{ secret: s1, body: { maxBytes: 1 } }]",
      ', credentials: [{ secret: s1, paths: ["/a,/b"] }]',
      ', credentials: [{ secret: s1, paths: ["/a", "/b"] }]',
      ', credentials: [{ header: x-a, value: "{{secret:s1}}" }]',
      ', credentials: [{ header: x-b, value: "{{secret:s1}}" }]',
      ', credentials: [{ header: x-a, value: "{{secret:s2}}" }]',
      ', credentials: [{ header: x-a, value: "{{secret:s1}}", paths: ["/a"] }]',
      // A template that mimics the next field must not pass for it.
      ', credentials: [{ header: x-a, value: "{{secret:s1}}\\" on /a" }]',
      ", rules: [{ methods: [GET] }], credentials: [{ secret: s1 }]",
    ];
    const endpoints = variants.map((v) => policy(withEndpoint(v)).network.rules[0]!.endpoints[0]!);
    expect(new Set(endpoints.map(describeEndpoint)).size).toBe(variants.length);
    const others = ["host: api.example.com, protocol: http, port: 80", "host: api.example.com, protocol: tcp, port: 443", "host: other.example.com, protocol: https, port: 443"];
    const all = [...variants.map(withEndpoint), ...others.map((h) => withEndpoint("").replace("host: api.example.com, protocol: https, port: 443", h))];
    expect(new Set(all).size).toBe(variants.length + others.length);
    const parsed = all.map((y) => ({ y, p: policy(y) }));
    for (const a of parsed) for (const b of parsed) if (a !== b) expect(diffPolicies(a.p, b.p), `${a.y}\n->\n${b.y}`).not.toEqual([]);
  });
});

describe("diffPolicies: the backstop", () => {
  // A difference describeEndpoint cannot show (a field it does not know yet) is still a change.
  it("a rule whose canonical form differs, with the same lines, is shown as its canonical text", () => {
    const a = policy(withEndpoint(""));
    const ep = { ...a.network.rules[0]!.endpoints[0]!, future: "x" } as unknown as Endpoint;
    const b: Policy = { ...a, network: { ...a.network, rules: [{ name: "api", endpoints: [ep] }] } };
    const changes = diffPolicies(a, b);
    expect(changes).toEqual([{ kind: "rule changed", name: "api", lines: [`- ${canonicalJson(a.network.rules[0])}`, `+ ${canonicalJson(b.network.rules[0])}`] }]);
  });

  it("an endpoint repeated, rules reordered, denies reordered, a new top-level field: each a change", () => {
    const a = policy(`${ACTIVE}  deny:\n    - host: a.test\n    - host: b.test\n`);
    const rules = a.network.rules;
    const twice: Policy = { ...a, network: { ...a.network, rules: [{ ...rules[0]!, endpoints: [rules[0]!.endpoints[0]!, rules[0]!.endpoints[0]!] }, rules[1]!] } };
    expect(diffPolicies(a, twice).map((c) => [c.kind, c.name])).toEqual([["rule changed", "api"]]);
    const reordered: Policy = { ...a, network: { ...a.network, rules: [rules[1]!, rules[0]!] } };
    expect(diffPolicies(a, reordered)).toEqual([{ kind: "section changed", name: "network.rules", lines: [`- ${canonicalJson(rules)}`, `+ ${canonicalJson([rules[1], rules[0]])}`] }]);
    const denies: Policy = { ...a, network: { ...a.network, deny: [...a.network.deny].reverse() } };
    expect(diffPolicies(a, denies).map((c) => [c.kind, c.name])).toEqual([["section changed", "network.deny"]]);
    const future = { ...a, future: { x: 1 } } as unknown as Policy;
    expect(diffPolicies(a, future)).toEqual([{ kind: "section changed", name: "future", lines: ["- (absent)", '+ {"x":1}'] }]);
  });
});

describe("diffPolicies: audit mode", () => {
  it("a rule, a deny entry or the whole policy switching to audit mode is a change, named", () => {
    const audited = policy(`${ACTIVE.replace("    - name: api\n", "    - name: api\n      enforcement: audit\n").trimEnd()}\n  deny:\n    - { name: no, host: bad.test, enforcement: audit }\n  enforcement: audit\n`);
    expect(diffPolicies(policy(ACTIVE), audited)).toEqual([
      { kind: "rule changed", name: "api", lines: ["- enforcement: enforce", "+ enforcement: audit"] },
      { kind: "deny added", name: "no", lines: ["+ any bad.test (audit)"] },
      { kind: "enforcement changed", name: "network", lines: ["- enforcement: enforce", "+ enforcement: audit"] },
    ]);
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

  it("connections refused past the proxy's cap say nothing about the policy: skipped", () => {
    const r = replay([rec({ host: "10.1.2.3", port: 3128, protocol: "tcp", decision: "deny", reason: "connection_limit", count: 12 })], policy(TIGHTER));
    expect([r.skipped, r.unchanged.denied, r.newlyAllowed.length]).toEqual([12, 0, 0]);
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

  it("a host the trail saw at a private address gets allowPrivate for exactly that address (/32, /128), and is named among privateHosts; a public or malformed address adds nothing", () => {
    const denied = (host: string, address: string, port = 443): RecordedDecision => rec({ host, port, address, decision: "deny", reason: "no_matching_rule" });
    // Given out of order: what is listed comes sorted.
    const s = suggestRules([denied("v6.test", "fd00::1"), denied("db.test", "10.0.0.6"), denied("db.test", "10.0.0.5"), denied("pub.test", "93.184.216.34"), denied("odd.test", "not-an-address")], defaultPolicy());
    expect(s.rules.map((r) => [r.endpoints[0]!.host, r.endpoints[0]!.allowPrivate])).toEqual([
      ["db.test", ["10.0.0.5/32", "10.0.0.6/32"]],
      ["odd.test", []],
      ["pub.test", []],
      ["v6.test", ["fd00::1/128"]],
    ]);
    expect(s.privateHosts).toEqual(["db.test", "v6.test"]);
    expect(s.fromLookups).toEqual([]);
    expect(suggestRules([], defaultPolicy(), [{ name: "b.test", count: 1 }, { name: "a.test", count: 2 }]).fromLookups).toEqual(["a.test", "b.test"]);
  });

  it("rule names: unique against the policy's and each other's, with the protocol, then numbered; never over 63 characters", () => {
    const taken = policy(
      `version: 1\nnetwork:\n  rules:\n` +
        ["suggested-a-test-443", "suggested-a-test-443-https", "suggested-a-test-443-2"].map((n) => `    - name: ${n}\n      endpoints:\n        - host: other-${n}.test\n          ports: [1]\n          protocol: tcp\n`).join(""),
    );
    const s = suggestRules([rec({ host: "a.test", decision: "deny", reason: "no_matching_rule" }), rec({ host: "a.test", protocol: "http", decision: "deny", reason: "no_matching_rule" })], taken);
    expect(s.rules.map((r) => r.name).sort()).toEqual(["suggested-a-test-443-3", "suggested-a-test-443-http"]);
    const long = `${"x".repeat(70)}.test`;
    const l = suggestRules([rec({ host: long, decision: "deny", reason: "no_matching_rule" }), rec({ host: long, protocol: "http", decision: "deny", reason: "no_matching_rule" })], defaultPolicy());
    const names = l.rules.map((r) => r.name);
    expect(names).toEqual([`suggested-${"x".repeat(53)}`, `suggested-${"x".repeat(48)}-http`]);
    for (const n of names) expect(n.length).toBeLessThanOrEqual(63);
    const many = policy(`version: 1\nnetwork:\n  rules:\n` + [`suggested-${"x".repeat(53)}`, `suggested-${"x".repeat(47)}-https`].map((n) => `    - name: ${n}\n      endpoints:\n        - host: o.test\n          ports: [1]\n          protocol: tcp\n`).join(""));
    const m = suggestRules([rec({ host: long, decision: "deny", reason: "no_matching_rule" })], many);
    expect(m.rules.map((r) => r.name)).toEqual([`suggested-${"x".repeat(51)}-2`]);
  });

  it("the suggested policy is a whole document: a policy given as text keeps its text (comments too), one without text is written out; either parses with the rules added", () => {
    const s = suggestRules([rec({ host: "pypi.org", decision: "deny", reason: "no_matching_rule" })], policy(ACTIVE));
    const fromText = suggestedPolicyYaml(policy(ACTIVE), `# ours\n${ACTIVE}`, s.rules);
    expect(fromText.startsWith(`# ours\n${ACTIVE.split("\n")[0]}`)).toBe(true);
    expect(policy(fromText).network.rules.map((r) => r.name)).toEqual(["api", "web", "suggested-pypi-org-443"]);
    const fromDefault = suggestedPolicyYaml(defaultPolicy(), null, s.rules);
    expect(policy(fromDefault).network.rules.map((r) => r.name)).toEqual([...defaultPolicy().network.rules.map((r) => r.name), "suggested-pypi-org-443"]);
  });

  it("a denial the current policy now allows is not suggested again", () => {
    expect(suggestRules([rec({ host: "api.example.com", decision: "deny", reason: "no_matching_rule" })], policy(ACTIVE)).rules).toEqual([]);
  });
  it("names the resolver refused (dns_denied) are suggested as https on 443, marked as a guess; a name a request's rule covers, one the policy resolves, or one an explicit deny refuses is not", () => {
    const current = policy(`${ACTIVE.trimEnd()}\n  deny:\n    - host: "*.evil.test"\n`);
    const s = suggestRules(
      [rec({ host: "h.test", port: 8080, protocol: "http", method: "GET", path: "/a", decision: "deny", reason: "no_matching_rule" })],
      current,
      [
        { name: "registry.npmjs.org", count: 3 },
        { name: "Registry.NPMJS.org.", count: 1 },
        { name: "h.test", count: 2 },
        { name: "api.example.com", count: 1 },
        { name: "x.evil.test", count: 5 },
      ],
    );
    expect(s.fromLookups).toEqual(["registry.npmjs.org"]);
    expect(s.rules.map((r) => [r.name, r.endpoints[0]!.host, r.endpoints[0]!.ports, r.endpoints[0]!.protocol])).toEqual([
      ["suggested-h-test-8080", "h.test", [8080], "http"],
      ["suggested-registry-npmjs-org-443", "registry.npmjs.org", [443], "https"],
    ]);
    expect(s.covers).toBe(1 + 4);
    // Applied, the suggestion makes each refused name resolve (the supervisor's nameDecision).
    const merged = policy(`version: 1\n${suggestionYaml(s.rules)}`);
    for (const name of ["registry.npmjs.org", "h.test"]) expect(nameDecision(merged, name), name).toMatchObject({ allow: true });
  });

  it("under audit mode, a name let through as would-deny for want of a rule is suggested; one an explicit deny would refuse is not", () => {
    const audited = policy(`version: 1\nnetwork:\n  enforcement: audit\n  rules: []\n  deny:\n    - host: "*.evil.test"\n`);
    const s = suggestRules([], audited, [{ name: "pypi.org", count: 1 }, { name: "a.evil.test", count: 1 }]);
    expect(s.fromLookups).toEqual(["pypi.org"]);
  });

  it("recordedLookups reads dns_denied records only (refused or would-deny), with their counts", () => {
    const r = (event: Record<string, unknown>, count = 1) => ({ id: 1, time: "2026-12-01T00:00:00.000Z", count, event: { type: "egress", ...event } }) as unknown as Parameters<typeof recordedLookups>[0][number];
    expect(
      recordedLookups([
        r({ protocol: "dns", host: "a.test", port: 53, decision: "deny", reason: "dns_denied" }, 4),
        r({ protocol: "dns", host: "b.test", port: 53, decision: "would_deny", reason: "dns_denied" }),
        r({ protocol: "dns", host: "c.test", port: 53, decision: "allow" }),
        r({ protocol: "https", host: "d.test", port: 443, decision: "deny", reason: "no_matching_rule" }),
        r({ protocol: "dns", host: "e.test", port: 53, decision: "deny", reason: "dns_rate" }),
      ]),
    ).toEqual([{ name: "a.test", count: 4 }, { name: "b.test", count: 1 }]);
  });
});

describe("replay and suggest with audit mode", () => {
  const wd = (host: string, reason: string, count = 1) => rec({ host, decision: "would_deny", reason, count });

  it("a would-deny went through: a candidate that denies it lists it as newly denied; one in audit mode lists its own would-denies", () => {
    const records = [wd("pypi.org", "no_matching_rule", 6), rec({ host: "api.example.com", decision: "allow", count: 2 })];
    const strict = replay(records, policy(ACTIVE));
    expect(strict.newlyDenied).toEqual([{ request: "https pypi.org:443", count: 6, lastSeen: "2026-12-01T00:00:00.000Z", because: "no_matching_rule" }]);
    expect(strict.unchanged).toEqual({ allowed: 2, denied: 0 });
    expect(strict.wouldDeny).toEqual([]);
    const audited = replay(records, policy(`${ACTIVE.trimEnd()}
  enforcement: audit
`));
    expect(audited.newlyDenied).toEqual([]);
    expect(audited.wouldDeny).toEqual([{ request: "https pypi.org:443", count: 6, lastSeen: "2026-12-01T00:00:00.000Z", because: "would deny: no_matching_rule" }]);
    // A denial that an audit-mode candidate lets through is newly allowed, by audit mode.
    expect(replay([rec({ host: "pypi.org", decision: "deny", reason: "no_matching_rule" })], policy(`${ACTIVE.trimEnd()}
  enforcement: audit
`)).newlyAllowed).toEqual([
      { request: "https pypi.org:443", count: 1, lastSeen: "2026-12-01T00:00:00.000Z", because: "audit mode" },
    ]);
  });

  it("suggest covers what was let through as would-deny, unless the current policy allows it enforcing", () => {
    const s = suggestRules([wd("pypi.org", "no_matching_rule", 3), wd("x.evil.test", "explicit_deny")], policy(`${ACTIVE.trimEnd()}
  enforcement: audit
`));
    expect(s.rules.map((r) => r.endpoints[0]!.host)).toEqual(["pypi.org"]);
    expect(s.covers).toBe(3);
    expect(suggestRules([wd("api.example.com", "path_not_allowed")], policy(ACTIVE)).rules).toEqual([]);
  });

  it("recordedDecisions keeps would-deny records and skips a tunnel's close record (its opening already counts)", () => {
    const base = { seq: 1, sandboxId: "sbx", generation: 1, time: "2026-12-01T00:00:00.000Z", count: 1 };
    const out = recordedDecisions([
      { ...base, decision: "would_deny", event: { type: "egress", decision: "would_deny", host: "a.test", port: 443, protocol: "https", reason: "no_matching_rule" } },
      { ...base, decision: "allow", event: { type: "egress", decision: "allow", activity: "close", host: "a.test", port: 443, protocol: "tcp", bytesIn: 5 } },
    ]);
    expect(out).toEqual([{ host: "a.test", port: 443, protocol: "https", decision: "would_deny", reason: "no_matching_rule", count: 1, time: base.time }]);
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

// The exact text and order a person reviewing a change reads (what mutation testing asked
// for: each line kind whole, every separator, every default, and the order of equal counts).
describe("review output, exactly", () => {
  const http = (host: string, rules: string, name = "w"): string =>
    `version: 1\nnetwork:\n  rules:\n    - name: ${name}\n      endpoints:\n        - { host: ${host}, protocol: http, port: 80, rules: [${rules}] }\n`;
  const EMPTY = "version: 1\n";
  const AUDIT_EMPTY = "version: 1\nnetwork:\n  enforcement: audit\n";

  it("an endpoint's line: its ports, each L7 rule (no methods: *, no paths: **), private ranges and credentials, each list with its separator", () => {
    const e = policy(withEndpoint(', ports: [443, 8443], allowPrivate: [10.0.0.0/8, 192.168.0.0/16], rules: [{ paths: ["/a"] }, { methods: [GET, POST] }], credentials: [{ secret: s1 }]')).network.rules[0]!.endpoints[0]!;
    expect(describeEndpoint(e)).toBe("https api.example.com:443,8443 [* /a; GET,POST **] tls terminate allowPrivate 10.0.0.0/8,192.168.0.0/16 credentials [secret s1]");
  });

  it("a deny entry removed: its protocol (any when unsaid) and ports; a fixed section's before and after", () => {
    const denies = `${ACTIVE}  deny:\n    - { host: a.test, protocol: tcp, ports: [1, 2] }\n    - { host: b.test }\n`;
    expect(diffPolicies(policy(denies), policy(ACTIVE))).toEqual([
      { kind: "deny removed", name: "deny[0]", lines: ["- tcp a.test:1,2"] },
      { kind: "deny removed", name: "deny[1]", lines: ["- any b.test"] },
    ]);
    const a = policy(ACTIVE);
    const b = policy(`${ACTIVE}process:\n  limits: { pids: 64 }\n`);
    expect(diffPolicies(a, b)).toEqual([{ kind: "fixed section changed", name: "process", lines: [`- ${canonicalJson(a.process)}`, `+ ${canonicalJson(b.process)}`] }]);
  });

  it("sections only the backstop sees come in name order, one gone shown as (absent)", () => {
    const a = { ...policy(ACTIVE), zeta: 1, alpha: 2 } as unknown as Policy;
    expect(diffPolicies(a, policy(ACTIVE))).toEqual([
      { kind: "section changed", name: "alpha", lines: ["- 2", "+ (absent)"] },
      { kind: "section changed", name: "zeta", lines: ["- 1", "+ (absent)"] },
    ]);
  });

  it("replay: an http record with no method or path is GET /; a denial names its rule; lines by count, then by request", () => {
    const allowed = replay([rec({ host: "h.test", port: 80, protocol: "http", decision: "deny", reason: "no_matching_rule" })], policy(http("h.test", '{ methods: [GET], paths: ["/"] }')));
    expect(allowed.newlyAllowed).toEqual([{ request: "GET http://h.test:80/", count: 1, lastSeen: "2026-12-01T00:00:00.000Z", because: "rule w" }]);
    const denied = replay([rec({ host: "h.test", port: 80, protocol: "http", method: "POST", path: "/x", decision: "allow" })], policy(http("h.test", "{ methods: [GET] }")));
    expect(denied.newlyDenied.map((l) => l.because)).toEqual(["method_not_allowed (rule w)"]);

    const three = (decision: RecordedDecision["decision"]): RecordedDecision[] => [
      rec({ host: "b.test", decision, reason: "no_matching_rule", count: 2 }),
      rec({ host: "c.test", decision, reason: "no_matching_rule", count: 5 }),
      rec({ host: "a.test", decision, reason: "no_matching_rule", count: 2 }),
    ];
    const order = ["https c.test:443", "https a.test:443", "https b.test:443"];
    expect(replay(three("allow"), policy(EMPTY)).newlyDenied.map((l) => l.request)).toEqual(order);
    expect(replay(three("deny"), policy(AUDIT_EMPTY)).newlyAllowed.map((l) => l.request)).toEqual(order);
    expect(replay(three("would_deny"), policy(AUDIT_EMPTY)).wouldDeny.map((l) => l.request)).toEqual(order);
  });

  it("a request's line: http with its method and path (GET / when unsaid), other protocols host and port", () => {
    expect(describeRequest({ protocol: "http", host: "h.test", port: 80 })).toBe("GET http://h.test:80/");
    expect(describeRequest({ protocol: "http", host: "h.test", port: 8080, method: "PUT", path: "/a?b" })).toBe("PUT http://h.test:8080/a?b");
    expect(describeRequest({ protocol: "tcp", host: "db.test", port: 5432, method: "GET" })).toBe("tcp db.test:5432");
  });

  it("replay: lastSeen is the latest of a line's records, in whatever order they come", () => {
    const r = replay([rec({ host: "a.test", decision: "allow", time: "2026-12-03T00:00:00.000Z" }), rec({ host: "a.test", decision: "allow", time: "2026-12-02T00:00:00.000Z" })], policy(EMPTY));
    expect(r.newlyDenied).toEqual([{ request: "https a.test:443", count: 2, lastSeen: "2026-12-03T00:00:00.000Z", because: "no_matching_rule" }]);
  });

  it("replay: only a denial for a lockdown is skipped; an https tunnel is judged as a tunnel (no method), as it was", () => {
    const r = replay([rec({ host: "a.test", decision: "would_deny", reason: "lockdown_control_session_lost" })], policy(EMPTY));
    expect([r.skipped, r.newlyDenied.length]).toEqual([0, 1]);
    const tunnel = `version: 1\nnetwork:\n  rules:\n    - name: t\n      endpoints:\n        - { host: a.test, protocol: https, port: 443, tls: terminate, rules: [{ methods: [POST] }] }\n`;
    const t = replay([rec({ host: "a.test", decision: "allow" })], policy(tunnel));
    expect([t.newlyDenied, t.unchanged]).toEqual([[], { allowed: 1, denied: 0 }]);
  });

  it("suggest: a rule's name from its host (other characters as -, at most 63), methods sorted and only real ones, paths sorted, / for the root", () => {
    const s = suggestRules(
      [
        rec({ host: "api_v2.example.com", decision: "deny", reason: "no_matching_rule" }),
        rec({ host: `${"x".repeat(70)}.test`, decision: "deny", reason: "no_matching_rule" }),
        rec({ host: "h.test", port: 80, protocol: "http", method: "POST", path: "/v2/x", decision: "deny", reason: "no_matching_rule" }),
        rec({ host: "h.test", port: 80, protocol: "http", path: "/", decision: "deny", reason: "no_matching_rule" }),
        rec({ host: "h.test", port: 80, protocol: "http", method: "BREW", path: "/v1/y", decision: "deny", reason: "no_matching_rule" }),
        rec({ host: "odd.test", port: 80, protocol: "http", method: "BREW", decision: "deny", reason: "no_matching_rule" }),
      ],
      policy(EMPTY),
    );
    expect(s.rules.map((r) => r.name)).toEqual(["suggested-api-v2-example-com-443", "suggested-h-test-80", "suggested-odd-test-80", `suggested-${"x".repeat(70)}-test-443`.slice(0, 63)]);
    expect(s.rules[1]!.endpoints[0]!.rules).toEqual([{ methods: ["GET", "POST"], paths: ["/", "/v1/**", "/v2/**"] }]);
    // No real method seen: a rule for the whole host, not one that admits nothing.
    expect(s.rules[2]!.endpoints[0]).toEqual({ host: "odd.test", ports: [80], protocol: "http", allowPrivate: [] });
  });

  it("suggest: one host's ports in order; what was allowed is never suggested, whatever its reason", () => {
    const s = suggestRules(
      [
        rec({ host: "h.test", port: 8080, decision: "deny", reason: "no_matching_rule" }),
        rec({ host: "h.test", port: 80, decision: "deny", reason: "no_matching_rule" }),
        rec({ host: "ok.test", decision: "allow", reason: "no_matching_rule" }),
      ],
      policy(EMPTY),
    );
    expect(s.rules.map((r) => r.name)).toEqual(["suggested-h-test-80", "suggested-h-test-8080"]);
  });

  it("suggest: what the current policy allows is judged as the request was (http: its method and path, GET / when unsaid; https: the tunnel)", () => {
    const current = policy(`${http("h.test", '{ methods: [POST], paths: ["/p/**"] }, { methods: [GET], paths: ["/"] }').trimEnd()}\n        - { host: t.test, protocol: https, port: 443, tls: terminate, rules: [{ methods: [POST] }] }\n`);
    const s = suggestRules(
      [
        rec({ host: "h.test", port: 80, protocol: "http", method: "POST", path: "/p/x", decision: "deny", reason: "no_matching_rule" }),
        rec({ host: "h.test", port: 80, protocol: "http", decision: "deny", reason: "no_matching_rule" }),
        rec({ host: "t.test", decision: "deny", reason: "no_matching_rule" }),
      ],
      current,
    );
    expect(s.rules).toEqual([]);
  });
});
