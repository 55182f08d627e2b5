import { readFileSync } from "node:fs";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  canonicalJson,
  changedFixedSections,
  defaultPolicy,
  parsePolicyYaml,
  policyFromObject,
  policyHash,
  serializePolicy,
  type Policy,
} from "../../../src/policy/index.js";
import { DEFAULT_IDS } from "../../../src/driver/docker/rootfs.js";

const EXAMPLE = `version: 1
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
    - name: lan-origin
      endpoints:
        - host: origin
          port: 8080
          protocol: http
          allowPrivate: ["10.213.0.0/16"]
  deny:
    - host: "*.evil.test"
filesystem:
  readOnly: ["/opt/data"]
  readWrite: ["/sandbox"]
process:
  user: "1000:1000"
  limits: { memoryMb: 512, cpus: 1, pids: 256 }
`;

function mustParse(text: string): Policy {
  const result = parsePolicyYaml(text);
  if (!result.ok) throw new Error(result.errors.join("\n"));
  return result.policy;
}

/** Errors for a policy object, without the YAML positions. */
function errorsOf(value: unknown): string[] {
  const result = policyFromObject(value);
  return result.ok ? [] : result.errors;
}

const endpoint = (extra: Record<string, unknown> = {}) => ({ host: "a.test", port: 443, protocol: "https", ...extra });
const withEndpoint = (extra: Record<string, unknown>) => ({ version: 1, network: { rules: [{ name: "r", endpoints: [endpoint(extra)] }] } });

describe("parsePolicyYaml on the reference example", () => {
  it("produces the normal form", () => {
    expect(mustParse(EXAMPLE)).toEqual({
      version: 1,
      network: {
        rules: [
          { name: "npm-registry", endpoints: [{ host: "registry.npmjs.org", ports: [443], protocol: "https", allowPrivate: [] }] },
          {
            name: "api",
            endpoints: [
              {
                host: "api.internal.test",
                ports: [8080],
                protocol: "http",
                rules: [{ methods: ["GET", "HEAD"], paths: ["/v1/**", "/health"] }],
                allowPrivate: [],
              },
            ],
          },
          { name: "lan-origin", endpoints: [{ host: "origin", ports: [8080], protocol: "http", allowPrivate: ["10.213.0.0/16"] }] },
        ],
        deny: [{ host: "*.evil.test" }],
      },
      filesystem: { readOnly: ["/opt/data"], readWrite: ["/sandbox"] },
      process: { user: "1000:1000", limits: { memoryMb: 512, cpus: 1, pids: 256 } },
    });
  });

  it("accepts the same policy as a JSON object", () => {
    const fromYaml = mustParse(EXAMPLE);
    const fromObject = policyFromObject(JSON.parse(serializePolicy(fromYaml)));
    expect(fromObject).toEqual({ ok: true, policy: fromYaml });
  });
});

describe("normalisation", () => {
  it("lowercases hosts, sorts and de-duplicates ports and methods, canonicalises ranges and paths", () => {
    const result = policyFromObject({
      version: 1,
      network: {
        rules: [
          {
            name: "r",
            endpoints: [
              {
                host: "API.Example.COM.",
                ports: [8443, 80, 8443],
                protocol: "http",
                rules: [{ methods: ["POST", "GET", "POST"] }],
                allowPrivate: ["FD00::/8", "fd00::/8", "10.0.0.0/8"],
              },
            ],
          },
        ],
        deny: [{ host: "2001:DB8::1", port: 22 }],
      },
      filesystem: { readOnly: ["/opt//data/", "/opt/data"] },
    });
    expect(result.ok).toBe(true);
    if (!result.ok) return;
    expect(result.policy.network.rules[0]?.endpoints[0]).toEqual({
      host: "api.example.com",
      ports: [80, 8443],
      protocol: "http",
      rules: [{ methods: ["GET", "POST"] }],
      allowPrivate: ["fd00::/8", "10.0.0.0/8"],
    });
    expect(result.policy.network.deny).toEqual([{ host: "2001:db8::1", ports: [22] }]);
    expect(result.policy.filesystem).toEqual({ readOnly: ["/opt/data"], readWrite: [] });
    expect(result.policy.process).toEqual({ limits: {} });
  });

  it("defaultPolicy is deny-all with nothing else set", () => {
    expect(defaultPolicy()).toEqual({
      version: 1,
      network: { rules: [], deny: [] },
      filesystem: { readOnly: [], readWrite: [] },
      process: { limits: {} },
    });
    expect(mustParse("version: 1\n")).toEqual(defaultPolicy());
  });
});

describe("schema errors name the path and the problem", () => {
  it("the port example from the spec", () => {
    const rules = [0, 1, 2].map((i) => ({ name: `r${String(i)}`, endpoints: [endpoint({ port: i === 2 ? 70000 : 443 })] }));
    expect(errorsOf({ version: 1, network: { rules } })).toEqual(["network.rules[2].endpoints[0].port: expected 1-65535, got 70000"]);
  });

  it.each<[string, unknown, string]>([
    ["missing version", {}, "version: required (1 (the only policy format version))"],
    ["wrong version", { version: 2 }, "version: expected 1 (the only policy format version), got 2"],
    ["not a mapping", [], "policy: expected a mapping, got a list"],
    ["unknown top-level key", { version: 1, netwrok: {} }, 'policy: unknown key "netwrok"; did you mean "network"? (allowed: version, network, filesystem, process)'],
    ["unknown key, nothing close", { version: 1, banana: {} }, 'policy: unknown key "banana" (allowed: version, network, filesystem, process)'],
    ["port zero", withEndpoint({ port: 0 }), "network.rules[0].endpoints[0].port: expected 1-65535, got 0"],
    ["fractional port", withEndpoint({ port: 80.5 }), "network.rules[0].endpoints[0].port: expected 1-65535, got 80.5"],
    ["port as string", withEndpoint({ port: "443" }), 'network.rules[0].endpoints[0].port: expected 1-65535, got "443"'],
    ["port and ports", withEndpoint({ ports: [80] }), 'network.rules[0].endpoints[0].ports: give either "port" or "ports", not both'],
    ["empty ports", withEndpoint({ port: undefined, ports: [] }), "network.rules[0].endpoints[0].ports: expected at least one of ports, got an empty list"],
    ["bad port in list", withEndpoint({ port: undefined, ports: [80, 65536] }), "network.rules[0].endpoints[0].ports[1]: expected 1-65535, got 65536"],
    ["no port at all", withEndpoint({ port: undefined }), 'network.rules[0].endpoints[0].port: required (1-65535; or "ports": a list)'],
    ["bad protocol", withEndpoint({ protocol: "ftp" }), 'network.rules[0].endpoints[0].protocol: expected one of http, https, tcp, got "ftp"'],
    ["missing protocol", withEndpoint({ protocol: undefined }), "network.rules[0].endpoints[0].protocol: required (one of http, https, tcp)"],
    ["typo in endpoint key", withEndpoint({ alowPrivate: ["10.0.0.0/8"] }), 'network.rules[0].endpoints[0]: unknown key "alowPrivate"; did you mean "allowPrivate"? (allowed: host, port, ports, protocol, rules, tls, allowPrivate, credentials)'],
    ["wildcard TLD", withEndpoint({ host: "*.com" }), 'network.rules[0].endpoints[0].host: "*.com": a wildcard needs at least two labels after "*."'],
    ["partial-label wildcard", withEndpoint({ host: "foo*.example.com" }), 'network.rules[0].endpoints[0].host: "foo*.example.com": "*" must be a whole label'],
    ["host not a string", withEndpoint({ host: 10 }), "network.rules[0].endpoints[0].host: expected a host name, got 10"],
    ["L7 rules on https passthrough", withEndpoint({ tls: "passthrough", rules: [{ methods: ["GET"] }] }), "network.rules[0].endpoints[0].rules: L7 rules need tls: terminate; with tls: passthrough the proxy cannot see requests"],
    ["L7 rules on tcp", withEndpoint({ protocol: "tcp", rules: [{ paths: ["/"] }] }), "network.rules[0].endpoints[0].rules: L7 rules (methods, paths) need protocol http or https; with protocol tcp the proxy cannot see requests"],
    ["tls on http", withEndpoint({ protocol: "http", tls: "terminate" }), "network.rules[0].endpoints[0].tls: tls applies to protocol https only, not http"],
    ["tls mode misspelt", withEndpoint({ tls: "intercept" }), 'network.rules[0].endpoints[0].tls: expected one of terminate, passthrough, got "intercept"'],
    ["empty L7 rule", withEndpoint({ protocol: "http", rules: [{}] }), 'network.rules[0].endpoints[0].rules[0]: give "methods", "paths" or both'],
    ["empty L7 list", withEndpoint({ protocol: "http", rules: [] }), "network.rules[0].endpoints[0].rules: expected at least one of L7 rules, got an empty list"],
    ["lowercase method", withEndpoint({ protocol: "http", rules: [{ methods: ["get"] }] }), 'network.rules[0].endpoints[0].rules[0].methods[0]: methods are uppercase: write "GET", got "get"'],
    ["unknown method", withEndpoint({ protocol: "http", rules: [{ methods: ["FETCH"] }] }), 'network.rules[0].endpoints[0].rules[0].methods[0]: expected one of GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS, TRACE, got "FETCH"'],
    ["relative path glob", withEndpoint({ protocol: "http", rules: [{ paths: ["v1/**"] }] }), 'network.rules[0].endpoints[0].rules[0].paths[0]: "v1/**": a path glob must start with "/"'],
    ["bad allowPrivate", withEndpoint({ allowPrivate: ["10.213.0.1/16"] }), 'network.rules[0].endpoints[0].allowPrivate[0]: "10.213.0.1/16": host bits are set in "10.213.0.1/16"; did you mean 10.213.0.0/16?'],
    ["allowPrivate not a list", withEndpoint({ allowPrivate: "10.0.0.0/8" }), 'network.rules[0].endpoints[0].allowPrivate: expected a list of address ranges, got "10.0.0.0/8"'],
    ["rule without endpoints", { version: 1, network: { rules: [{ name: "r", endpoints: [] }] } }, "network.rules[0].endpoints: expected at least one of endpoints, got an empty list"],
    ["bad rule name", { version: 1, network: { rules: [{ name: "has space", endpoints: [endpoint()] }] } }, 'network.rules[0].name: expected a name of letters, digits, ".", "_", "-" (at most 63, starting with a letter or digit), got "has space"'],
    ["missing rule name", { version: 1, network: { rules: [{ endpoints: [endpoint()] }] } }, "network.rules[0].name: required (a name)"],
    [
      "duplicate rule names",
      { version: 1, network: { rules: [{ name: "a", endpoints: [endpoint()] }, { name: "a", endpoints: [endpoint()] }] } },
      'network.rules[1].name: duplicate name "a" (also used by network.rules[0].name)',
    ],
    [
      "deny name clashing with a rule",
      { version: 1, network: { rules: [{ name: "a", endpoints: [endpoint()] }], deny: [{ name: "a", host: "x.test" }] } },
      'network.deny[0].name: duplicate name "a" (also used by network.rules[0].name)',
    ],
    ["deny with *", { version: 1, network: { deny: [{ host: "*" }] } }, 'network.deny[0].host: "*": "*" alone would match every host'],
    ["deny port and ports", { version: 1, network: { deny: [{ host: "x.test", port: 1, ports: [2] }] } }, 'network.deny[0].ports: give either "port" or "ports", not both'],
    ["deny not a list", { version: 1, network: { deny: null } }, "network.deny: expected a list of deny entries, got null"],
    ["relative fs path", { version: 1, filesystem: { readOnly: ["data"] } }, 'filesystem.readOnly[0]: "data": expected an absolute path (starting with "/")'],
    ["dot-dot fs path", { version: 1, filesystem: { readWrite: ["/a/../etc"] } }, 'filesystem.readWrite[0]: "/a/../etc": "." and ".." segments are not allowed'],
    ["colon in fs path", { version: 1, filesystem: { readWrite: ["/a:/b"] } }, 'filesystem.readWrite[0]: "/a:/b": contains a control character, ":" or ","'],
    ["path in both lists", { version: 1, filesystem: { readOnly: ["/data"], readWrite: ["/x", "/data/"] } }, 'filesystem.readWrite[1]: "/data" is listed in both readOnly and readWrite'],
    ["user name instead of ids", { version: 1, process: { user: "root" } }, 'process.user: expected numeric "uid" or "uid:gid" (ids up to 2147483647), got "root"'],
    ["uid too large", { version: 1, process: { user: "1000:4294967296" } }, 'process.user: expected numeric "uid" or "uid:gid" (ids up to 2147483647), got "1000:4294967296"'],
    ["memory too small", { version: 1, process: { limits: { memoryMb: 1 } } }, "process.limits.memoryMb: expected 16-1048576, got 1"],
    ["cpus zero", { version: 1, process: { limits: { cpus: 0 } } }, "process.limits.cpus: expected a number of CPUs from 0.01 to 256, got 0"],
    ["fractional pids", { version: 1, process: { limits: { pids: 2.5 } } }, "process.limits.pids: expected 16-1000000, got 2.5"],
    ["unknown limit", { version: 1, process: { limits: { swapMb: 1 } } }, 'process.limits: unknown key "swapMb" (allowed: memoryMb, cpus, pids)'],
  ])("%s", (_label, value, message) => {
    const errors = errorsOf(value);
    expect(errors.length).toBeGreaterThan(0);
    expect(errors.some((e) => e.startsWith(message))).toBe(true);
  });

  it("reports every independent problem at once", () => {
    const errors = errorsOf({
      version: 1,
      network: { rules: [{ name: "r", endpoints: [endpoint({ port: 0, protocol: "ftp", host: "*" })] }] },
      process: { user: "x" },
    });
    expect(errors.map((e) => e.split(":")[0])).toEqual([
      "network.rules[0].endpoints[0].host",
      "network.rules[0].endpoints[0].port",
      "network.rules[0].endpoints[0].protocol",
      "process.user",
    ]);
  });
});

describe("YAML-specific errors", () => {
  it("syntax errors carry line and column", () => {
    const result = parsePolicyYaml("version: 1\nnetwork:\n  rules: [\n");
    expect(result.ok).toBe(false);
    if (!result.ok) expect(result.errors[0]).toMatch(/^line \d+, col \d+: /);
  });

  it("duplicate keys are an error, not a silent override", () => {
    const result = parsePolicyYaml("version: 1\nversion: 1\n");
    expect(result.ok).toBe(false);
    if (!result.ok) expect(result.errors[0]).toMatch(/^line 2, col 1: .*unique/i);
  });

  it("several documents in one file are an error", () => {
    const result = parsePolicyYaml("version: 1\n---\nversion: 1\n");
    expect(result.ok).toBe(false);
    if (!result.ok) expect(result.errors[0]).toContain("multiple documents");
  });

  it("an empty document says so", () => {
    expect(parsePolicyYaml("")).toEqual({ ok: false, errors: ["policy: the document is empty (expected a mapping that starts with version: 1)"] });
    expect(parsePolicyYaml("# only a comment\n").ok).toBe(false);
  });

  it("schema errors point at the offending value's line and column", () => {
    const text = EXAMPLE.replace("port: 8080\n          protocol: http\n          rules", "port: 70000\n          protocol: http\n          rules");
    const result = parsePolicyYaml(text);
    expect(result).toEqual({ ok: false, errors: ["network.rules[1].endpoints[0].port: expected 1-65535, got 70000 (line 12, col 17)"] });
  });

  it("an error about a missing key points at the enclosing mapping", () => {
    const result = parsePolicyYaml("version: 1\nnetwork:\n  rules:\n    - name: r\n      endpoints:\n        - host: a.test\n          protocol: tcp\n");
    expect(result).toEqual({ ok: false, errors: ['network.rules[0].endpoints[0].port: required (1-65535; or "ports": a list) (line 6, col 11)'] });
  });

  it("an error about the document itself points at its root", () => {
    expect(parsePolicyYaml("network: {}\n")).toEqual({ ok: false, errors: ["version: required (1 (the only policy format version)) (line 1, col 1)"] });
    expect(parsePolicyYaml("\n\n  - a\n")).toEqual({ ok: false, errors: ["policy: expected a mapping, got a list (line 3, col 3)"] });
  });

  it("a file may be 1 MiB (1048576 characters), not more", () => {
    const exactly = "version: 1\n#" + "x".repeat(1024 * 1024 - 12);
    expect(exactly).toHaveLength(1024 * 1024);
    expect(parsePolicyYaml(exactly).ok).toBe(true);
    expect(parsePolicyYaml(exactly + "x")).toEqual({ ok: false, errors: ["policy: file larger than 1048576 characters"] });
  });

  it("alias bombs are refused", () => {
    const lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"];
    for (let i = 1; i < 8; i++) lines.push(`a${String(i)}: &a${String(i)} [${Array.from({ length: 10 }, () => `*a${String(i - 1)}`).join(", ")}]`);
    const result = parsePolicyYaml(lines.join("\n") + "\n");
    expect(result.ok).toBe(false);
    if (!result.ok) expect(result.errors[0]).toMatch(/alias/i);
  });

  it("YAML 1.2 core schema: yes/no and unquoted 0777 are not booleans or octal", () => {
    const result = parsePolicyYaml("version: 1\nnetwork:\n  rules:\n    - name: r\n      endpoints:\n        - {host: a.test, port: 0777, protocol: tcp}\n");
    expect(result.ok).toBe(true);
    if (result.ok) expect(result.policy.network.rules[0]?.endpoints[0]?.ports).toEqual([777]);
  });
});

describe("canonicalJson", () => {
  it("sorts object keys at every level and leaves arrays in order", () => {
    expect(canonicalJson({ b: 1, a: { d: [3, 1, 2], c: null }, c: [{ z: 1, y: 2 }, "x"] })).toBe('{"a":{"c":null,"d":[3,1,2]},"b":1,"c":[{"y":2,"z":1},"x"]}');
  });

  it("keeps arrays arrays, even long ones whose indexes would sort as text", () => {
    const xs = Array.from({ length: 12 }, (_, i) => i);
    expect(canonicalJson(xs)).toBe(JSON.stringify(xs));
    expect(canonicalJson({ k: xs })).toBe(`{"k":${JSON.stringify(xs)}}`);
  });

  it("keeps a key named __proto__ (JSON.parse makes it an own property)", () => {
    const value: unknown = JSON.parse('{"b":1,"__proto__":{"x":1},"a":2}');
    expect(canonicalJson(value)).toBe('{"__proto__":{"x":1},"a":2,"b":1}');
    expect(canonicalJson(value)).not.toBe(canonicalJson({ a: 2, b: 1 }));
  });

  it("passes scalars and null through", () => {
    expect(canonicalJson(null)).toBe("null");
    expect(canonicalJson({ a: null })).toBe('{"a":null}');
    expect(canonicalJson("s")).toBe('"s"');
    expect(canonicalJson(7)).toBe("7");
    expect(canonicalJson(true)).toBe("true");
  });

  it("property: equal values in any key order give equal text, and the text parses back to the value", () => {
    fc.assert(
      fc.property(fc.jsonValue(), (value) => {
        const shuffled: unknown = JSON.parse(JSON.stringify(value), (_k, v: unknown) =>
          v !== null && typeof v === "object" && !Array.isArray(v) ? Object.fromEntries(Object.entries(v).reverse()) : v,
        );
        expect(canonicalJson(shuffled)).toBe(canonicalJson(value));
        expect(JSON.parse(canonicalJson(value))).toEqual(JSON.parse(JSON.stringify(value)));
      }),
      { numRuns: 500 },
    );
  });
});

describe("canonical serialization and hash", () => {
  it("is independent of key order and spelling in the input", () => {
    const a = mustParse(EXAMPLE);
    const reordered = `process:
  limits: { pids: 256, cpus: 1, memoryMb: 512 }
  user: "1000:1000"
filesystem:
  readWrite: ["/sandbox/"]
  readOnly: ["/opt/data"]
network:
  deny:
    - host: "*.EVIL.test."
  rules:
    - endpoints:
        - protocol: https
          ports: [443, 443]
          host: Registry.npmjs.org
      name: npm-registry
    - name: api
      endpoints:
        - { protocol: http, host: api.internal.test, port: 8080, rules: [{ paths: ["/v1/**", "/health"], methods: [HEAD, GET] }] }
    - name: lan-origin
      endpoints:
        - { host: origin, port: 8080, protocol: http, allowPrivate: ["10.213.0.0/16"] }
version: 1
`;
    const b = mustParse(reordered);
    expect(serializePolicy(b)).toBe(serializePolicy(a));
    expect(policyHash(b)).toBe(policyHash(a));
  });

  it("changes when the policy changes", () => {
    const a = mustParse(EXAMPLE);
    const b = mustParse(EXAMPLE.replace("port: 443", "port: 444"));
    expect(policyHash(a)).toMatch(/^sha256:[0-9a-f]{64}$/);
    expect(policyHash(b)).not.toBe(policyHash(a));
  });

  it("changedFixedSections sees filesystem and process changes but not network ones", () => {
    const a = mustParse(EXAMPLE);
    expect(changedFixedSections(a, mustParse(EXAMPLE.replace("port: 443", "port: 444")))).toEqual([]);
    expect(changedFixedSections(a, mustParse(EXAMPLE.replace('"/sandbox"', '"/work"')))).toEqual(["filesystem"]);
    expect(changedFixedSections(a, mustParse(EXAMPLE.replace("pids: 256", "pids: 257")))).toEqual(["process"]);
  });
});

// Random valid policy inputs for round-trip properties.
const hostArb = fc.oneof(
  fc.constantFrom("a.test", "Example.COM", "*.example.com", "origin", "10.0.0.1", "2001:DB8::1", "*.Sub.Example.org."),
  fc.stringMatching(/^[a-z][a-z0-9]{0,8}\.[a-z]{2,4}$/),
);
const portsArb = fc.array(fc.integer({ min: 1, max: 65535 }), { minLength: 1, maxLength: 4 });
const endpointArb = fc.oneof(
  fc.record({ host: hostArb, ports: portsArb, protocol: fc.constantFrom("https", "tcp") }),
  fc.record(
    {
      host: hostArb,
      port: fc.integer({ min: 1, max: 65535 }),
      protocol: fc.constant("http"),
      rules: fc.array(
        fc.record(
          { methods: fc.uniqueArray(fc.constantFrom("GET", "HEAD", "POST", "DELETE"), { minLength: 1 }), paths: fc.array(fc.constantFrom("/", "/v1/**", "/a/*/b", "/health"), { minLength: 1 }) },
          { requiredKeys: ["methods"] },
        ),
        { minLength: 1, maxLength: 3 },
      ),
      allowPrivate: fc.array(fc.constantFrom("10.0.0.0/8", "fd00::/8", "192.168.1.7", "::1")),
    },
    { requiredKeys: ["host", "port", "protocol"] },
  ),
);
const policyArb = fc
  .tuple(
    fc.array(fc.array(endpointArb, { minLength: 1, maxLength: 3 }), { maxLength: 4 }),
    fc.array(fc.record({ host: hostArb, ports: portsArb, protocol: fc.constantFrom("http", "https", "tcp") }, { requiredKeys: ["host"] }), { maxLength: 3 }),
  )
  .map(([rules, deny]) => ({ version: 1, network: { rules: rules.map((endpoints, i) => ({ name: `rule-${String(i)}`, endpoints })), deny } }));

describe("round-trip properties", () => {
  it("every generated policy validates, and its serialization validates back to the same policy and hash", () => {
    fc.assert(
      fc.property(policyArb, (input) => {
        const first = policyFromObject(input);
        expect(first.ok).toBe(true);
        if (!first.ok) return;
        const again = policyFromObject(JSON.parse(serializePolicy(first.policy)));
        expect(again).toEqual(first);
        if (again.ok) expect(policyHash(again.policy)).toBe(policyHash(first.policy));
      }),
      { numRuns: 300 },
    );
  });

  it("policyFromObject never throws on arbitrary JSON", () => {
    fc.assert(
      fc.property(fc.jsonValue(), (value) => {
        const result = policyFromObject(value);
        if (!result.ok) expect(result.errors.length).toBeGreaterThan(0);
      }),
      { numRuns: 1000 },
    );
  });

  it("parsePolicyYaml never throws on arbitrary text", () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 200 }), (text) => {
        const result = parsePolicyYaml(text);
        if (!result.ok) expect(result.errors.length).toBeGreaterThan(0);
      }),
      { numRuns: 500 },
    );
  });
});

describe("docs/policy.md", () => {
  const doc = readFileSync(new URL("../../../docs/policy.md", import.meta.url), "utf8");

  it("its complete example is a valid policy", () => {
    const example = /```yaml\n([\s\S]*?)```/.exec(doc)?.[1];
    expect(example).toBeDefined();
    const policy = mustParse(example!);
    expect(policy.network.rules.map((r) => r.name)).toEqual(["npm-registry", "api", "cdn", "lan-origin"]);
    // Not a low id that a host account may hold (the gateway refuses those, host-ids.ts), nor the supervisor's.
    const ids = policy.process.user!.split(":").map(Number);
    for (const id of ids) expect(id === DEFAULT_IDS.supervisor || id <= 65_535, String(id)).toBe(false);
  });

  it("its sample error messages are what the parser says for that input", () => {
    const text = `version: 1
network:
  rules:
    - name: a
      endpoints:
        - host: "*.com"
          port: 70000
          protocol: ftp
          alowPrivate: [10.0.0.0/8]
`;
    const result = parsePolicyYaml(text);
    expect(result.ok).toBe(false);
    if (result.ok) return;
    for (const line of result.errors) expect(doc).toContain(line);
    const syntax = parsePolicyYaml("a: [1,\n");
    expect(syntax.ok).toBe(false);
    if (!syntax.ok) expect(doc).toContain(syntax.errors[0]);
  });
});
