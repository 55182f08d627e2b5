// Each policy module builds tables and schemas while it loads (CIDR literals, zod schemas).
// The imports are inside the tests on purpose: if building one of them throws, a test here
// fails. A static import would fail the whole file's collection instead, which reports no
// failed test at all (and so, to Stryker's vitest runner, no detected mutant).
import { describe, expect, it } from "vitest";

describe("the policy modules load and answer", () => {
  it("schema", async () => {
    const { validatePolicyValue } = await import("../../../src/policy/schema.js");
    expect(validatePolicyValue({ version: 1 })).toEqual({
      ok: true,
      policy: { version: 1, network: { rules: [], deny: [] }, filesystem: { readOnly: [], readWrite: [] }, process: { limits: {} } },
    });
  });

  it("parse", async () => {
    const { defaultPolicy, parsePolicyYaml } = await import("../../../src/policy/parse.js");
    expect(parsePolicyYaml("version: 1\n")).toEqual({ ok: true, policy: defaultPolicy() });
  });

  it("address", async () => {
    const { checkResolvedAddress, hostAddressSet } = await import("../../../src/policy/address.js");
    expect(checkResolvedAddress("8.8.8.8", [], hostAddressSet(["8.8.8.8"]))).toMatchObject({ ok: false, reason: "host_address" });
    expect(checkResolvedAddress("127.0.0.1", [], hostAddressSet([]))).toEqual({ ok: false, reason: "private_address", range: "127.0.0.0/8 (loopback)" });
  });

  it("cidr, hosts, paths, evaluate, canonical and the index", async () => {
    const index = await import("../../../src/policy/index.js");
    expect(index.parseCidr("10.0.0.0/8").ok).toBe(true);
    expect(index.hostMatches("*.a.test", "b.a.test")).toBe(true);
    expect(index.pathMatches("/v1/**", "/v1/x")).toBe(true);
    expect(index.evaluate(index.defaultPolicy(), { host: "a.test", port: 443, protocol: "https" })).toEqual({ allow: false, reason: "no_matching_rule" });
    expect(index.canonicalJson({ b: 1, a: 2 })).toBe('{"a":2,"b":1}');
  });
});
