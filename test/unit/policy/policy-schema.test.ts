// The schema's words and normal form, piece by piece: what a person editing a policy reads
// when something is wrong, and the exact shape evaluation and storage get when all is right.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import * as z from "zod/mini";
import { describeValue, formatIssuePath, validatePolicyValue } from "../../../src/policy/schema.js";
import { closestKey } from "../../../src/policy/describe.js";
import { parsePolicyYaml, policyFromObject, serializePolicy } from "../../../src/policy/index.js";

function errorsOf(value: unknown): string[] {
  const result = policyFromObject(value);
  return result.ok ? [] : result.errors;
}

const endpoint = (extra: Record<string, unknown> = {}) => ({ host: "a.test", port: 443, protocol: "https", ...extra });
const withEndpoint = (extra: Record<string, unknown>) => ({ version: 1, network: { rules: [{ name: "r", endpoints: [endpoint(extra)] }] } });
const E = "network.rules[0].endpoints[0]";

describe("describeValue", () => {
  it.each<[string, unknown, string]>([
    ["undefined", undefined, "nothing"],
    ["null", null, "null"],
    ["a short string", "abc", '"abc"'],
    ["the empty string", "", '""'],
    ["60 characters", "x".repeat(60), JSON.stringify("x".repeat(60))],
    ["61 characters", "x".repeat(61), JSON.stringify(`${"x".repeat(57)}...`)],
    ["a number", 80.5, "80.5"],
    ["zero", 0, "0"],
    ["false", false, "false"],
    ["true", true, "true"],
    ["a bigint", 10n, "10"],
    ["a list", [1], "a list"],
    ["a date", new Date(0), "a date"],
    ["a mapping", { a: 1 }, "a mapping"],
    ["a function", () => 1, "function"],
    ["a symbol", Symbol("s"), "symbol"],
  ])("%s → %s", (_n, value, text) => {
    expect(describeValue(value)).toBe(text);
  });

  it("a YAML timestamp is a date", () => {
    expect(parsePolicyYaml("version: !!timestamp 2001-01-01\n")).toEqual({
      ok: false,
      errors: ["version: expected 1 (the only policy format version), got a date (line 1, col 22)"],
    });
  });
});

describe("closestKey: the allowed key an unknown one is most likely a typo of", () => {
  const ENDPOINT = ["host", "port", "ports", "protocol", "rules", "tls", "allowPrivate", "credentials"];
  it.each<[string, string | undefined]>([
    ["alowPrivate", "allowPrivate"], // a letter dropped
    ["allowPrivatee", "allowPrivate"], // one added
    ["alloePrivate", "allowPrivate"], // one changed
    ["allowPrviate", "allowPrivate"], // two swapped: one edit
    ["alowPrviate", "allowPrivate"], // one dropped and two swapped: two edits
    ["ALLOWPRIVATE", "allowPrivate"], // case only
    ["AlowPrivate", "allowPrivate"], // case and a typo
    ["protcool", "protocol"],
    ["credentails", "credentials"],
    ["hosts", "host"], // 1 from host, 2 from ports
    ["portz", "port"], // 1 from port and from ports: the first allowed
    ["tl", "tls"],
    ["prot", "port"], // two swapped, not a prefix: protocol is 4 edits away
    ["t", undefined], // 2 edits from tls, more than its letters
    ["to", undefined], // 2 edits from tls, as many as its letters: a guess, not a typo
    ["banana", undefined],
    ["allowPublic", undefined],
    ["", undefined],
  ])("%s → %s", (key, near) => {
    expect(closestKey(key, ENDPOINT)).toBe(near);
  });
});

describe("formatIssuePath", () => {
  it.each<[PropertyKey[], string]>([
    [[], "policy"],
    [["version"], "version"],
    [["network", "rules", 2, "endpoints", 0, "port"], "network.rules[2].endpoints[0].port"],
    [[0], "[0]"],
    [["_a1"], "_a1"],
    [["a", "b-c"], 'a["b-c"]'],
    [["1a"], '["1a"]'],
    [["a b"], '["a b"]'],
    [[""], '[""]'],
    [[Symbol("s")], '["Symbol(s)"]'],
    [["x", Symbol("s"), "y"], 'x["Symbol(s)"].y'],
  ])("%j → %s", (path, text) => {
    expect(formatIssuePath(path)).toBe(text);
  });
});

describe("error wording", () => {
  it.each<[string, unknown, string[]]>([
    ["two unknown keys", { version: 1, netwrok: {}, proces: {} }, ['policy: unknown keys "netwrok", "proces"; did you mean "network" for "netwrok", "process" for "proces"? (allowed: version, network, filesystem, process)']],
    ["two unknown keys, one close", { version: 1, netwrok: {}, banana: {} }, ['policy: unknown keys "netwrok", "banana"; did you mean "network" for "netwrok"? (allowed: version, network, filesystem, process)']],
    ["a key in the wrong case", withEndpoint({ AllowPrivate: [] }), [`${E}: unknown key "AllowPrivate"; did you mean "allowPrivate"? (allowed: host, port, ports, protocol, rules, tls, allowPrivate, credentials)`]],
    ["a credential key with a typo", withEndpoint({ credentials: [{ secret: "a", pahts: ["/a"] }] }), [`${E}.credentials[0]: unknown key "pahts"; did you mean "paths"? (allowed: secret, paths, body)`]],
    ["one unknown key", { version: 1, x: 1 }, ['policy: unknown key "x" (allowed: version, network, filesystem, process)']],
    ["network not a mapping", { version: 1, network: [] }, ["network: expected a mapping, got a list"]],
    ["rules not a list", { version: 1, network: { rules: "r" } }, ['network.rules: expected a list of rules, got "r"']],
    ["ports not a list", withEndpoint({ port: undefined, ports: 80 }), [`${E}.ports: expected a list of ports, got 80`]],
    ["endpoints not a list", { version: 1, network: { rules: [{ name: "r", endpoints: {} }] } }, ["network.rules[0].endpoints: expected a list of endpoints, got a mapping"]],
    ["methods not a list", withEndpoint({ protocol: "http", rules: [{ methods: "GET" }] }), [`${E}.rules[0].methods: expected a list of methods, got "GET"`]],
    ["no methods", withEndpoint({ protocol: "http", rules: [{ methods: [] }] }), [`${E}.rules[0].methods: expected at least one of methods, got an empty list`]],
    ["no paths", withEndpoint({ protocol: "http", rules: [{ paths: [] }] }), [`${E}.rules[0].paths: expected at least one of paths, got an empty list`]],
    ["a method that is not a string", withEndpoint({ protocol: "http", rules: [{ methods: [5] }] }), [`${E}.rules[0].methods[0]: expected one of GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS, TRACE, got 5`]],
    ["a path that is not a string", withEndpoint({ protocol: "http", rules: [{ paths: [5] }] }), [`${E}.rules[0].paths[0]: expected a path glob starting with "/", got 5`]],
    ["a range that is not a string", withEndpoint({ allowPrivate: [5] }), [`${E}.allowPrivate[0]: expected an address range like "10.0.0.0/8", got 5`]],
    ["filesystem paths not a list", { version: 1, filesystem: { readOnly: "/a", readWrite: "/b" } }, ['filesystem.readOnly: expected a list of paths, got "/a"', 'filesystem.readWrite: expected a list of paths, got "/b"']],
    ["a filesystem path that is not a string", { version: 1, filesystem: { readWrite: [5] } }, ["filesystem.readWrite[0]: expected an absolute path, got 5"]],
    ["a user that is not a string", { version: 1, process: { user: 1000 } }, ['process.user: expected "uid" or "uid:gid", got 1000']],
    ["cpus not a number", { version: 1, process: { limits: { cpus: "2" } } }, ['process.limits.cpus: expected a number of CPUs from 0.01 to 256, got "2"']],
    ["cpus too many", { version: 1, process: { limits: { cpus: 256.5 } } }, ["process.limits.cpus: expected a number of CPUs from 0.01 to 256, got 256.5"]],
    // Below these a workload cannot run (runc refuses the CPU quota; a shell needs more pids): refused with the range.
    ["cpus too few", { version: 1, process: { limits: { cpus: 0.0001 } } }, ["process.limits.cpus: expected a number of CPUs from 0.01 to 256, got 0.0001"]],
    ["pids too few", { version: 1, process: { limits: { pids: 1 } } }, ["process.limits.pids: expected 16-1000000, got 1"]],
    ["memory too small", { version: 1, process: { limits: { memoryMb: 8 } } }, ["process.limits.memoryMb: expected 16-1048576, got 8"]],
    ["memory too large", { version: 1, process: { limits: { memoryMb: 1024 * 1024 + 1 } } }, ["process.limits.memoryMb: expected 16-1048576, got 1048577"]],
    ["pids not a number", { version: 1, process: { limits: { pids: "many" } } }, ['process.limits.pids: expected 16-1000000, got "many"']],
  ])("%s", (_n, value, errors) => {
    expect(errorsOf(value)).toEqual(errors);
  });

  it("a deny name clashing with another deny names the first one", () => {
    expect(errorsOf({ version: 1, network: { deny: [{ name: "d", host: "a.test" }, { name: "d", host: "b.test" }] } })).toEqual([
      'network.deny[1].name: duplicate name "d" (also used by network.deny[0].name)',
    ]);
  });
});

describe("limits at their edges", () => {
  const fsPath = (n: number) => "/" + "a".repeat(n - 1);

  it("a filesystem path may be 4096 characters long, not more", () => {
    expect(policyFromObject({ version: 1, filesystem: { readOnly: [fsPath(4096)] } }).ok).toBe(true);
    expect(errorsOf({ version: 1, filesystem: { readOnly: [fsPath(4097)] } })).toEqual([`filesystem.readOnly[0]: ${JSON.stringify(fsPath(4097))}: longer than 4096 characters`]);
  });

  it.each(["/a/./b", "/.", "/a/.."])("%s: dot segments are refused", (path) => {
    expect(errorsOf({ version: 1, filesystem: { readWrite: [path] } })).toEqual([`filesystem.readWrite[0]: ${JSON.stringify(path)}: "." and ".." segments are not allowed`]);
  });

  it.each(["/a/.b", "/a/b.", "/...", "/a..b"])("%s: a dotted name is not a dot segment", (path) => {
    expect(policyFromObject({ version: 1, filesystem: { readWrite: [path] } }).ok).toBe(true);
  });

  it.each(["0", "1000", "0:0", "1000:1000", "2147483647", "2147483647:2147483647"])("user %s is accepted as written", (user) => {
    const result = policyFromObject({ version: 1, process: { user } });
    expect(result.ok && result.policy.process).toStrictEqual({ user, limits: {} });
  });

  it.each(["2147483648", "1:2147483648", "x1000", "1000:x", "1000x", " 1000", "1000:", ":1000", "01", "1:01", "1:2:3", ""])("user %j is refused", (user) => {
    expect(errorsOf({ version: 1, process: { user } })).toEqual([
      `process.user: expected numeric "uid" or "uid:gid" (ids up to 2147483647), got ${JSON.stringify(user)}`,
    ]);
  });
});

describe("normal form: absent stays absent", () => {
  const only = (value: unknown) => {
    const result = validatePolicyValue(value);
    if (!result.ok) throw new Error(JSON.stringify(result.issues));
    return result.policy;
  };

  it("a paths-only or methods-only L7 rule gets no other list", () => {
    const p = only(withEndpoint({ protocol: "http", rules: [{ paths: ["/x", "/x"] }, { methods: ["POST", "GET"] }] }));
    expect(p.network.rules[0]?.endpoints[0]?.rules).toStrictEqual([{ paths: ["/x"] }, { methods: ["GET", "POST"] }]);
  });

  it("an endpoint without L7 rules has no rules key", () => {
    expect(only(withEndpoint({})).network.rules[0]?.endpoints[0]).toStrictEqual({ host: "a.test", ports: [443], protocol: "https", allowPrivate: [] });
  });

  it("a deny entry keeps only what was given", () => {
    const p = only({ version: 1, network: { deny: [{ host: "a.test" }, { name: "n", host: "b.test", port: 1, protocol: "tcp" }] } });
    expect(p.network).toStrictEqual({ rules: [], deny: [{ host: "a.test" }, { name: "n", host: "b.test", ports: [1], protocol: "tcp" }] });
  });

  it("filesystem lists default to empty one by one", () => {
    expect(only({ version: 1, filesystem: { readWrite: ["/w"] } }).filesystem).toStrictEqual({ readOnly: [], readWrite: ["/w"] });
    expect(only({ version: 1, filesystem: { readOnly: ["/r"] } }).filesystem).toStrictEqual({ readOnly: ["/r"], readWrite: [] });
  });

  it("process limits keep only what was given (the gateway spreads them over its defaults)", () => {
    expect(only({ version: 1, process: {} }).process).toStrictEqual({ limits: {} });
    expect(only({ version: 1, process: { limits: {} } }).process).toStrictEqual({ limits: {} });
    expect(only({ version: 1, process: { limits: { memoryMb: 64 } } }).process).toStrictEqual({ limits: { memoryMb: 64 } });
    expect(only({ version: 1, process: { limits: { cpus: 0.5 } } }).process).toStrictEqual({ limits: { cpus: 0.5 } });
    expect(only({ version: 1, process: { limits: { pids: 16 } } }).process).toStrictEqual({ limits: { pids: 16 } });
    expect(only({ version: 1, process: { user: "1" } }).process).toStrictEqual({ user: "1", limits: {} });
  });

  it("property: the normal form survives JSON exactly (no key holds undefined)", () => {
    const opt = <T>(arb: fc.Arbitrary<T>) => fc.option(arb, { nil: undefined });
    const arb = fc.record({
      rule: fc.record({ methods: opt(fc.constantFrom(["GET"], ["POST", "GET"])), paths: opt(fc.constantFrom(["/a"], ["/a/**", "/b"])) }),
      deny: fc.record({ name: opt(fc.constantFrom("d1", "d2")), port: opt(fc.integer({ min: 1, max: 65535 })), protocol: opt(fc.constantFrom("http", "tcp")) }),
      limits: fc.record({ memoryMb: opt(fc.integer({ min: 16, max: 4096 })), cpus: opt(fc.constantFrom(0.5, 2)), pids: opt(fc.integer({ min: 16, max: 100 })) }),
      user: opt(fc.constantFrom("0", "1000:1000")),
    });
    const defined = (o: Record<string, unknown>) => Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined));
    fc.assert(
      fc.property(arb, ({ rule, deny, limits, user }) => {
        const l7 = defined(rule);
        const input = {
          version: 1,
          network: {
            rules: [{ name: "r", endpoints: [endpoint(Object.keys(l7).length > 0 ? { protocol: "http", rules: [l7] } : {})] }],
            deny: [{ host: "x.test", ...defined(deny) }],
          },
          process: { ...defined({ user }), limits: defined(limits) },
        };
        const first = validatePolicyValue(input);
        expect(first.ok).toBe(true);
        if (!first.ok) return;
        expect(JSON.parse(serializePolicy(first.policy))).toStrictEqual(first.policy);
      }),
      { numRuns: 300 },
    );
  });
});

describe("the same words with or without zod's English locale", () => {
  // The supervisor bundles zod/mini, which loads no locale; the gateway also loads classic
  // zod, which registers English for every issue no schema words itself. A message that came
  // from the locale would read differently in the two, so each one must be our own.
  const valid = {
    version: 1,
    network: {
      enforcement: "audit",
      rules: [
        {
          name: "r",
          enforcement: "enforce",
          endpoints: [
            { host: "a.test", port: 443, protocol: "https", rules: [{ methods: ["GET"], paths: ["/x/**"] }], tls: "terminate", allowPrivate: ["10.0.0.0/8"], credentials: [{ header: "Authorization", value: "Bearer {{secret:gh}}" }] },
            { host: "*.b.test", ports: [80, 81], protocol: "http" },
          ],
        },
      ],
      deny: [{ name: "d", host: "evil.test", ports: [1, 2], protocol: "tcp", enforcement: "audit" }],
    },
    filesystem: { readOnly: ["/a"], readWrite: ["/c"] },
    process: { user: "1000:1000", limits: { memoryMb: 512, cpus: 1.5, pids: 100 } },
  };
  const WRONG: unknown[] = [undefined, null, true, -1, 1.5, 1e20, Number.NaN, "", "x", [], [1], {}, { zz: 1 }];

  /** Every value in `valid` replaced by each wrong one, each mapping given an unknown key, each list emptied. */
  function* variants(): Generator {
    const paths: (string | number)[][] = [];
    const walk = (v: unknown, p: (string | number)[]) => {
      paths.push(p);
      if (Array.isArray(v)) v.forEach((x, i) => walk(x, [...p, i]));
      else if (v !== null && typeof v === "object") for (const [k, x] of Object.entries(v)) walk(x, [...p, k]);
    };
    walk(valid, []);
    for (const p of paths) {
      const edit = (change: (parent: Record<string | number, unknown>, key: string | number) => void): unknown => {
        const root: Record<string, unknown> = { root: structuredClone(valid) };
        const full = ["root", ...p];
        const parent = full.slice(0, -1).reduce<Record<string | number, unknown>>((o, k) => o[k] as Record<string | number, unknown>, root);
        change(parent, full[full.length - 1]!);
        return root.root;
      };
      for (const w of WRONG) yield edit((o, k) => (o[k] = w));
      yield edit((o, k) => {
        const v = o[k];
        if (Array.isArray(v)) v.length = 0;
        else if (v !== null && typeof v === "object") (v as Record<string, unknown>).unknownKey = 1;
      });
    }
  }

  it("gives every issue its own message: none comes from a locale", () => {
    const saved = z.config().localeError;
    let refused = 0;
    try {
      for (const value of variants()) {
        z.config(z.locales.en());
        const english = validatePolicyValue(value);
        z.config({ localeError: undefined });
        const none = validatePolicyValue(value);
        expect(none).toEqual(english);
        if (!none.ok) {
          refused++;
          for (const issue of none.issues) expect(issue.message).not.toMatch(/^Invalid input/);
        }
      }
    } finally {
      z.config({ localeError: saved });
    }
    expect(refused).toBeGreaterThan(500);
  });
});
