import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { AUDIT_MODE_RULE, defaultPolicy, evaluate, parsePolicyYaml, policyFromObject, policyHash, type EgressRequest, type Policy } from "../../../src/policy/index.js";

function mustParse(text: string): Policy {
  const result = parsePolicyYaml(text);
  if (!result.ok) throw new Error(result.errors.join("\n"));
  return result.policy;
}

function mustBuild(value: unknown): Policy {
  const result = policyFromObject(value);
  if (!result.ok) throw new Error(result.errors.join("\n"));
  return result.policy;
}

const POLICY = mustParse(`version: 1
network:
  rules:
    - name: npm-registry
      endpoints:
        - host: registry.npmjs.org
          port: 443
          protocol: https
    - name: api
      endpoints:
        - host: api.internal.test
          port: 8080
          protocol: http
          rules:
            - methods: [GET, HEAD]
              paths: ["/v1/**", "/health"]
            - methods: [POST]
              paths: ["/v1/jobs"]
    - name: lan-origin
      endpoints:
        - host: origin
          port: 8080
          protocol: http
          allowPrivate: ["10.213.0.0/16"]
    - name: wildcard-cdn
      endpoints:
        - host: "*.cdn.test"
          ports: [80, 443]
          protocol: https
        - host: "*.cdn.test"
          port: 80
          protocol: http
    - name: git
      endpoints:
        - host: git.example.test
          port: 22
          protocol: tcp
  deny:
    - host: "*.evil.test"
    - name: no-bad-cdn
      host: bad.cdn.test
    - name: no-plain-http-to-cdn
      host: "*.cdn.test"
      protocol: http
`);

type Req = EgressRequest;
const req = (host: string, port: number, protocol: Req["protocol"], method?: string, path?: string): Req => ({
  host,
  port,
  protocol,
  ...(method !== undefined && { method }),
  ...(path !== undefined && { path }),
});

describe("evaluate on a realistic policy", () => {
  it.each<[string, Req, ReturnType<typeof evaluate>]>([
    ["exact https host", req("registry.npmjs.org", 443, "https"), { allow: true, rule: "npm-registry", allowPrivate: [] }],
    ["host case and trailing dot", req("Registry.NPMJS.org.", 443, "https"), { allow: true, rule: "npm-registry", allowPrivate: [] }],
    ["wrong port", req("registry.npmjs.org", 80, "https"), { allow: false, reason: "no_matching_rule" }],
    ["wrong protocol", req("registry.npmjs.org", 443, "tcp"), { allow: false, reason: "no_matching_rule" }],
    ["subdomain of an exact host", req("x.registry.npmjs.org", 443, "https"), { allow: false, reason: "no_matching_rule" }],
    ["unknown host", req("example.com", 443, "https"), { allow: false, reason: "no_matching_rule" }],
    ["L7 allowed GET", req("api.internal.test", 8080, "http", "GET", "/v1/items/7?x=1"), { allow: true, rule: "api", allowPrivate: [] }],
    ["L7 allowed HEAD /health", req("api.internal.test", 8080, "http", "HEAD", "/health"), { allow: true, rule: "api", allowPrivate: [] }],
    ["L7 second rule", req("api.internal.test", 8080, "http", "POST", "/v1/jobs"), { allow: true, rule: "api", allowPrivate: [] }],
    ["L7 method not allowed", req("api.internal.test", 8080, "http", "DELETE", "/v1/items/7"), { allow: false, reason: "method_not_allowed", rule: "api" }],
    ["L7 method case-sensitive", req("api.internal.test", 8080, "http", "get", "/v1/items/7"), { allow: false, reason: "method_not_allowed", rule: "api" }],
    ["L7 path not allowed", req("api.internal.test", 8080, "http", "GET", "/admin"), { allow: false, reason: "path_not_allowed", rule: "api" }],
    ["L7 POST to another path", req("api.internal.test", 8080, "http", "POST", "/v1/other"), { allow: false, reason: "path_not_allowed", rule: "api" }],
    ["L7 traversal", req("api.internal.test", 8080, "http", "GET", "/v1/../admin"), { allow: false, reason: "path_not_allowed", rule: "api" }],
    ["L7 encoded traversal", req("api.internal.test", 8080, "http", "GET", "/v1/%2e%2e/admin"), { allow: false, reason: "path_not_allowed", rule: "api" }],
    ["L7 without method", req("api.internal.test", 8080, "http", undefined, "/v1/x"), { allow: false, reason: "method_not_allowed", rule: "api" }],
    ["L7 without path", req("api.internal.test", 8080, "http", "GET"), { allow: false, reason: "path_not_allowed", rule: "api" }],
    ["http endpoint without L7 rules allows any request", req("origin", 8080, "http", "DELETE", "/anything"), { allow: true, rule: "lan-origin", allowPrivate: ["10.213.0.0/16"] }],
    ["wildcard https", req("img.cdn.test", 443, "https"), { allow: true, rule: "wildcard-cdn", allowPrivate: [] }],
    ["wildcard deep", req("a.b.cdn.test", 80, "https"), { allow: true, rule: "wildcard-cdn", allowPrivate: [] }],
    ["wildcard apex", req("cdn.test", 443, "https"), { allow: false, reason: "no_matching_rule" }],
    ["explicit deny by wildcard", req("x.evil.test", 443, "https"), { allow: false, reason: "explicit_deny", rule: "deny[0]" }],
    ["explicit deny beats a wildcard allow", req("bad.cdn.test", 443, "https"), { allow: false, reason: "explicit_deny", rule: "no-bad-cdn" }],
    ["deny narrowed by protocol", req("img.cdn.test", 80, "http", "GET", "/"), { allow: false, reason: "explicit_deny", rule: "no-plain-http-to-cdn" }],
    ["tcp endpoint", req("git.example.test", 22, "tcp"), { allow: true, rule: "git", allowPrivate: [] }],
    ["invalid request host", req("git.example.test:22", 22, "tcp"), { allow: false, reason: "no_matching_rule" }],
    ["out-of-range port", req("git.example.test", 70000, "tcp"), { allow: false, reason: "no_matching_rule" }],
  ])("%s", (_label, request, decision) => {
    expect(evaluate(POLICY, request)).toEqual(decision);
  });
});

describe("evaluate with several matching endpoints", () => {
  const policy = mustBuild({
    version: 1,
    network: {
      rules: [
        { name: "broad", endpoints: [{ host: "*.svc.test", port: 80, protocol: "http", rules: [{ methods: ["GET"], paths: ["/public/**"] }] }] },
        { name: "narrow", endpoints: [{ host: "db.svc.test", port: 80, protocol: "http", rules: [{ methods: ["POST"] }], allowPrivate: ["10.1.0.0/16"] }] },
        { name: "also", endpoints: [{ host: "db.svc.test", port: 80, protocol: "http", allowPrivate: ["10.2.0.0/16"] }] },
        { name: "post-only", endpoints: [{ host: "x.svc.test", port: 80, protocol: "http", rules: [{ methods: ["POST"] }] }] },
      ],
    },
  });

  it("reports the first allowing rule and unions allowPrivate over all allowing endpoints", () => {
    expect(evaluate(policy, req("db.svc.test", 80, "http", "POST", "/x"))).toEqual({ allow: true, rule: "narrow", allowPrivate: ["10.1.0.0/16", "10.2.0.0/16"] });
    expect(evaluate(policy, req("db.svc.test", 80, "http", "GET", "/public/a"))).toEqual({ allow: true, rule: "broad", allowPrivate: ["10.2.0.0/16"] });
  });

  it("prefers path_not_allowed when some endpoint accepted the method", () => {
    // broad: GET accepted but path wrong; post-only: method wrong.
    expect(evaluate(policy, req("x.svc.test", 80, "http", "GET", "/private"))).toEqual({ allow: false, reason: "path_not_allowed", rule: "broad" });
    expect(evaluate(policy, req("x.svc.test", 80, "http", "PUT", "/public/a"))).toEqual({ allow: false, reason: "method_not_allowed", rule: "broad" });
  });
});

describe("evaluate: which refusal is reported", () => {
  // Every endpoint below covers the same request target; only their L7 rules differ.
  const ep = (rules: unknown[]) => ({ host: "api.test", port: 80, protocol: "http", rules });
  const methodOnly = ep([{ methods: ["POST"] }]);
  const pathOnly = ep([{ paths: ["/public/**"] }]);
  const getPublic = ep([{ methods: ["GET"], paths: ["/public/**"] }]);
  const build = (...endpoints: unknown[]) => mustBuild({ version: 1, network: { rules: endpoints.map((e, i) => ({ name: `r${String(i)}`, endpoints: [e] })) } });
  const get = (path: string) => req("api.test", 80, "http", "GET", path);

  it("a rule with paths only admits any method on those paths", () => {
    const policy = build(pathOnly);
    expect(evaluate(policy, req("api.test", 80, "http", "DELETE", "/public/x"))).toEqual({ allow: true, rule: "r0", allowPrivate: [] });
    expect(evaluate(policy, req("api.test", 80, "http", undefined, "/public/x"))).toEqual({ allow: true, rule: "r0", allowPrivate: [] });
    expect(evaluate(policy, get("/private"))).toEqual({ allow: false, reason: "path_not_allowed", rule: "r0" });
  });

  it("a later path refusal replaces an earlier method refusal", () => {
    expect(evaluate(build(methodOnly, getPublic), get("/private"))).toEqual({ allow: false, reason: "path_not_allowed", rule: "r1" });
  });

  it("otherwise the first refusal stands", () => {
    expect(evaluate(build(getPublic, methodOnly), get("/private"))).toEqual({ allow: false, reason: "path_not_allowed", rule: "r0" });
    expect(evaluate(build(getPublic, pathOnly), get("/private"))).toEqual({ allow: false, reason: "path_not_allowed", rule: "r0" });
    expect(evaluate(build(methodOnly, methodOnly), get("/public/x"))).toEqual({ allow: false, reason: "method_not_allowed", rule: "r0" });
  });

  it("an allow anywhere beats every refusal", () => {
    expect(evaluate(build(methodOnly, getPublic, pathOnly), get("/public/x"))).toEqual({ allow: true, rule: "r1", allowPrivate: [] });
  });

  it("https with L7 rules: the tunnel is allowed for termination; each request inside is decided by the rules", () => {
    const p = mustBuild({ version: 1, network: { rules: [{ name: "gh", endpoints: [{ host: "api.test", port: 443, protocol: "https", rules: [{ methods: ["GET"], paths: ["/repos/**"] }] }] }] } });
    expect(evaluate(p, req("api.test", 443, "https"))).toEqual({ allow: true, rule: "gh", allowPrivate: [], terminate: true });
    expect(evaluate(p, { host: "api.test", port: 443, protocol: "https", method: "GET", path: "/repos/a" })).toEqual({ allow: true, rule: "gh", allowPrivate: [] });
    expect(evaluate(p, { host: "api.test", port: 443, protocol: "https", method: "POST", path: "/repos/a" })).toEqual({ allow: false, reason: "method_not_allowed", rule: "gh" });
    expect(evaluate(p, { host: "api.test", port: 443, protocol: "https", method: "GET", path: "/user" })).toEqual({ allow: false, reason: "path_not_allowed", rule: "gh" });
    // Overrides count inside a terminated tunnel as in plain HTTP.
    expect(evaluate(p, { host: "api.test", port: 443, protocol: "https", method: "GET", path: "/repos/a", methodOverrides: ["DELETE"] })).toMatchObject({ allow: false, reason: "method_override_not_allowed" });
  });

  it("tls: terminate without rules terminates; passthrough, or any blind endpoint allowing the same tunnel, does not", () => {
    const ep = (tls?: "terminate" | "passthrough") => ({ host: "api.test", port: 443, protocol: "https", ...(tls ? { tls } : {}) });
    expect(evaluate(mustBuild({ version: 1, network: { rules: [{ name: "t", endpoints: [ep("terminate")] }] } }), req("api.test", 443, "https"))).toMatchObject({ terminate: true });
    expect(evaluate(mustBuild({ version: 1, network: { rules: [{ name: "p", endpoints: [ep("passthrough")] }] } }), req("api.test", 443, "https"))).toEqual({ allow: true, rule: "p", allowPrivate: [] });
    expect(evaluate(mustBuild({ version: 1, network: { rules: [{ name: "b", endpoints: [ep()] }] } }), req("api.test", 443, "https"))).toEqual({ allow: true, rule: "b", allowPrivate: [] });
    const both = mustBuild({ version: 1, network: { rules: [{ name: "t", endpoints: [ep("terminate")] }, { name: "b", endpoints: [ep()] }] } });
    expect(evaluate(both, req("api.test", 443, "https"))).toEqual({ allow: true, rule: "t", allowPrivate: [] });
  });

  it("L7 rules on a tcp endpoint are never consulted (the schema refuses them; evaluate stays opaque)", () => {
    // Built by hand: policyFromObject would reject it.
    const handBuilt: Policy = {
      version: 1,
      network: { rules: [{ name: "raw", endpoints: [{ host: "api.test", ports: [5432], protocol: "tcp", rules: [{ methods: ["POST"] }], allowPrivate: [] }] }], deny: [] },
      filesystem: { readOnly: [], readWrite: [] },
      process: { limits: {} },
    };
    expect(evaluate(handBuilt, req("api.test", 5432, "tcp"))).toEqual({ allow: true, rule: "raw", allowPrivate: [] });
  });
});

describe("evaluate: deny entries and malformed requests", () => {
  const policy = mustBuild({
    version: 1,
    network: {
      rules: [{ name: "svc", endpoints: [{ host: "svc.test", ports: [1, 22, 443, 65535], protocol: "tcp" }] }],
      deny: [{ name: "all-ports", host: "blocked.test" }, { name: "ssh-only", host: "svc.test", port: 22 }],
    },
  });

  it("a deny with ports applies to those ports only", () => {
    expect(evaluate(policy, req("svc.test", 22, "tcp"))).toEqual({ allow: false, reason: "explicit_deny", rule: "ssh-only" });
    expect(evaluate(policy, req("svc.test", 443, "tcp"))).toEqual({ allow: true, rule: "svc", allowPrivate: [] });
  });

  it("ports 1 and 65535 are ports", () => {
    expect(evaluate(policy, req("svc.test", 1, "tcp"))).toEqual({ allow: true, rule: "svc", allowPrivate: [] });
    expect(evaluate(policy, req("svc.test", 65535, "tcp"))).toEqual({ allow: true, rule: "svc", allowPrivate: [] });
    expect(evaluate(policy, req("blocked.test", 1, "tcp"))).toEqual({ allow: false, reason: "explicit_deny", rule: "all-ports" });
    expect(evaluate(policy, req("blocked.test", 65535, "tcp"))).toEqual({ allow: false, reason: "explicit_deny", rule: "all-ports" });
  });

  it.each([0, -1, 65536, 1.5, Number.NaN, Number.POSITIVE_INFINITY])("port %s is refused before any rule, even a deny of every port", (port) => {
    expect(evaluate(policy, req("blocked.test", port, "tcp"))).toEqual({ allow: false, reason: "no_matching_rule" });
  });

  it("a host that is not a string is refused before any rule", () => {
    for (const host of [undefined, null, 42, { toLowerCase: () => "blocked.test" }]) {
      expect(evaluate(policy, { host: host as unknown as string, port: 443, protocol: "tcp" })).toEqual({ allow: false, reason: "no_matching_rule" });
    }
  });
});

describe("evaluate properties", () => {
  const label = fc.stringMatching(/^[a-z][a-z0-9]{0,5}$/);
  const hostArb = fc.oneof(
    fc.tuple(label, fc.constantFrom("a.test", "b.test")).map(([l, d]) => `${l}.${d}`),
    fc.constantFrom("a.test", "b.test", "x.a.test", "10.0.0.1"),
  );
  const patternArb = fc.oneof(hostArb, fc.constantFrom("*.a.test", "*.b.test"));
  const protocolArb = fc.constantFrom("http" as const, "https" as const, "tcp" as const);
  const portArb = fc.constantFrom(80, 443, 8080);
  const methodArb = fc.constantFrom("GET", "POST", "DELETE");
  const pathArb = fc.constantFrom("/", "/v1/x", "/admin", "/v1/../admin");
  const endpointArb = fc.record(
    {
      host: patternArb,
      ports: fc.uniqueArray(portArb, { minLength: 1 }),
      protocol: protocolArb,
      rules: fc.array(fc.record({ methods: fc.uniqueArray(methodArb, { minLength: 1 }), paths: fc.array(fc.constantFrom("/v1/**", "/"), { minLength: 1 }) }), { minLength: 1, maxLength: 2 }),
    },
    { requiredKeys: ["host", "ports", "protocol"] },
  ).map((e) => (e.protocol === "http" ? e : { host: e.host, ports: e.ports, protocol: e.protocol }));
  const denyArb = fc.record({ host: patternArb, ports: fc.uniqueArray(portArb, { minLength: 1 }), protocol: protocolArb }, { requiredKeys: ["host"] });
  const policyArb = fc
    .tuple(fc.array(fc.array(endpointArb, { minLength: 1, maxLength: 3 }), { maxLength: 4 }), fc.array(denyArb, { maxLength: 2 }))
    .map(([rules, deny]) => mustBuild({ version: 1, network: { rules: rules.map((endpoints, i) => ({ name: `r${String(i)}`, endpoints })), deny } }));
  const reqArb = fc.record(
    { host: hostArb, port: portArb, protocol: protocolArb, method: methodArb, path: pathArb },
    { requiredKeys: ["host", "port", "protocol"] },
  );

  it("the default policy allows nothing", () => {
    fc.assert(
      fc.property(reqArb, (r) => {
        expect(evaluate(defaultPolicy(), r)).toEqual({ allow: false, reason: "no_matching_rule" });
      }),
    );
  });

  it("an explicit deny always wins, whatever the rules say", () => {
    fc.assert(
      fc.property(policyArb, reqArb, (policy, r) => {
        // Add a deny that covers this request exactly; evaluation must now refuse it.
        const denied = mustBuild({ ...policy, network: { ...policy.network, deny: [...policy.network.deny, { name: "block", host: r.host, port: r.port }] } });
        const decision = evaluate(denied, r);
        expect(decision.allow).toBe(false);
        if (!decision.allow) expect(decision.reason).toBe("explicit_deny");
      }),
      { numRuns: 500 },
    );
  });

  it("never allows unless some endpoint matches host, port and protocol and no deny matches", () => {
    fc.assert(
      fc.property(policyArb, reqArb, (policy, r) => {
        const decision = evaluate(policy, r);
        if (!decision.allow) return;
        const rule = policy.network.rules.find((x) => x.name === decision.rule);
        expect(rule).toBeDefined();
        const host = r.host.toLowerCase();
        const coversHost = (p: string) => p === host || (p.startsWith("*.") && host.endsWith(p.slice(1)));
        expect(rule!.endpoints.some((e) => e.protocol === r.protocol && e.ports.includes(r.port) && coversHost(e.host))).toBe(true);
        expect(policy.network.deny.some((d) => coversHost(d.host) && (d.ports ?? [r.port]).includes(r.port) && (d.protocol ?? r.protocol) === r.protocol)).toBe(false);
      }),
      { numRuns: 1000 },
    );
  });

  it("removing all rules turns every decision into a denial", () => {
    fc.assert(
      fc.property(policyArb, reqArb, (policy, r) => {
        const empty = mustBuild({ ...policy, network: { ...policy.network, rules: [] } });
        expect(evaluate(empty, r).allow).toBe(false);
      }),
      { numRuns: 300 },
    );
  });

  it("a path with a dot segment is never allowed through an endpoint with path rules", () => {
    fc.assert(
      fc.property(policyArb, label, (policy, seg) => {
        const r = req("x.a.test", 80, "http", "GET", `/v1/${seg}/../../admin`);
        const decision = evaluate(policy, r);
        if (decision.allow) {
          // Only an endpoint without L7 rules may allow it.
          const rule = policy.network.rules.find((x) => x.name === decision.rule)!;
          expect(rule.endpoints.some((e) => e.rules === undefined && e.protocol === "http")).toBe(true);
        }
      }),
      { numRuns: 300 },
    );
  });
});

describe("evaluate: audit mode (enforcement: audit)", () => {
  const rules = (extra: object = {}) => [
    { name: "api", ...extra, endpoints: [{ host: "api.test", port: 80, protocol: "http", rules: [{ methods: ["GET"], paths: ["/v1/**"] }] }] },
  ];
  const GET = req("api.test", 80, "http", "GET", "/v1/x");

  it("an audit-mode rule lets its method and path refusals through as would-deny, naming itself", () => {
    const p = mustBuild({ version: 1, network: { rules: rules({ enforcement: "audit" }) } });
    expect(evaluate(p, GET)).toEqual({ allow: true, rule: "api", allowPrivate: [] });
    expect(evaluate(p, req("api.test", 80, "http", "GET", "/admin"))).toEqual({ allow: true, rule: "api", allowPrivate: [], wouldDeny: { reason: "path_not_allowed", rule: "api" } });
    expect(evaluate(p, req("api.test", 80, "http", "DELETE", "/v1/x"))).toEqual({ allow: true, rule: "api", allowPrivate: [], wouldDeny: { reason: "method_not_allowed", rule: "api" } });
    // It widens nothing else: another host is still denied.
    expect(evaluate(p, req("other.test", 80, "http", "GET", "/v1/x"))).toEqual({ allow: false, reason: "no_matching_rule" });
  });

  it("an enforcing rule that allows wins over an audit-mode rule's refusal (no would-deny)", () => {
    const p = mustBuild({
      version: 1,
      network: { rules: [...rules({ enforcement: "audit" }), { name: "open", endpoints: [{ host: "api.test", port: 80, protocol: "http" }] }] },
    });
    expect(evaluate(p, req("api.test", 80, "http", "DELETE", "/admin"))).toEqual({ allow: true, rule: "open", allowPrivate: [] });
  });

  it("a method override only an audit-mode rule admits is a would-deny of the request", () => {
    const p = mustBuild({ version: 1, network: { rules: rules({ enforcement: "audit" }) } });
    expect(evaluate(p, { ...GET, methodOverrides: ["DELETE"] })).toEqual({ allow: true, rule: "api", allowPrivate: [], wouldDeny: { reason: "method_override_not_allowed", rule: "api" } });
    const enforcing = mustBuild({ version: 1, network: { rules: rules() } });
    expect(evaluate(enforcing, { ...GET, methodOverrides: ["DELETE"] })).toMatchObject({ allow: false, reason: "method_override_not_allowed" });
  });

  it("an audit-mode deny entry flags what the rules allow, and leaves what they deny denied", () => {
    const p = mustBuild({ version: 1, network: { rules: rules(), deny: [{ name: "maybe", host: "api.test", enforcement: "audit" }] } });
    expect(evaluate(p, GET)).toEqual({ allow: true, rule: "api", allowPrivate: [], wouldDeny: { reason: "explicit_deny", rule: "maybe" } });
    expect(evaluate(p, req("api.test", 80, "http", "GET", "/admin"))).toEqual({ allow: false, reason: "path_not_allowed", rule: "api" });
    // An enforcing deny entry next to it still refuses.
    const both = mustBuild({ version: 1, network: { rules: rules(), deny: [{ name: "maybe", host: "api.test", enforcement: "audit" }, { name: "no", host: "api.test" }] } });
    expect(evaluate(both, GET)).toEqual({ allow: false, reason: "explicit_deny", rule: "no" });
  });

  it("the whole policy in audit mode lets every denial through as would-deny; only an endpoint that covers the request opens its private ranges", () => {
    const p = mustBuild({
      version: 1,
      network: { enforcement: "audit", rules: [{ name: "api", endpoints: [{ host: "api.test", port: 80, protocol: "http", allowPrivate: ["10.0.0.0/8"], rules: [{ methods: ["GET"] }] }] }], deny: [{ name: "no", host: "bad.test" }] },
    });
    expect(evaluate(p, GET)).toEqual({ allow: true, rule: "api", allowPrivate: ["10.0.0.0/8"] });
    expect(evaluate(p, req("api.test", 80, "http", "POST", "/v1/x"))).toEqual({ allow: true, rule: "api", allowPrivate: ["10.0.0.0/8"], wouldDeny: { reason: "method_not_allowed", rule: "api" } });
    expect(evaluate(p, req("bad.test", 443, "https"))).toEqual({ allow: true, rule: "no", allowPrivate: [], wouldDeny: { reason: "explicit_deny", rule: "no", policyWide: true } });
    expect(evaluate(p, req("else.test", 443, "https"))).toEqual({ allow: true, rule: AUDIT_MODE_RULE, allowPrivate: [], wouldDeny: { reason: "no_matching_rule", policyWide: true } });
  });

  it("property: the whole policy in audit mode allows everything; what enforcing allows is decided the same, the rest is its denial as would-deny", () => {
    const hostArb = fc.constantFrom("api.test", "x.api.test", "other.test", "10.0.0.1");
    const reqArb = fc.record({ host: hostArb, port: fc.constantFrom(80, 443), protocol: fc.constantFrom("http" as const, "https" as const, "tcp" as const), method: fc.constantFrom("GET", "POST"), path: fc.constantFrom("/", "/v1/x", "/admin") }, { requiredKeys: ["host", "port", "protocol"] });
    const endpointArb = fc.record({ host: fc.constantFrom("api.test", "*.api.test", "other.test"), port: fc.constantFrom(80, 443), protocol: fc.constantFrom("http", "https", "tcp"), auditRule: fc.boolean(), l7: fc.boolean() });
    const policyArb = fc.tuple(fc.array(endpointArb, { maxLength: 4 }), fc.array(fc.record({ host: hostArb, audit: fc.boolean() }), { maxLength: 2 })).map(([eps, denies]) => ({
      version: 1,
      network: {
        rules: eps.map((e, i) => ({
          name: `r${String(i)}`,
          ...(e.auditRule && { enforcement: "audit" }),
          endpoints: [{ host: e.host, port: e.port, protocol: e.protocol, ...(e.l7 && e.protocol !== "tcp" && { rules: [{ methods: ["GET"], paths: ["/v1/**"] }] }) }],
        })),
        deny: denies.map((d) => ({ host: d.host, ...(d.audit && { enforcement: "audit" }) })),
      },
    }));
    fc.assert(
      fc.property(policyArb, reqArb, (raw, r) => {
        const enforcing = mustBuild(raw);
        const audited = mustBuild({ ...raw, network: { ...raw.network, enforcement: "audit" } });
        const e = evaluate(enforcing, r);
        const a = evaluate(audited, r);
        expect(a.allow).toBe(true);
        if (e.allow) expect(a).toEqual(e);
        else expect(a).toMatchObject({ allow: true, allowPrivate: [], wouldDeny: { reason: e.reason } });
      }),
      { numRuns: Number(process.env.AUDIT_PROPERTY_RUNS ?? 1000) },
    );
  });

  it("a rule's own audit mode names the rule that let a request through, with or without the policy's audit mode", () => {
    // Found by the property above: an enforcing rule refusing first, an audit-mode rule after it.
    const rules = [
      { name: "strict", endpoints: [{ host: "api.test", port: 80, protocol: "http", rules: [{ methods: ["GET"] }] }] },
      { name: "trial", enforcement: "audit", endpoints: [{ host: "api.test", port: 80, protocol: "http", rules: [{ methods: ["GET"] }] }] },
    ];
    const post = req("api.test", 80, "http", "POST", "/x");
    const entry = evaluate(mustBuild({ version: 1, network: { rules } }), post);
    expect(entry).toEqual({ allow: true, rule: "trial", allowPrivate: [], wouldDeny: { reason: "method_not_allowed", rule: "strict" } });
    expect(evaluate(mustBuild({ version: 1, network: { enforcement: "audit", rules } }), post)).toEqual(entry);
  });

  it("enforcement: enforce is the default's normal form (same hash); another value is refused naming both", () => {
    const plain = mustBuild({ version: 1, network: { rules: rules(), deny: [{ host: "a.test" }] } });
    const spelled = mustBuild({ version: 1, network: { enforcement: "enforce", rules: rules({ enforcement: "enforce" }), deny: [{ host: "a.test", enforcement: "enforce" }] } });
    expect(policyHash(spelled)).toBe(policyHash(plain));
    const bad = policyFromObject({ version: 1, network: { enforcement: "warn", rules: [] } });
    expect(bad.ok).toBe(false);
    if (!bad.ok) expect(bad.errors).toEqual(['network.enforcement: expected one of enforce, audit, got "warn"']);
  });
});
