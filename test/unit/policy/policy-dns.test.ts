// Which names the supervisor's resolver answers (src/policy/dns.ts): exactly those some request
// could be allowed to, checked against the egress decision itself over random policies.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { evaluate, nameDecision, parsePolicyYaml, policyFromObject, type Policy } from "../../../src/policy/index.js";

function mustParse(text: string): Policy {
  const r = parsePolicyYaml(text);
  if (!r.ok) throw new Error(r.errors.join("\n"));
  return r.policy;
}

const POLICY = mustParse(`version: 1
network:
  rules:
    - name: npm
      endpoints:
        - { host: registry.npmjs.org, port: 443, protocol: https }
    - name: cdn
      endpoints:
        - { host: "*.cdn.test", ports: [80, 443], protocol: https }
    - name: git
      endpoints:
        - { host: git.example.test, port: 22, protocol: tcp }
    - name: api
      endpoints:
        - host: api.test
          port: 8080
          protocol: http
          rules: [{ methods: [GET], paths: ["/v1/**"] }]
  deny:
    - { name: no-bad, host: bad.cdn.test }
    - { name: no-443, host: half.cdn.test, ports: [443] }
    - { name: audited, host: seen.cdn.test, enforcement: audit }
`);

describe("nameDecision", () => {
  it("answers names an endpoint names, in any spelling; refuses the rest, naming why", () => {
    const cases: [string, unknown][] = [
      ["registry.npmjs.org", { allow: true, rule: "npm" }],
      ["Registry.NPMJS.org.", { allow: true, rule: "npm" }],
      ["a.cdn.test", { allow: true, rule: "cdn" }],
      ["x.y.cdn.test", { allow: true, rule: "cdn" }],
      ["git.example.test", { allow: true, rule: "git" }],
      ["api.test", { allow: true, rule: "api" }],
      // A deny entry for every port refuses the name; one for some ports leaves the others.
      ["bad.cdn.test", { allow: false, reason: "explicit_deny", rule: "no-bad" }],
      ["half.cdn.test", { allow: true, rule: "cdn" }],
      // An audit-mode deny entry does not refuse.
      ["seen.cdn.test", { allow: true, rule: "cdn" }],
      ["cdn.test", { allow: false, reason: "no_matching_rule" }],
      ["evil.test", { allow: false, reason: "no_matching_rule" }],
      ["10.0.0.1", { allow: false, reason: "not_a_name" }],
      ["", { allow: false, reason: "not_a_name" }],
      ["a..b", { allow: false, reason: "not_a_name" }],
      ["*.cdn.test", { allow: false, reason: "not_a_name" }],
    ];
    for (const [name, want] of cases) expect({ name, d: nameDecision(POLICY, name) }).toEqual({ name, d: want });
  });

  it("under the whole policy's audit mode every name resolves, recorded as what enforcing would say", () => {
    const audit = mustParse(`version: 1
network:
  enforcement: audit
  rules:
    - name: cdn
      endpoints: [{ host: "*.cdn.test", port: 443, protocol: https }]
  deny: [{ name: no-bad, host: bad.cdn.test }]
`);
    expect(nameDecision(audit, "a.cdn.test")).toEqual({ allow: true, rule: "cdn" });
    expect(nameDecision(audit, "elsewhere.test")).toEqual({ allow: true, rule: "(enforcement: audit)", wouldDeny: { reason: "no_matching_rule" } });
    expect(nameDecision(audit, "bad.cdn.test")).toEqual({ allow: true, rule: "(enforcement: audit)", wouldDeny: { reason: "explicit_deny", rule: "no-bad" } });
    expect(nameDecision(audit, "1.2.3.4")).toEqual({ allow: false, reason: "not_a_name" });
  });

  it("the default policy (deny all) answers no name", () => {
    expect(nameDecision(mustParse("version: 1\n"), "registry.npmjs.org")).toEqual({ allow: false, reason: "no_matching_rule" });
  });

  // Over random policies: a name resolves exactly when some request to it (some endpoint's
  // port and protocol, with a method and path its rules admit) is allowed by the egress decision.
  const label = fc.stringMatching(/^[a-z][a-z0-9]{0,4}$/);
  const nameArb = fc.oneof(fc.tuple(label, fc.constantFrom("a.test", "b.test")).map(([l, d]) => `${l}.${d}`), fc.constantFrom("a.test", "b.test", "x.a.test"));
  const patternArb = fc.oneof(nameArb, fc.constantFrom("*.a.test", "*.b.test"));
  const portArb = fc.constantFrom(80, 443, 22);
  const protocolArb = fc.constantFrom("http" as const, "https" as const, "tcp" as const);
  const endpointArb = fc.record({ host: patternArb, ports: fc.uniqueArray(portArb, { minLength: 1 }), protocol: protocolArb });
  const denyArb = fc.record({ host: patternArb, ports: fc.uniqueArray(portArb, { minLength: 1 }), protocol: protocolArb, enforcement: fc.constantFrom("enforce" as const, "audit" as const) }, { requiredKeys: ["host"] });
  const policyArb = fc.tuple(fc.array(fc.array(endpointArb, { minLength: 1, maxLength: 3 }), { maxLength: 3 }), fc.array(denyArb, { maxLength: 3 })).map(([rules, deny]) => {
    const r = policyFromObject({ version: 1, network: { rules: rules.map((endpoints, i) => ({ name: `r${i}`, endpoints })), deny } });
    if (!r.ok) throw new Error(r.errors.join("; "));
    return r.policy;
  });
  it("property: a name resolves exactly when some request to it could be allowed", () => {
    fc.assert(
      fc.property(policyArb, nameArb, (policy, name) => {
        const requests = policy.network.rules.flatMap((r) => r.endpoints.flatMap((e) => e.ports.map((port) => ({ host: name, port, protocol: e.protocol, ...(e.protocol === "http" ? { method: "GET", path: "/" } : {}) }))));
        const reachable = requests.some((q) => evaluate(policy, q).allow);
        expect(nameDecision(policy, name).allow).toBe(reachable);
      }),
      { numRuns: 2000 },
    );
  });
});
