// The range sandbox networks take their /28s from: parsing (every mistake named), the n-th
// subnet (wrapping), where a sandbox's search starts, and Docker's overlap answer.
import { describe, expect, it } from "vitest";
import { DEFAULT_SANDBOX_SUBNETS, firstSubnetIndex, isSubnetOverlap, nthSubnet, parseSandboxSubnets, subnetCount } from "../../../src/driver/docker/sandbox-subnets.js";

const range = (text: string) => {
  const r = parseSandboxSubnets(text);
  if (!r.ok) throw new Error(r.error);
  return r.range;
};

describe("sandbox subnets", () => {
  it("the default is RFC 2544's 198.18.0.0/15: 8,192 /28s", () => {
    expect(subnetCount(range(DEFAULT_SANDBOX_SUBNETS))).toBe(8192);
    expect(subnetCount(range("10.99.0.0/24"))).toBe(16);
    expect(subnetCount(range("10.0.0.0/8"))).toBe(2 ** 20);
  });

  it.each([
    ["10.99.0.0/25", /prefix must be \/8 to \/24/],
    ["10.0.0.0/7", /prefix must be \/8 to \/24/],
    ["10.99.0.1/24", /host bits are set.*10\.99\.0\.0\/24/],
    ["fd00::/64", /an IPv4 range/],
    ["10.99.0.0", /an IPv4 range/],
    ["ten.0.0.0/8", /not an IPv4 or IPv6 address/],
    ["", /invalid sandbox subnet range ""/],
  ])("refuses %j, naming it", (text, why) => {
    const r = parseSandboxSubnets(text);
    expect(r.ok).toBe(false);
    if (!r.ok) {
      expect(r.error).toMatch(why);
      expect(r.error).toContain(JSON.stringify(text));
      expect(r.error).not.toContain("\n");
    }
  });

  it("the n-th /28, in order, wrapping at the end of the range (and for negative n)", () => {
    const r = range("198.18.0.0/15");
    expect(nthSubnet(r, 0)).toBe("198.18.0.0/28");
    expect(nthSubnet(r, 1)).toBe("198.18.0.16/28");
    expect(nthSubnet(r, 16)).toBe("198.18.1.0/28");
    expect(nthSubnet(r, 8191)).toBe("198.19.255.240/28");
    expect(nthSubnet(r, 8192)).toBe("198.18.0.0/28");
    expect(nthSubnet(r, -1)).toBe("198.19.255.240/28");
    expect(nthSubnet(range("255.255.255.0/24"), 15)).toBe("255.255.255.240/28");
  });

  it("takes a range with spaces around it (an environment value with a newline)", () => {
    expect(parseSandboxSubnets(" 10.99.0.0/24\n")).toMatchObject({ ok: true, range: { prefix: 24 } });
  });

  it("every /28 of a range is distinct and inside it", () => {
    const r = range("10.77.0.0/22");
    const all = Array.from({ length: subnetCount(r) }, (_, n) => nthSubnet(r, n));
    expect(new Set(all).size).toBe(64);
    for (const s of all) expect(s).toMatch(/^10\.77\.[0-3]\.(0|16|32|48|64|80|96|112|128|144|160|176|192|208|224|240)\/28$/);
  });

  it("a sandbox's search starts at a place its id fixes, inside the range, spread across ids", () => {
    const r = range(DEFAULT_SANDBOX_SUBNETS);
    // FNV-1a (32 bit) of the id, modulo the count: 1671925403 % 8192 (computed apart, in Python).
    expect(firstSubnetIndex("sbx_abc", r)).toBe(3739);
    const starts = new Set(Array.from({ length: 200 }, (_, i) => firstSubnetIndex(`sbx_${i.toString(36)}x`, r)));
    for (const s of starts) expect(s >= 0 && s < 8192).toBe(true);
    expect(starts.size).toBeGreaterThan(190);
  });

  it("recognises Docker's overlap refusal, and only it", () => {
    expect(isSubnetOverlap("Pool overlaps with other one on this address space")).toBe(true);
    expect(isSubnetOverlap("network with name sg-x already exists")).toBe(false);
  });
});
