import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { NO_HOST_ADDRESSES as NONE, checkResolvedAddress, hostAddressSet } from "../../../src/policy/address.js";

describe("checkResolvedAddress without allowPrivate", () => {
  it.each([
    // loopback
    "127.0.0.1", "127.255.255.254", "::1",
    // private
    "10.0.0.1", "10.255.255.255", "172.16.0.1", "172.31.255.255", "192.168.0.1", "192.168.255.255", "fc00::1", "fd12:3456::1",
    // link-local, including the cloud metadata service
    "169.254.0.1", "169.254.169.254", "fe80::1", "febf:ffff::1",
    // unspecified / this network
    "0.0.0.0", "0.1.2.3", "::",
    // carrier-grade NAT
    "100.64.0.1", "100.127.255.255",
    // multicast, reserved, broadcast
    "224.0.0.1", "239.255.255.250", "ff02::1", "240.0.0.1", "255.255.255.255",
    // IPv4 hidden in IPv6: mapped, NAT64, 6to4, IPv4-compatible
    "::ffff:127.0.0.1", "::ffff:10.1.2.3", "::ffff:169.254.169.254", "::ffff:7f00:1", "64:ff9b::a00:1", "64:ff9b::127.0.0.1", "2002:a00:1::1", "2002:c0a8:101::", "::10.0.0.1", "::8.8.8.8",
    // deprecated site-local, local-use NAT64
    "fec0::1", "64:ff9b:1::1",
    // IETF protocol assignments, documentation, 6to4 relay anycast, benchmarking
    "192.0.0.8", "192.0.0.170", "192.0.2.1", "198.51.100.7", "203.0.113.9", "192.88.99.1", "198.18.0.1", "198.19.255.255",
    "2001::1", "2001:1ff:ffff::1", "2001:db8::1", "2001:db8:ffff::1", "100::1", "100::ffff:ffff:ffff:ffff",
    // ... and the same IPv4 ranges carried in IPv6
    "::ffff:192.0.2.1", "64:ff9b::c000:201", "2002:c633:6407::", "::ffff:198.18.0.1",
  ])("refuses %s", (addr) => {
    const result = checkResolvedAddress(addr, [], NONE);
    expect(result.ok).toBe(false);
    if (!result.ok) expect(result.reason).toBe("private_address");
  });

  it.each([
    "8.8.8.8", "1.1.1.1", "9.255.255.255", "11.0.0.0", "100.63.255.255", "100.128.0.0", "172.15.255.255", "172.32.0.0", "169.253.255.255", "169.255.0.0",
    "192.167.255.255", "192.169.0.0", "223.255.255.255", "2001:4860:4860::8888", "2606:4700::1111", "::ffff:8.8.8.8", "64:ff9b::808:808", "2002:808:808::1", "fbff::1", "fe00::1",
  ])("allows public %s", (addr) => {
    expect(checkResolvedAddress(addr, [], NONE)).toEqual({ ok: true });
  });

  it.each(["", "localhost", "[::1]", "fe80::1%eth0", "127.1", "0x7f000001", "2130706433", "010.0.0.1", "1.2.3.4 "])(
    "refuses unparseable %j as invalid_address",
    (addr) => {
      expect(checkResolvedAddress(addr, [], NONE)).toEqual({ ok: false, reason: "invalid_address" });
    },
  );

  it("names the range it refused, for logs", () => {
    const result = checkResolvedAddress("169.254.169.254", [], NONE);
    expect(result).toEqual({ ok: false, reason: "private_address", range: "169.254.0.0/16 (link-local / cloud metadata)" });
  });
});

describe("checkResolvedAddress with allowPrivate", () => {
  it.each([
    ["10.213.4.5", ["10.213.0.0/16"], true],
    ["10.214.0.1", ["10.213.0.0/16"], false],
    ["::ffff:10.213.4.5", ["10.213.0.0/16"], true],
    ["127.0.0.1", ["10.213.0.0/16"], false],
    ["169.254.169.254", ["10.0.0.0/8", "169.254.169.254/32"], true],
    ["169.254.169.253", ["169.254.169.254/32"], false],
    ["fd00::5", ["fd00::/64"], true],
    ["fd00:0:0:1::5", ["fd00::/64"], false],
    ["fd00::5", ["10.0.0.0/8"], false],
    // Malformed ranges grant nothing; well-formed ones beside them still count.
    ["10.213.4.5", ["nonsense", "10.213.0.1/16"], false],
    ["10.213.4.5", ["nonsense", "10.213.0.0/16"], true],
  ])("%s with %j -> ok=%s", (addr, ranges, ok) => {
    expect(checkResolvedAddress(addr, ranges, NONE).ok).toBe(ok);
  });

  it("public addresses pass whatever allowPrivate says", () => {
    expect(checkResolvedAddress("8.8.8.8", ["10.0.0.0/8"], NONE)).toEqual({ ok: true });
  });
});

describe("checkResolvedAddress properties", () => {
  const octet = fc.integer({ min: 0, max: 255 });
  const range = (lo: number, hi = lo) => fc.integer({ min: lo, max: hi });
  const v4 = (a: fc.Arbitrary<number>, b: fc.Arbitrary<number> = octet) => fc.tuple(a, b, octet, octet).map((o) => o.join("."));
  const privateV4 = fc.oneof(
    v4(range(10)),
    v4(range(127)),
    v4(range(172), range(16, 31)),
    v4(range(192), range(168)),
    v4(range(169), range(254)),
    v4(range(100), range(64, 127)),
    v4(range(0)),
    v4(range(224, 255)),
    fc.tuple(octet).map(([d]) => `192.0.0.${d}`),
    fc.tuple(octet).map(([d]) => `192.0.2.${d}`),
    fc.tuple(octet).map(([d]) => `192.88.99.${d}`),
    v4(range(198), range(18, 19)),
    fc.tuple(octet).map(([d]) => `198.51.100.${d}`),
    fc.tuple(octet).map(([d]) => `203.0.113.${d}`),
  );

  it("every private IPv4 address is refused, bare and IPv4-mapped", () => {
    fc.assert(
      fc.property(privateV4, (addr) => {
        expect(checkResolvedAddress(addr, [], NONE).ok).toBe(false);
        expect(checkResolvedAddress(`::ffff:${addr}`, [], NONE).ok).toBe(false);
      }),
      { numRuns: 2000 },
    );
  });

  it("a private address is allowed exactly when its own /32 or /128 is listed", () => {
    fc.assert(
      fc.property(privateV4, privateV4, (addr, other) => {
        expect(checkResolvedAddress(addr, [`${addr}/32`], NONE).ok).toBe(true);
        expect(checkResolvedAddress(addr, [`${other}/32`], NONE).ok).toBe(addr === other);
      }),
      { numRuns: 1000 },
    );
  });

  it("never throws, and only ever answers ok or one of the two reasons", () => {
    fc.assert(
      fc.property(fc.oneof(fc.string(), fc.ipV4(), fc.ipV6()), fc.array(fc.oneof(fc.string(), fc.ipV4())), (addr, ranges) => {
        const result = checkResolvedAddress(addr, ranges, NONE);
        if (!result.ok) expect(["private_address", "invalid_address"]).toContain(result.reason);
        expect(checkResolvedAddress(addr, ranges, hostAddressSet([addr])).ok).toBe(false);
      }),
      { numRuns: 1000 },
    );
  });
});

describe("checkResolvedAddress with the host's addresses", () => {
  // A public address the host happens to have (any interface), an address of the egress
  // bridge, an IPv6 one: each is refused as host_address, never connected to.
  const host = hostAddressSet(["93.184.216.34", "10.213.0.1", "2606:4700:10::6816:1", "not an address", "::ffff:8.8.4.4"]);

  it.each([
    ["93.184.216.34", "93.184.216.34 (an address of the gateway's host)"],
    ["2606:4700:10::6816:1", "2606:4700:10::6816:1 (an address of the gateway's host)"],
    ["2606:4700:10:0::6816:0001", "2606:4700:10::6816:1 (an address of the gateway's host)"],
    ["::ffff:93.184.216.34", "93.184.216.34 (an address of the gateway's host)"],
    ["8.8.4.4", "8.8.4.4 (an address of the gateway's host)"],
    ["64:ff9b::5db8:d822", "93.184.216.34 embedded in 64:ff9b::5db8:d822: an address of the gateway's host"],
    ["2002:5db8:d822::1", "93.184.216.34 embedded in 2002:5db8:d822::1: an address of the gateway's host"],
    ["10.213.0.1", "10.213.0.1 (an address of the gateway's host)"],
  ])("refuses %s", (addr, range) => {
    expect(checkResolvedAddress(addr, [], host)).toEqual({ ok: false, reason: "host_address", range });
  });

  it.each(["93.184.216.35", "93.184.216.33", "2606:4700:10::6816:2", "8.8.8.8", "64:ff9b::5db8:d823"])("allows the public neighbour %s", (addr) => {
    expect(checkResolvedAddress(addr, [], host)).toEqual({ ok: true });
  });

  it("a special-purpose neighbour of a host address is still refused for its range", () => {
    expect(checkResolvedAddress("10.213.0.2", [], host)).toEqual({ ok: false, reason: "private_address", range: "10.0.0.0/8 (private)" });
  });

  it.each([
    ["93.184.216.34", ["93.184.216.34"], true],
    ["93.184.216.34", ["93.184.216.0/24"], true],
    ["93.184.216.34", ["93.184.216.35"], false],
    ["::ffff:93.184.216.34", ["93.184.216.34/32"], true],
    ["64:ff9b::5db8:d822", ["93.184.216.34"], true],
    ["10.213.0.1", ["10.0.0.0/8"], true],
    ["10.213.0.1", ["10.213.0.2"], false],
    ["2606:4700:10::6816:1", ["2606:4700:10::/48"], true],
    ["2606:4700:10::6816:1", ["93.184.216.34"], false],
  ])("%s with allowPrivate %j -> ok=%s (the endpoint names it)", (addr, ranges, ok) => {
    expect(checkResolvedAddress(addr, ranges, host).ok).toBe(ok);
  });

  it("an empty host set refuses nothing public; hostAddressSet keeps only addresses, canonically", () => {
    expect(checkResolvedAddress("93.184.216.34", [], NONE)).toEqual({ ok: true });
    expect([...hostAddressSet(["2001:DB8:0::1", "::ffff:1.2.3.4", "x", "", "010.0.0.1", "1.2.3.4"])]).toEqual(["2001:db8::1", "1.2.3.4"]);
  });

  it("every address in the host set is refused, bare and IPv4-mapped, and its neighbours are not (property)", () => {
    fc.assert(
      fc.property(fc.ipV4(), (addr) => {
        const set = hostAddressSet([addr]);
        expect(checkResolvedAddress(addr, [], set).ok).toBe(false);
        expect(checkResolvedAddress(`::ffff:${addr}`, [], set).ok).toBe(false);
        expect(checkResolvedAddress(addr, [`${addr}/32`], set).ok).toBe(true);
        const without = checkResolvedAddress(addr, [], NONE);
        const other = addr === "8.8.8.8" ? "8.8.4.4" : "8.8.8.8";
        expect(checkResolvedAddress(other, [], set)).toEqual({ ok: true });
        if (without.ok) expect(checkResolvedAddress(addr, [], set)).toMatchObject({ reason: "host_address" });
      }),
      { numRuns: 1000 },
    );
  });
});
