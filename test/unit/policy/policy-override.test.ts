// Method overrides: every method a request names (its own, the override headers', the
// _method parameters') must be allowed. overrideMethods reads them; evaluate checks them.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { OVERRIDE_HEADERS, evaluate, overrideMethods, policyFromObject, type EgressRequest, type Policy } from "../../../src/policy/index.js";

describe("overrideMethods", () => {
  it.each([
    [[], "/x", []],
    [["X-HTTP-Method-Override", "DELETE"], "/x", ["DELETE"]],
    [["x-http-method-override", "delete"], "/x", ["DELETE"]],
    [["X-HTTP-Method", "PUT"], "/x", ["PUT"]],
    [["X-Method-Override", " patch "], "/x", ["PATCH"]],
    [["X-HTTP-Method-Override", "DELETE, PUT", "X-HTTP-Method-Override", "PUT"], "/x", ["DELETE", "PUT"]],
    [["X-HTTP-Method-Override", ""], "/x", []],
    [["X-HTTP-Method-Override", " , "], "/x", []],
    [["X-Other", "DELETE", "Host", "a"], "/x", []],
    [[], "/x?_method=DELETE", ["DELETE"]],
    [[], "/x?_method=delete", ["DELETE"]],
    [[], "/x?a=1&_method=put&b=2", ["PUT"]],
    [[], "/x?a=1;_method=put", ["PUT"]],
    [[], "/x?_METHOD=DELETE", ["DELETE"]],
    [[], "/x?%5Fmethod=DELETE", ["DELETE"]],
    [[], "/x?_method%3D=DELETE", []],
    [[], "/x?_method[]=DELETE", ["DELETE"]],
    [[], "/x?_method=%44ELETE", ["DELETE"]],
    [[], "/x?_method=DEL+ETE", ["DEL ETE"]],
    [[], "/x?_method=%zz", ["%ZZ"]],
    [[], "/x?_method", []],
    [[], "/x?_method=", []],
    [[], "/x?method=DELETE&x_method=PUT", []],
    [[], "/x#?_method=DELETE", []],
    [[], "/x?a=1#_method=DELETE", []],
    [[], "/x?_method=PUT&_method=DELETE", ["PUT", "DELETE"]],
    [["X-HTTP-Method", "GET"], "/x?_method=DELETE", ["GET", "DELETE"]],
  ] as [string[], string, string[]][])("%j %s -> %j", (headers, target, methods) => {
    expect(overrideMethods(headers, target)).toEqual(methods);
  });

  it("knows the three override headers", () => {
    expect(OVERRIDE_HEADERS).toEqual(["x-http-method-override", "x-http-method", "x-method-override"]);
  });

  it("never throws, and answers uppercase, unique, non-empty methods (property)", () => {
    fc.assert(
      fc.property(fc.array(fc.string(), { maxLength: 8 }), fc.string(), (headers, target) => {
        const out = overrideMethods(headers, target);
        expect(new Set(out).size).toBe(out.length);
        for (const m of out) {
          expect(m).toBe(m.toUpperCase());
          expect(m.trim()).not.toBe("");
        }
      }),
      { numRuns: 2000 },
    );
  });
});

function policyOf(network: unknown): Policy {
  const r = policyFromObject({ version: 1, network });
  if (!r.ok) throw new Error(r.errors.join("; "));
  return r.policy;
}

const POLICY = policyOf({
  rules: [
    { name: "read", endpoints: [{ host: "api.test", port: 80, protocol: "http", rules: [{ methods: ["GET", "HEAD"], paths: ["/v1/**"] }] }] },
    { name: "write", endpoints: [{ host: "api.test", port: 80, protocol: "http", rules: [{ methods: ["POST"], paths: ["/v1/jobs"] }] }] },
    { name: "open", endpoints: [{ host: "open.test", port: 80, protocol: "http" }, { host: "tls.test", port: 443, protocol: "https" }] },
  ],
});

const req = (method: string, path: string, methodOverrides?: string[], host = "api.test"): EgressRequest => ({
  host,
  port: 80,
  protocol: "http",
  method,
  path,
  ...(methodOverrides === undefined ? {} : { methodOverrides }),
});

describe("evaluate with method overrides", () => {
  it.each([
    [req("GET", "/v1/items"), { allow: true, rule: "read" }],
    [req("GET", "/v1/items", []), { allow: true, rule: "read" }],
    [req("GET", "/v1/items", ["GET"]), { allow: true, rule: "read" }],
    [req("GET", "/v1/items", ["HEAD"]), { allow: true, rule: "read" }],
    [req("GET", "/v1/items", ["DELETE"]), { allow: false, reason: "method_override_not_allowed", rule: "read" }],
    [req("GET", "/v1/jobs", ["POST"]), { allow: true, rule: "read" }],
    [req("GET", "/v1/items", ["POST"]), { allow: false, reason: "method_override_not_allowed", rule: "write" }],
    [req("POST", "/v1/jobs", ["PUT"]), { allow: false, reason: "method_override_not_allowed", rule: "read" }],
    [req("GET", "/v1/items", ["HEAD", "DELETE"]), { allow: false, reason: "method_override_not_allowed", rule: "read" }],
    [req("GET", "/v1/items", ["DEL ETE"]), { allow: false, reason: "method_override_not_allowed", rule: "read" }],
    // A denied request stays denied for its own reason.
    [req("DELETE", "/v1/items", ["GET"]), { allow: false, reason: "method_not_allowed", rule: "read" }],
    [req("GET", "/admin", ["DELETE"]), { allow: false, reason: "path_not_allowed", rule: "read" }],
    // An endpoint without L7 rules allows every method, overridden or not.
    [req("GET", "/x", ["DELETE"], "open.test"), { allow: true, rule: "open" }],
  ] as [EgressRequest, object][])("%j -> %j", (r, expected) => {
    expect(evaluate(POLICY, r)).toMatchObject(expected);
  });

  it("CONNECT tunnels are opaque: overrides are not looked at", () => {
    expect(evaluate(POLICY, { host: "tls.test", port: 443, protocol: "https", methodOverrides: ["DELETE"] })).toMatchObject({ allow: true, rule: "open" });
  });

  it("allowed with overrides exactly when allowed as each of the methods (property)", () => {
    const method = fc.constantFrom("GET", "HEAD", "POST", "PUT", "DELETE", "PATCH");
    const path = fc.constantFrom("/v1/items", "/v1/jobs", "/admin", "/v1");
    fc.assert(
      fc.property(method, path, fc.array(method, { maxLength: 3 }), (m, p, overrides) => {
        const each = [m, ...overrides].every((x) => evaluate(POLICY, req(x, p)).allow);
        expect(evaluate(POLICY, req(m, p, overrides)).allow).toBe(each);
      }),
      { numRuns: 2000 },
    );
  });
});
