// Every blocked range, at both of its edges and one address past each edge, with the exact
// text a refusal names. The module is imported inside the tests, not at the top of the file:
// its tables are built from CIDR literals while it loads, and a malformed literal must fail a
// test here rather than the whole file's collection (which reports no failed test at all).
import { describe, expect, it } from "vitest";

const load = () => import("../../../src/policy/address.js");

async function rangeOf(addr: string): Promise<string | null> {
  const { checkResolvedAddress } = await load();
  const { NO_HOST_ADDRESSES } = await load();
  const result = checkResolvedAddress(addr, [], NO_HOST_ADDRESSES);
  if (result.ok) return null;
  if (result.reason !== "private_address") throw new Error(`${addr} did not parse`);
  return result.range;
}

const F6 = "ffff:ffff:ffff:ffff:ffff";

// The ranges (IANA special-purpose registries, not globally reachable) in address order;
// [range as reported, first address, last address, just below first, just above last]; a
// neighbour is either public (null) or the text of the range it falls in instead.
const TABLE: [string, string, string, string | null, string | null, string | null, string | null][] = [
  ["0.0.0.0/8 (unspecified / this network)", "0.0.0.0", "0.255.255.255", null, null, "1.0.0.0", null],
  ["10.0.0.0/8 (private)", "10.0.0.0", "10.255.255.255", "9.255.255.255", null, "11.0.0.0", null],
  ["100.64.0.0/10 (carrier-grade NAT)", "100.64.0.0", "100.127.255.255", "100.63.255.255", null, "100.128.0.0", null],
  ["127.0.0.0/8 (loopback)", "127.0.0.0", "127.255.255.255", "126.255.255.255", null, "128.0.0.0", null],
  ["169.254.0.0/16 (link-local / cloud metadata)", "169.254.0.0", "169.254.255.255", "169.253.255.255", null, "169.255.0.0", null],
  ["172.16.0.0/12 (private)", "172.16.0.0", "172.31.255.255", "172.15.255.255", null, "172.32.0.0", null],
  ["192.0.0.0/24 (IETF protocol assignments)", "192.0.0.0", "192.0.0.255", "191.255.255.255", null, "192.0.1.0", null],
  ["192.0.2.0/24 (documentation (TEST-NET-1))", "192.0.2.0", "192.0.2.255", "192.0.1.255", null, "192.0.3.0", null],
  ["192.88.99.0/24 (6to4 relay anycast (deprecated))", "192.88.99.0", "192.88.99.255", "192.88.98.255", null, "192.88.100.0", null],
  ["192.168.0.0/16 (private)", "192.168.0.0", "192.168.255.255", "192.167.255.255", null, "192.169.0.0", null],
  ["198.18.0.0/15 (benchmarking)", "198.18.0.0", "198.19.255.255", "198.17.255.255", null, "198.20.0.0", null],
  ["198.51.100.0/24 (documentation (TEST-NET-2))", "198.51.100.0", "198.51.100.255", "198.51.99.255", null, "198.51.101.0", null],
  ["203.0.113.0/24 (documentation (TEST-NET-3))", "203.0.113.0", "203.0.113.255", "203.0.112.255", null, "203.0.114.0", null],
  ["224.0.0.0/4 (multicast)", "224.0.0.0", "239.255.255.255", "223.255.255.255", null, "240.0.0.0", "240.0.0.0/4 (reserved / broadcast)"],
  ["240.0.0.0/4 (reserved / broadcast)", "240.0.0.0", "255.255.255.255", "239.255.255.255", "224.0.0.0/4 (multicast)", null, null],
  ["::/128 (unspecified)", "::", "::", null, null, "::1", "::1/128 (loopback)"],
  ["::1/128 (loopback)", "::1", "::1", "::", "::/128 (unspecified)", "::2", "::/96 (IPv4-compatible (deprecated))"],
  ["::/96 (IPv4-compatible (deprecated))", "::2", "::ffff:ffff", "::1", "::1/128 (loopback)", "::1:0:0", null],
  ["64:ff9b:1::/48 (local-use NAT64)", "64:ff9b:1::", "64:ff9b:1:ffff:ffff:ffff:ffff:ffff", "64:ff9b:0:ffff:ffff:ffff:ffff:ffff", null, "64:ff9b:2::", null],
  ["100::/64 (discard-only)", "100::", "100::ffff:ffff:ffff:ffff", "ff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", null, "100:0:0:1::", null],
  ["2001::/23 (IETF protocol assignments)", "2001::", `2001:1ff:ffff:${F6}`, `2000:ffff:ffff:${F6}`, null, "2001:200::", null],
  ["2001:db8::/32 (documentation)", "2001:db8::", `2001:db8:ffff:${F6}`, `2001:db7:ffff:${F6}`, null, "2001:db9::", null],
  ["fc00::/7 (unique local (private))", "fc00::", `fdff:ffff:ffff:${F6}`, `fbff:ffff:ffff:${F6}`, null, "fe00::", null],
  ["fe80::/10 (link-local)", "fe80::", `febf:ffff:ffff:${F6}`, `fe7f:ffff:ffff:${F6}`, null, "fec0::", "fec0::/10 (site-local (deprecated))"],
  ["fec0::/10 (site-local (deprecated))", "fec0::", `feff:ffff:ffff:${F6}`, `febf:ffff:ffff:${F6}`, "fe80::/10 (link-local)", "ff00::", "ff00::/8 (multicast)"],
  ["ff00::/8 (multicast)", "ff00::", `ffff:ffff:ffff:${F6}`, `feff:ffff:ffff:${F6}`, "fec0::/10 (site-local (deprecated))", null, null],
];

describe("blocked ranges, edge by edge", () => {
  it("the module loads (its range tables are valid literals)", async () => {
    const mod = await load();
    expect(typeof mod.checkResolvedAddress).toBe("function");
    expect(typeof mod.blockedRangeOf).toBe("function");
  });

  it.each(TABLE)("%s", async (range, first, last, below, belowRange, above, aboveRange) => {
    expect(await rangeOf(first)).toBe(range);
    expect(await rangeOf(last)).toBe(range);
    if (below !== null) expect(await rangeOf(below)).toBe(belowRange);
    if (above !== null) expect(await rangeOf(above)).toBe(aboveRange);
  });
});

describe("IPv4 carried in IPv6", () => {
  it.each([
    ["::ffff:10.1.2.3", "10.1.2.3 embedded in ::ffff:10.1.2.3: 10.0.0.0/8 (private)"],
    ["::ffff:169.254.169.254", "169.254.169.254 embedded in ::ffff:169.254.169.254: 169.254.0.0/16 (link-local / cloud metadata)"],
    ["64:ff9b::a00:1", "10.0.0.1 embedded in 64:ff9b::a00:1: 10.0.0.0/8 (private)"],
    ["64:ff9b::ffff:ffff", "255.255.255.255 embedded in 64:ff9b::ffff:ffff: 240.0.0.0/4 (reserved / broadcast)"],
    ["2002:a00:1::", "10.0.0.1 embedded in 2002:a00:1::: 10.0.0.0/8 (private)"],
    ["2002:7f00:1:ffff::1", "127.0.0.1 embedded in 2002:7f00:1:ffff::1: 127.0.0.0/8 (loopback)"],
    ["::ffff:192.0.2.1", "192.0.2.1 embedded in ::ffff:192.0.2.1: 192.0.2.0/24 (documentation (TEST-NET-1))"],
    ["64:ff9b::c612:1", "198.18.0.1 embedded in 64:ff9b::c612:1: 198.18.0.0/15 (benchmarking)"],
    ["2002:cb00:71ff::", "203.0.113.255 embedded in 2002:cb00:71ff::: 203.0.113.0/24 (documentation (TEST-NET-3))"],
    ["::ffff:192.88.99.0", "192.88.99.0 embedded in ::ffff:192.88.99.0: 192.88.99.0/24 (6to4 relay anycast (deprecated))"],
    ["64:ff9b::c000:ff", "192.0.0.255 embedded in 64:ff9b::c000:ff: 192.0.0.0/24 (IETF protocol assignments)"],
    ["2002:c633:6400::", "198.51.100.0 embedded in 2002:c633:6400::: 198.51.100.0/24 (documentation (TEST-NET-2))"],
  ])("%s: %s", async (addr, range) => {
    expect(await rangeOf(addr)).toBe(range);
  });

  it.each([
    // Public IPv4 inside each carrier form.
    "::ffff:8.8.8.8",
    "64:ff9b::808:808",
    "2002:808:808::",
    // One bit outside each carrier prefix: the IPv4 part is no longer read.
    "::fffe:a00:1",
    "::1:ffff:a00:1",
    "64:ff9b:0:0:0:1:a00:1",
    "64:ff9a::a00:1",
    "2003:a00:1::",
    "2001:200:a00:1::",
    // Public neighbours of the new IPv4 ranges, carried.
    "::ffff:192.0.1.255",
    "64:ff9b::c614:0",
    "2002:cb00:7200::",
  ])("%s is public", async (addr) => {
    expect(await rangeOf(addr)).toBeNull();
  });
});
