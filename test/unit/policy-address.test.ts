import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { checkResolvedAddress } from "../../src/policy/address.js";

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
  ])("refuses %s", (addr) => {
    const result = checkResolvedAddress(addr, []);
    expect(result.ok).toBe(false);
    if (!result.ok) expect(result.reason).toBe("private_address");
  });

  it.each([
    "8.8.8.8", "1.1.1.1", "9.255.255.255", "11.0.0.0", "100.63.255.255", "100.128.0.0", "172.15.255.255", "172.32.0.0", "169.253.255.255", "169.255.0.0",
    "192.167.255.255", "192.169.0.0", "223.255.255.255", "2001:4860:4860::8888", "2606:4700::1111", "::ffff:8.8.8.8", "64:ff9b::808:808", "2002:808:808::1", "fbff::1", "fe00::1",
  ])("allows public %s", (addr) => {
    expect(checkResolvedAddress(addr, [])).toEqual({ ok: true });
  });

  it.each(["", "localhost", "[::1]", "fe80::1%eth0", "127.1", "0x7f000001", "2130706433", "010.0.0.1", "1.2.3.4 "])(
    "refuses unparseable %j as invalid_address",
    (addr) => {
      expect(checkResolvedAddress(addr, [])).toEqual({ ok: false, reason: "invalid_address" });
    },
  );

  it("names the range it refused, for logs", () => {
    const result = checkResolvedAddress("169.254.169.254", []);
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
    expect(checkResolvedAddress(addr, ranges).ok).toBe(ok);
  });

  it("public addresses pass whatever allowPrivate says", () => {
    expect(checkResolvedAddress("8.8.8.8", ["10.0.0.0/8"])).toEqual({ ok: true });
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
  );

  it("every private IPv4 address is refused, bare and IPv4-mapped", () => {
    fc.assert(
      fc.property(privateV4, (addr) => {
        expect(checkResolvedAddress(addr, []).ok).toBe(false);
        expect(checkResolvedAddress(`::ffff:${addr}`, []).ok).toBe(false);
      }),
      { numRuns: 2000 },
    );
  });

  it("a private address is allowed exactly when its own /32 or /128 is listed", () => {
    fc.assert(
      fc.property(privateV4, privateV4, (addr, other) => {
        expect(checkResolvedAddress(addr, [`${addr}/32`]).ok).toBe(true);
        expect(checkResolvedAddress(addr, [`${other}/32`]).ok).toBe(addr === other);
      }),
      { numRuns: 1000 },
    );
  });

  it("never throws, and only ever answers ok or one of the two reasons", () => {
    fc.assert(
      fc.property(fc.oneof(fc.string(), fc.ipV4(), fc.ipV6()), fc.array(fc.oneof(fc.string(), fc.ipV4())), (addr, ranges) => {
        const result = checkResolvedAddress(addr, ranges);
        if (!result.ok) expect(["private_address", "invalid_address"]).toContain(result.reason);
      }),
      { numRuns: 1000 },
    );
  });
});
