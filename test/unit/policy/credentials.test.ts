// Credentials, pure: the policy's words (placeholder bindings, injected headers, one-line
// errors), where a secret may go (scope by host, port, path), and the swap itself in the
// request target, headers (Basic auth too) and opted-in bodies — percent-encoding, split
// and repeated placeholders, unknown names, refusals that never carry a value.
import { describe, expect, it } from "vitest";
import { credentialScope, policyFromObject, referencedSecrets, secretBindings, type Policy } from "../../../src/policy/index.js";
import { validateCredentials } from "../../../src/policy/credentials.js";
import { tlsMode as tlsModeOf } from "../../../src/policy/schema.js";
import { MAX_SUBSTITUTIONS, findPlaceholders, percentEncode, rewriteBody, rewriteHeaders, rewriteTarget, type CredentialContext } from "../../../src/supervisor/credentials.js";

const VALUE = "ghp_S3cret/with?odd&chars=+%";
const E = "network.rules[0].endpoints[0]";

function policy(endpoints: object[], more: object[] = []): Policy {
  const p = policyFromObject({ version: 1, network: { rules: [{ name: "gh", endpoints }, ...more] } });
  if (!p.ok) throw new Error(p.errors.join("; "));
  return p.policy;
}
function errorsOf(credentials: unknown, extra: object = {}): string[] {
  const p = policyFromObject({ version: 1, network: { rules: [{ name: "gh", endpoints: [{ host: "api.test", port: 443, protocol: "https", credentials, ...extra }] }] } });
  return p.ok ? [] : p.errors;
}

const GH = policy([
  { host: "api.test", port: 443, protocol: "https", credentials: [{ secret: "github", paths: ["/repos/**"] }, { secret: "other" }] },
  { host: "up.test", ports: [443, 8443], protocol: "https", credentials: [{ secret: "github", body: { maxBytes: 100 } }, { header: "X-Api-Key", value: "k={{secret:apikey}}" }] },
  { host: "free.test", port: 443, protocol: "https" },
]);

function ctx(p: Policy, req: { host: string; port?: number; path?: string; method?: string }, values: Record<string, string> = { github: VALUE, other: "o", apikey: "AK" }): CredentialContext {
  const scope = credentialScope(p, { host: req.host, port: req.port ?? 443, protocol: "https", method: req.method ?? "GET", path: req.path ?? "/" });
  const map = new Map(Object.entries(values).map(([k, v]) => [k, Buffer.from(v)]));
  return { scope, bindings: (s) => secretBindings(p, s), values: { get: (n) => map.get(n) } };
}

describe("the policy's credentials", () => {
  it("normal form: bindings with paths and body (true → the default bound), injected headers lowercased; https terminated", () => {
    const p = policy([{ host: "api.test", port: 443, protocol: "https", credentials: [{ secret: "github", paths: ["/a/**", "/a/**"], body: true }, { header: "Authorization", value: "Bearer {{secret:github}}" }] }]);
    const e = p.network.rules[0]!.endpoints[0]!;
    expect(e.credentials).toEqual([{ secret: "github", paths: ["/a/**"], body: { maxBytes: 65536 } }, { header: "authorization", value: "Bearer {{secret:github}}" }]);
    expect(tlsModeOf(e)).toBe("terminate");
    expect(referencedSecrets(GH)).toEqual(["apikey", "github", "other"]);
  });

  it.each<[string, unknown, object, string]>([
    ["plain http", [{ secret: "a" }], { protocol: "http", port: 80 }, `${E}.credentials: credentials need protocol https (the supervisor terminates TLS and verifies the origin), not http: over plain http the secret would cross the network in clear text`],
    ["tcp", [{ secret: "a" }], { protocol: "tcp" }, `${E}.credentials: credentials need protocol https (the supervisor terminates TLS and verifies the origin), not tcp`],
    ["passthrough", [{ secret: "a" }], { tls: "passthrough" }, `${E}.credentials: credentials need tls: terminate; through a tls: passthrough tunnel the supervisor cannot see a placeholder`],
    ["not a list", "github", {}, `${E}.credentials: expected a non-empty list of credentials, got "github"`],
    ["empty", [], {}, `${E}.credentials: expected a non-empty list of credentials, got a list`],
    ["a bad name", [{ secret: "GitHub" }], {}, `${E}.credentials[0].secret: invalid secret name "GitHub": 1-63 characters: lowercase letters, digits, '-' and '_', starting with a letter or digit`],
    ["no secret", [{ paths: ["/a"] }], {}, `${E}.credentials[0].secret: required (a secret name; or "header" and "value")`],
    ["an unknown key", [{ secret: "a", host: "x" }], {}, `${E}.credentials[0]: unknown key "host" (allowed: secret, paths, body)`],
    ["a bad glob", [{ secret: "a", paths: ["a"] }], {}, `${E}.credentials[0].paths[0]: "a": a path glob must start with "/"`],
    ["empty paths", [{ secret: "a", paths: [] }], {}, `${E}.credentials[0].paths: expected a non-empty list of path globs, got a list`],
    ["body over the bound", [{ secret: "a", body: { maxBytes: 1048577 } }], {}, `${E}.credentials[0].body.maxBytes: expected bytes 1-1048576, got 1048577`],
    ["body wrong type", [{ secret: "a", body: "yes" }], {}, `${E}.credentials[0].body: expected true, false or { maxBytes: 1-1048576 }, got "yes"`],
    ["a reserved header", [{ header: "Host", value: "{{secret:a}}" }], {}, `${E}.credentials[0].header: "Host" is the proxy's own header; it cannot be set`],
    ["a proxy header", [{ header: "Proxy-Authorization", value: "{{secret:a}}" }], {}, `${E}.credentials[0].header: "Proxy-Authorization" is the proxy's own header; it cannot be set`],
    ["an override header", [{ header: "X-HTTP-Method-Override", value: "{{secret:a}}" }], {}, `${E}.credentials[0].header: "X-HTTP-Method-Override" is the proxy's own header; it cannot be set`],
    ["a bad header name", [{ header: "a b", value: "{{secret:a}}" }], {}, `${E}.credentials[0].header: expected a header name (letters, digits and !#$%&'*+.^_\`|~-), got "a b"`],
    ["a header set twice", [{ header: "A", value: "{{secret:a}}" }, { header: "a", value: "{{secret:a}}" }], {}, `${E}.credentials[1].header: "a" is set twice on this endpoint`],
    ["a template without a secret", [{ header: "A", value: "Bearer x" }], {}, `${E}.credentials[0].value: "Bearer x": name the secret it carries with {{secret:NAME}}`],
    ["another template", [{ header: "A", value: "{{env:x}}" }], {}, `${E}.credentials[0].value: "{{env:x}}": the only template is {{secret:NAME}}`],
    ["a line break", [{ header: "A", value: "x\r\n{{secret:a}}" }], {}, `${E}.credentials[0].value: a header value holds printable ASCII, spaces and tabs only`],
    ["a bad name in a template", [{ header: "A", value: "{{secret:A}}" }], {}, `${E}.credentials[0].value: invalid secret name "A": 1-63 characters: lowercase letters, digits, '-' and '_', starting with a letter or digit`],
    ["too many", Array.from({ length: 17 }, (_, i) => ({ secret: `s${String(i)}` })), {}, `${E}.credentials: at most 16 credentials per endpoint, got 17`],
  ])("%s: one line naming the value and what is allowed", (_n, credentials, extra, error) => {
    expect(errorsOf(credentials, extra)).toEqual([error]);
  });

  it("a policy referencing more than 32 secrets is refused", () => {
    const endpoints = [0, 1, 2].map((k) => ({ host: `h${String(k)}.test`, port: 443, protocol: "https", credentials: Array.from({ length: 11 }, (_, i) => ({ secret: `s${String(k)}-${String(i)}` })) }));
    const p = policyFromObject({ version: 1, network: { rules: [{ name: "r", endpoints }] } });
    expect(p.ok ? [] : p.errors).toEqual(["network.rules: at most 32 distinct secrets per policy, got 33"]);
  });
});

describe("where a secret may go", () => {
  it("by host, port and path; header injections by path; the body bound is the largest opt-in", () => {
    expect([...ctx(GH, { host: "api.test", path: "/repos/x" }).scope.placeholders.keys()]).toEqual(["github", "other"]);
    expect([...ctx(GH, { host: "api.test", path: "/user" }).scope.placeholders.keys()]).toEqual(["other"]);
    expect(ctx(GH, { host: "api.test", port: 8443 }).scope.placeholders.size).toBe(0);
    expect(ctx(GH, { host: "free.test" }).scope.placeholders.size).toBe(0);
    const up = ctx(GH, { host: "up.test", port: 8443 }).scope;
    expect(up.placeholders.get("github")).toEqual({ body: true });
    expect(up.bodyMaxBytes).toBe(100);
    expect(up.headers).toEqual([{ header: "x-api-key", value: "k={{secret:apikey}}" }]);
    expect(ctx(GH, { host: "api.test" }).scope.bodyMaxBytes).toBeNull();
  });

  it("an endpoint whose L7 rules refuse the request lends it no credentials", () => {
    const p = policy([{ host: "api.test", port: 443, protocol: "https", rules: [{ methods: ["GET"] }], credentials: [{ secret: "github" }] }, { host: "api.test", port: 443, protocol: "https" }]);
    expect(ctx(p, { host: "api.test", method: "GET" }).scope.placeholders.has("github")).toBe(true);
    expect(ctx(p, { host: "api.test", method: "POST" }).scope.placeholders.has("github")).toBe(false);
  });

  it("bindings name rule, host, ports, paths and form", () => {
    expect(secretBindings(GH, "github")).toEqual([
      { rule: "gh", host: "api.test", ports: [443], paths: ["/repos/**"], form: "placeholder" },
      { rule: "gh", host: "up.test", ports: [443, 8443], paths: null, form: "placeholder" },
    ]);
    expect(secretBindings(GH, "apikey")).toEqual([{ rule: "gh", host: "up.test", ports: [443, 8443], paths: null, form: "header" }]);
  });
});

describe("the credentials in force for one request", () => {
  it("over every endpoint that allows it: a header once (the first in file order), a secret's body swap if any binding asks, the largest body bound, a binding on any of its paths", () => {
    const p = policy(
      [{ host: "api.x.test", port: 443, protocol: "https", credentials: [{ secret: "a", body: { maxBytes: 100 }, paths: ["/x/**", "/y/**"] }, { header: "Authorization", value: "first {{secret:a}}" }] }],
      [{ name: "second", endpoints: [{ host: "*.x.test", port: 443, protocol: "https", credentials: [{ secret: "a" }, { secret: "b", body: { maxBytes: 50 } }, { header: "authorization", value: "second {{secret:b}}" }] }] }],
    );
    expect(credentialScope(p, { host: "api.x.test", port: 443, protocol: "https", method: "GET", path: "/y/1" })).toEqual({
      placeholders: new Map([
        ["a", { body: true }],
        ["b", { body: true }],
      ]),
      bodyMaxBytes: 100,
      headers: [{ header: "authorization", value: "first {{secret:a}}" }],
    });
  });

  it("an endpoint that only sets a header still has a scope; one with nothing for the path has none", () => {
    const h = policy([{ host: "h.test", port: 443, protocol: "https", credentials: [{ header: "x-key", value: "{{secret:k}}", paths: ["/k/**"] }] }]);
    const req = (path: string) => ({ host: "h.test", port: 443, protocol: "https" as const, method: "GET", path });
    expect(credentialScope(h, req("/k/1"))).toEqual({ placeholders: new Map(), bodyMaxBytes: null, headers: [{ header: "x-key", value: "{{secret:k}}", paths: ["/k/**"] }] });
    expect(credentialScope(h, req("/other"))).toEqual({ placeholders: new Map(), bodyMaxBytes: null, headers: [] });
  });
});

describe("finding placeholders", () => {
  it.each<[string, string, { name: string; encoded: boolean }[]]>([
    ["literal", "Bearer sandgate:secret:github", [{ name: "github", encoded: false }]],
    ["the name ends at a non-name character", "/x/sandgate:secret:git_hub-2/y", [{ name: "git_hub-2", encoded: false }]],
    ["percent-encoded colons", "q=sandgate%3Asecret%3agithub&x", [{ name: "github", encoded: true }]],
    ["every character encoded", "%73%61%6e%64%67%61%74%65%3a%73%65%63%72%65%74%3a%67h", [{ name: "gh", encoded: true }]],
    ["an encoded non-name character ends the name", "sandgate:secret:github%2Fx", [{ name: "github", encoded: false }]],
    ["repeated", "sandgate:secret:a,sandgate:secret:b sandgate:secret:a", [{ name: "a", encoded: false }, { name: "b", encoded: false }, { name: "a", encoded: false }]],
    ["upper case prefix", "SANDGATE:SECRET:GitHub", [{ name: "GitHub", encoded: false }]],
    ["an empty name", "sandgate:secret:", [{ name: "", encoded: false }]],
    ["an incomplete prefix", "sandgate:secre", []],
    ["split by something else", "sandgate:sec ret:github", []],
    ["a broken escape", "sandgate%3secret:x", []],
  ])("%s", (_n, text, want) => {
    expect(findPlaceholders(text).map(({ name, encoded }) => ({ name, encoded }))).toEqual(want);
  });

  it("percent-encoding keeps unreserved bytes only", () => {
    expect(percentEncode(Buffer.from("aZ09-._~ /?&=+%\u00e9"))).toBe("aZ09-._~%20%2F%3F%26%3D%2B%25%C3%A9");
  });
});

describe("swapping in the request target", () => {
  const c = ctx(GH, { host: "api.test", path: "/repos/x" });
  it.each<[string, string, string]>([
    ["a query value", "/repos/x?token=sandgate:secret:github&a=1", `/repos/x?token=${percentEncode(Buffer.from(VALUE))}&a=1`],
    ["an encoded query value", "/repos/x?t=sandgate%3Asecret%3Agithub", `/repos/x?t=${percentEncode(Buffer.from(VALUE))}`],
    ["a path segment", "/repos/sandgate:secret:other/y", "/repos/o/y"],
    ["inside a segment, twice", "/repos/a.sandgate:secret:other.sandgate:secret:other", "/repos/a.o.o"],
    ["a name runs as far as name characters go", "/repos/sandgate:secret:other-x", null as unknown as string],
    ["nothing to swap", "/repos/x?a=sandgate", "/repos/x?a=sandgate"],
  ])("%s", (_n, target, want) => {
    // A null want: the longer name ("other-x") is not bound, so the request is refused.
    if (want === null) expect(rewriteTarget(target, c)).toMatchObject({ ok: false, refusal: { reason: "credential_unknown", secret: "other-x" } });
    else expect(rewriteTarget(target, c)).toEqual({ ok: true, value: want });
  });

  it("a placeholder where it is not bound: mismatch naming the bindings, never the value", () => {
    const r = rewriteTarget("/user?t=sandgate:secret:github", ctx(GH, { host: "api.test", path: "/user" }));
    expect(r).toMatchObject({ ok: false, refusal: { reason: "credential_endpoint_mismatch", secret: "github", where: "url" } });
    if (r.ok) return;
    expect(r.refusal.message).toBe('secret "github" may not be sent here; it is bound to api.test:443 /repos/** (rule gh); up.test:443,8443 (rule gh)');
    expect(JSON.stringify(r)).not.toContain("S3cret");
  });

  it("another allowed host gets the mismatch; a name bound nowhere, or with no value held, fails closed as unknown", () => {
    expect(rewriteTarget("/?t=sandgate:secret:github", ctx(GH, { host: "free.test" }))).toMatchObject({ ok: false, refusal: { reason: "credential_endpoint_mismatch" } });
    expect(rewriteTarget("/?t=sandgate:secret:nope", ctx(GH, { host: "api.test" }))).toMatchObject({ ok: false, refusal: { reason: "credential_unknown", secret: "nope", bindings: [] } });
    expect(rewriteTarget("/?t=SANDGATE:SECRET:GITHUB", ctx(GH, { host: "api.test", path: "/repos/x" }))).toMatchObject({ ok: false, refusal: { reason: "credential_unknown" } });
    const unset = rewriteTarget("/repos/x?t=sandgate:secret:github", ctx(GH, { host: "api.test", path: "/repos/x" }, {}));
    expect(unset).toMatchObject({ ok: false, refusal: { reason: "credential_unknown", message: 'the supervisor holds no value for secret "github" (not set, or deleted)' } });
  });

  it(`more than ${String(MAX_SUBSTITUTIONS)} placeholders is refused`, () => {
    const many = `/repos/${"sandgate:secret:other/".repeat(MAX_SUBSTITUTIONS + 1)}`;
    expect(rewriteTarget(many, c)).toMatchObject({ ok: false, refusal: { reason: "credential_unusable" } });
    expect(rewriteTarget(`/repos/${"sandgate:secret:other/".repeat(MAX_SUBSTITUTIONS)}`, c).ok).toBe(true);
  });
});

describe("swapping in headers", () => {
  const c = ctx(GH, { host: "api.test", path: "/repos/x" });
  it("a bearer token, any header, repeated; other headers untouched, order kept", () => {
    const r = rewriteHeaders(["Authorization", "Bearer sandgate:secret:github", "X-A", "sandgate:secret:other:sandgate:secret:other", "Accept", "*/*"], c);
    expect(r).toEqual({ ok: true, value: ["Authorization", `Bearer ${VALUE}`, "X-A", "o:o", "Accept", "*/*"] });
  });

  it("Basic auth: decoded, swapped, re-encoded", () => {
    const basic = `Basic ${Buffer.from("user:sandgate:secret:github").toString("base64")}`;
    const r = rewriteHeaders(["authorization", basic], c);
    expect(r.ok && Buffer.from(r.value[1]!.slice(6), "base64").toString()).toBe(`user:${VALUE}`);
    const other = rewriteHeaders(["authorization", `Basic ${Buffer.from("u:sandgate:secret:github").toString("base64")}`], ctx(GH, { host: "free.test" }));
    expect(other).toMatchObject({ ok: false, refusal: { reason: "credential_endpoint_mismatch", where: "header" } });
    expect(rewriteHeaders(["authorization", `Basic ${Buffer.from("u:p").toString("base64")}`], c)).toEqual({ ok: true, value: ["authorization", `Basic ${Buffer.from("u:p").toString("base64")}`] });
  });

  it("a percent-encoded placeholder in a header gets the value percent-encoded", () => {
    expect(rewriteHeaders(["Cookie", "t=sandgate%3Asecret%3Aother"], c)).toEqual({ ok: true, value: ["Cookie", "t=o"] });
  });

  it("a value with a line break never goes into a header", () => {
    const r = rewriteHeaders(["X", "sandgate:secret:other"], ctx(GH, { host: "api.test" }, { other: "a\r\nInjected: 1" }));
    expect(r).toMatchObject({ ok: false, refusal: { reason: "credential_unusable", message: 'the value of secret "other" cannot go in a header: it holds a line break or control character' } });
    expect(JSON.stringify(r)).not.toContain("Injected");
  });

  it("an injected header replaces what the workload sent under that name; its secret needs a value", () => {
    const up = ctx(GH, { host: "up.test" });
    expect(rewriteHeaders(["x-api-KEY", "mine", "A", "b"], up)).toEqual({ ok: true, value: ["A", "b", "x-api-key", "k=AK"] });
    expect(rewriteHeaders([], ctx(GH, { host: "up.test" }, {}))).toMatchObject({ ok: false, refusal: { reason: "credential_unknown", secret: "apikey" } });
    // The header form does not let the workload send the placeholder itself.
    expect(rewriteHeaders(["X", "sandgate:secret:apikey"], up)).toMatchObject({ ok: false, refusal: { reason: "credential_endpoint_mismatch", bindings: [{ form: "header" }] } });
  });
});

describe("swapping in bodies", () => {
  const up = ctx(GH, { host: "up.test" });
  it("JSON gets a JSON string's inside, forms percent-encoding, other types the bytes; a placeholder split across chunks is whole once read", () => {
    const json = Buffer.concat([Buffer.from('{"token":"sandgate:sec'), Buffer.from('ret:github","n":1}')]);
    const r = rewriteBody(json, "application/json; charset=utf-8", ctx(GH, { host: "up.test" }, { github: 'a"b\\c' }));
    expect(r.ok && JSON.parse(r.value.toString())).toEqual({ token: 'a"b\\c', n: 1 });
    const form = rewriteBody(Buffer.from("a=1&t=sandgate%3Asecret%3Agithub"), "application/x-www-form-urlencoded", up);
    expect(form.ok && form.value.toString()).toBe(`a=1&t=${percentEncode(Buffer.from(VALUE))}`);
    const text = rewriteBody(Buffer.from("x sandgate:secret:github y"), "text/plain", up);
    expect(text.ok && text.value.toString()).toBe(`x ${VALUE} y`);
    const none = Buffer.from("nothing here");
    expect(rewriteBody(none, undefined, up)).toEqual({ ok: true, value: none });
  });

  it("a secret whose binding here does not opt in to bodies is refused in the body", () => {
    const p = policy([{ host: "b.test", port: 443, protocol: "https", credentials: [{ secret: "github" }, { secret: "other", body: true }] }]);
    const c = ctx(p, { host: "b.test" });
    expect(rewriteBody(Buffer.from("sandgate:secret:other"), "text/plain", c)).toEqual({ ok: true, value: Buffer.from("o") });
    const r = rewriteBody(Buffer.from("sandgate:secret:github"), "text/plain", c);
    expect(r).toMatchObject({ ok: false, refusal: { reason: "credential_endpoint_mismatch", where: "body" } });
    expect(!r.ok && r.refusal.message).toContain("in a request body (the binding does not opt in with body)");
  });
});

// validateCredentials itself, where the policy's schema does not check first: each issue's
// path and whole message, and the bounds at their edges.
describe("validateCredentials, directly", () => {
  const v = (credentials: unknown): unknown => validateCredentials(credentials, "https", undefined);
  const issue = (path: (string | number)[], message: string) => ({ ok: false, issues: [{ path, message }] });

  it("each entry's mistakes, at its own path, in one line", () => {
    expect(v(["x"])).toEqual(issue([0], 'expected a mapping with "secret" (a placeholder binding) or "header" and "value" (a header the supervisor sets), got "x"'));
    expect(v([{ secret: "a", x: 1, y: 2 }])).toEqual(issue([0], 'unknown keys "x", "y" (allowed: secret, paths, body)'));
    expect(v([{ header: "a", value: "{{secret:a}}", x: 1 }])).toEqual(issue([0], 'unknown key "x" (allowed: header, value, paths)'));
    expect(v([{ secret: 5 }])).toEqual(issue([0, "secret"], "expected a secret name, got 5"));
    expect(v([{ secret: "a", paths: [5] }])).toEqual(issue([0, "paths", 0], 'expected a path glob starting with "/", got 5'));
    expect(v([{ header: "a", value: "{{secret:a}}", paths: ["a"] }])).toEqual(issue([0, "paths", 0], '"a": a path glob must start with "/"'));
    expect(v([{ header: "a", value: "{{secret:a}}{{" }])).toEqual(issue([0, "value"], '"{{secret:a}}{{": the only template is {{secret:NAME}}'));
  });

  it("body: false or absent is none, true the default; { maxBytes } from 1 to the bound, a whole number; anything else refused", () => {
    const body = (b: unknown): unknown => v([{ secret: "a", body: b }]);
    expect(body(false)).toEqual({ ok: true, value: [{ secret: "a" }] });
    expect(body(true)).toEqual({ ok: true, value: [{ secret: "a", body: { maxBytes: 65536 } }] });
    expect(body({ maxBytes: 1 })).toEqual({ ok: true, value: [{ secret: "a", body: { maxBytes: 1 } }] });
    expect(body({ maxBytes: 1048576 })).toEqual({ ok: true, value: [{ secret: "a", body: { maxBytes: 1048576 } }] });
    expect(body({})).toEqual(issue([0, "body", "maxBytes"], "required (bytes, 1-1048576)"));
    for (const n of [0, 1.5, "5"]) expect(body({ maxBytes: n })).toEqual(issue([0, "body", "maxBytes"], `expected bytes 1-1048576, got ${JSON.stringify(n)}`));
    expect(body({ maxBytes: 1, x: 1 })).toEqual(issue([0, "body"], 'unknown key "x" (allowed: maxBytes)'));
    for (const b of [null, [], "yes"]) expect((body(b) as { ok: boolean }).ok).toBe(false);
  });

  it("a header value up to 8192 characters; 16 credentials an endpoint", () => {
    const value = (n: number): string => `{{secret:a}}${"x".repeat(n - 12)}`;
    expect(v([{ header: "a", value: value(8192) }])).toMatchObject({ ok: true });
    expect(v([{ header: "a", value: value(8193) }])).toEqual(issue([0, "value"], "longer than 8192 characters"));
    expect(v(Array.from({ length: 16 }, (_, i) => ({ secret: `s${String(i)}` })))).toMatchObject({ ok: true });
  });
});
