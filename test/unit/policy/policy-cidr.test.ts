import { BlockList, isIP } from "node:net";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { cidr, cidrContains, formatCidr, formatIp, isIPv4Mapped, parseCidr, parseIPv4, parseIPv6, parseIp, unmapIPv4, type IpAddress } from "../../../src/policy/cidr.js";

const hex = (b: Uint8Array | null) => (b === null ? null : Buffer.from(b).toString("hex"));

describe("parseIPv4", () => {
  it.each([
    ["0.0.0.0", "00000000"],
    ["127.0.0.1", "7f000001"],
    ["255.255.255.255", "ffffffff"],
    ["10.213.0.5", "0ad50005"],
  ])("accepts %s", (text, bytes) => {
    expect(hex(parseIPv4(text))).toBe(bytes);
  });

  it.each([
    "", "1.2.3", "1.2.3.4.5", "256.0.0.1", "01.2.3.4", "1.2.3.04", "0x7f.0.0.1", "127.1", "1.2.3.-4", "1.2.3.4 ", " 1.2.3.4", "1..3.4", "1.2.3.", "a.b.c.d", "2130706433", "1.2.3.1e1",
  ])("rejects %j", (text) => {
    expect(parseIPv4(text)).toBeNull();
  });
});

describe("parseIPv6", () => {
  it.each([
    ["::", "00000000000000000000000000000000"],
    ["::1", "00000000000000000000000000000001"],
    ["1::", "00010000000000000000000000000000"],
    ["fe80::1", "fe800000000000000000000000000001"],
    ["2001:DB8:0:0:0:0:0:1", "20010db8000000000000000000000001"],
    ["1:2:3:4:5:6:7:8", "00010002000300040005000600070008"],
    ["::ffff:169.254.169.254", "00000000000000000000ffffa9fea9fe"],
    ["64:ff9b::10.0.0.1", "0064ff9b00000000000000000a000001"],
    ["1:2:3:4:5:6:1.2.3.4", "00010002000300040005000601020304"],
    ["::1.2.3.4", "00000000000000000000000001020304"],
    // The longest IPv6 text there is: 45 characters.
    ["0000:0000:0000:0000:0000:0000:255.255.255.255", "000000000000000000000000ffffffff"],
  ])("accepts %s", (text, bytes) => {
    expect(hex(parseIPv6(text))).toBe(bytes);
  });

  it.each([
    "", ":", ":::", "1:::2", "1::2::3", "1:2:3:4:5:6:7", "1:2:3:4:5:6:7:8:9", "1:2:3:4:5:6:7::8", "::1:2:3:4:5:6:7:8",
    "12345::", "g::1", "fe80::1%eth0", "[::1]", "::ffff:1.2.3", "::ffff:01.2.3.4", "1.2.3.4::", "::1.2.3.4:5", ":1::", "1::2:", "1:2:3:4:5:6:7:1.2.3.4",
    // Two "::" even when the explicit groups add up to eight.
    "1:2:3:4::5:6:7:8::", "::1:2:3:4::5:6:7:8",
    "0000:0000:0000:0000:0000:0000:255.255.255.2555", "00000:0000:0000:0000:0000:0000:255.255.255.255",
  ])("rejects %j", (text) => {
    expect(parseIPv6(text)).toBeNull();
  });
});

describe("formatIp (RFC 5952)", () => {
  it.each([
    ["2001:0db8:0000:0000:0000:0000:0000:0001", "2001:db8::1"],
    ["2001:db8:0:1:1:1:1:1", "2001:db8:0:1:1:1:1:1"], // a single zero group is not compressed
    ["2001:0:0:1:0:0:0:1", "2001:0:0:1::1"], // the longest run wins
    ["2001:db8:0:0:1:0:0:1", "2001:db8::1:0:0:1"], // the first of equal runs wins
    ["0:0:0:0:0:0:0:0", "::"],
    ["0:0:0:0:0:0:0:1", "::1"],
    ["FE80::ABCD", "fe80::abcd"],
    ["::ffff:a9fe:a9fe", "::ffff:169.254.169.254"],
    ["1:0:0:0:0:0:0:0", "1::"],
  ])("%s -> %s", (text, canonical) => {
    const ip = parseIp(text);
    expect(ip).not.toBeNull();
    expect(formatIp(ip!)).toBe(canonical);
  });

  it("round-trips every address and produces text node:net accepts", () => {
    const addr = fc.oneof(
      fc.uint8Array({ minLength: 4, maxLength: 4 }).map((bytes): IpAddress => ({ family: 4, bytes })),
      fc.uint8Array({ minLength: 16, maxLength: 16 }).map((bytes): IpAddress => ({ family: 6, bytes })),
      // Sparse IPv6 addresses exercise the zero-run compression.
      fc.array(fc.constantFrom(0, 0, 0, 1, 0xffff), { minLength: 8, maxLength: 8 }).map((groups): IpAddress => {
        const bytes = new Uint8Array(16);
        groups.forEach((g, i) => { bytes[i * 2] = g >> 8; bytes[i * 2 + 1] = g & 0xff; });
        return { family: 6, bytes };
      }),
    );
    fc.assert(
      fc.property(addr, (ip) => {
        const text = formatIp(ip);
        expect(isIP(text)).toBe(ip.family);
        const back = parseIp(text);
        expect(back?.family).toBe(ip.family);
        expect(hex(back?.bytes ?? null)).toBe(hex(ip.bytes));
      }),
      { numRuns: 2000 },
    );
  });

  it("parses what fast-check generates as IPv4 and IPv6 text the same way node:net validates it", () => {
    fc.assert(
      fc.property(fc.oneof(fc.ipV4(), fc.ipV6()), (text) => {
        expect(parseIp(text)).not.toBeNull();
        expect(isIP(text)).not.toBe(0);
      }),
      { numRuns: 1000 },
    );
  });
});

describe("isIPv4Mapped", () => {
  it.each([
    ["::ffff:10.1.2.3", true],
    ["::ffff:0:0", true],
    ["::fffe:a01:203", false],
    ["::1:ffff:a01:203", false],
    ["1::ffff:a01:203", false],
    ["::10.1.2.3", false],
    ["0.0.0.0", false],
    ["10.1.2.3", false],
  ])("%s: %s", (text, mapped) => {
    expect(isIPv4Mapped(parseIp(text)!)).toBe(mapped);
  });
});

describe("unmapIPv4", () => {
  it("turns ::ffff:a.b.c.d into a.b.c.d and leaves others alone", () => {
    expect(formatIp(unmapIPv4(parseIp("::ffff:10.1.2.3")!))).toBe("10.1.2.3");
    expect(formatIp(unmapIPv4(parseIp("::10.1.2.3")!))).toBe("::a01:203");
    expect(formatIp(unmapIPv4(parseIp("10.1.2.3")!))).toBe("10.1.2.3");
  });
});

describe("parseCidr", () => {
  it.each([
    ["10.0.0.0/8", "10.0.0.0/8"],
    ["10.213.0.0/16", "10.213.0.0/16"],
    ["0.0.0.0/0", "0.0.0.0/0"],
    ["1.2.3.4", "1.2.3.4/32"],
    ["1.2.3.4/32", "1.2.3.4/32"],
    ["FD00::/8", "fd00::/8"],
    ["::1", "::1/128"],
    ["2001:db8::/32", "2001:db8::/32"],
  ])("accepts %s as %s", (text, canonical) => {
    const parsed = parseCidr(text);
    expect(parsed.ok).toBe(true);
    if (parsed.ok) expect(formatCidr(parsed.cidr)).toBe(canonical);
  });

  it.each([
    ["10.213.0.1/16", "host bits are set in \"10.213.0.1/16\"; did you mean 10.213.0.0/16?"],
    ["10.0.0.0/33", "prefix length must be 0-32"],
    ["::/129", "prefix length must be 0-128"],
    ["10.0.0.0/", "prefix length must be 0-32"],
    ["10.0.0.0/08", "prefix length must be 0-32"],
    ["10.0.0.0/-1", "prefix length must be 0-32"],
    ["10.0.0.0/8/8", "prefix length"],
    ["nope", "not an IPv4 or IPv6 address"],
    ["10.0.0/8", "not an IPv4 or IPv6 address"],
    ["fe80::1/10", "did you mean fe80::/10?"],
  ])("rejects %s", (text, message) => {
    const parsed = parseCidr(text);
    expect(parsed.ok).toBe(false);
    if (!parsed.ok) expect(parsed.error).toContain(message);
  });
});

describe("cidr (literals in code)", () => {
  it("parses a good literal", () => {
    expect(cidr("10.0.0.0/8")).toEqual({ family: 4, bytes: new Uint8Array([10, 0, 0, 0]), prefix: 8 });
  });

  it("throws on a malformed one, naming it and the problem", () => {
    expect(() => cidr("10.0.0.1/8")).toThrow(new Error('bad CIDR literal 10.0.0.1/8: host bits are set in "10.0.0.1/8"; did you mean 10.0.0.0/8?'));
    expect(() => cidr("")).toThrow(new Error('bad CIDR literal : not an IPv4 or IPv6 address: ""'));
  });
});

describe("cidrContains", () => {
  const contains = (range: string, addr: string) => {
    const parsed = parseCidr(range);
    if (!parsed.ok) throw new Error(parsed.error);
    const ip = parseIp(addr);
    if (ip === null) throw new Error(addr);
    return cidrContains(parsed.cidr, ip);
  };

  it.each([
    ["10.0.0.0/8", "10.255.255.255", true],
    ["10.0.0.0/8", "11.0.0.0", false],
    ["172.16.0.0/12", "172.31.255.255", true],
    ["172.16.0.0/12", "172.32.0.0", false],
    ["100.64.0.0/10", "100.127.0.1", true],
    ["100.64.0.0/10", "100.128.0.1", false],
    ["0.0.0.0/0", "8.8.8.8", true],
    ["1.2.3.4/32", "1.2.3.4", true],
    ["1.2.3.4/32", "1.2.3.5", false],
    ["fc00::/7", "fdff::1", true],
    ["fc00::/7", "fe00::1", false],
    ["fe80::/10", "febf::1", true],
    ["fe80::/10", "fec0::1", false],
    ["::/0", "2001:db8::1", true],
    // Families never cross, even for mapped addresses: callers unmap first.
    ["10.0.0.0/8", "::ffff:10.0.0.1", false],
    ["::/0", "10.0.0.1", false],
  ])("%s contains %s: %s", (range, addr, want) => {
    expect(contains(range, addr)).toBe(want);
  });

  it("agrees with node:net BlockList on random ranges and addresses", () => {
    const v4 = fc.tuple(fc.ipV4(), fc.integer({ min: 0, max: 32 }), fc.ipV4()).map(([base, prefix, addr]) => ({ family: 4 as const, base, prefix, addr }));
    const v6 = fc.tuple(fc.ipV6(), fc.integer({ min: 0, max: 128 }), fc.ipV6()).map(([base, prefix, addr]) => ({ family: 6 as const, base, prefix, addr }));
    // Half the time the address is the base itself with random low bits, so "inside" is common.
    fc.assert(
      fc.property(fc.oneof(v4, v6), fc.boolean(), ({ family, base, prefix, addr }, near) => {
        const baseIp = parseIp(base)!;
        // The strict parser refuses set host bits and names the network address instead.
        const direct = parseCidr(`${base}/${prefix}`);
        const networkText = direct.ok ? formatIp(direct.cidr) : /did you mean (.*)\/\d+\?/.exec(direct.error)?.[1];
        const range = parseCidr(`${networkText ?? "?"}/${prefix}`);
        expect(range.ok).toBe(true);
        if (!range.ok) return;
        const target = near ? baseIp : parseIp(addr)!;
        // The oracle gets the unmasked base, so it checks the masking as well as containment.
        const list = new BlockList();
        list.addSubnet(base, prefix, family === 4 ? "ipv4" : "ipv6");
        const targetText = formatIp(target);
        // BlockList treats IPv4-mapped IPv6 as IPv4; cidrContains deliberately does not.
        if (family === 6 && targetText.startsWith("::ffff:") && targetText.includes(".")) return;
        expect(cidrContains(range.cidr, target)).toBe(list.check(targetText, family === 4 ? "ipv4" : "ipv6"));
      }),
      { numRuns: 3000 },
    );
  });
});

describe("every prefix length, at its edges", () => {
  // Independent arithmetic: the address as one big integer, the range as [network, broadcast].
  const toBig = (ip: IpAddress) => ip.bytes.reduce((acc, b) => (acc << 8n) | BigInt(b), 0n);
  const fromBig = (family: 4 | 6, n: bigint): IpAddress => {
    const len = family === 4 ? 4 : 16;
    const bytes = new Uint8Array(len);
    for (let i = len - 1; i >= 0; i--) {
      bytes[i] = Number(n & 0xffn);
      n >>= 8n;
    }
    return { family, bytes };
  };

  it.each([
    [4, "203.0.113.77"],
    [4, "255.255.255.255"],
    [6, "2001:db8:85a3:8d3:1319:8a2e:370:7348"],
    [6, "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"],
  ] as const)("IPv%i, around %s", (family, text) => {
    const bits = family === 4 ? 32 : 128;
    const all = (1n << BigInt(bits)) - 1n;
    const addr = toBig(parseIp(text)!);
    for (let prefix = 0; prefix <= bits; prefix++) {
      const hostMask = (1n << BigInt(bits - prefix)) - 1n;
      const network = addr & (all ^ hostMask);
      const broadcast = network | hostMask;
      const networkText = formatIp(fromBig(family, network));
      // The strict parser names the network when host bits are set, and accepts the network itself.
      const withHost = parseCidr(`${text}/${String(prefix)}`);
      if (addr === network) expect(withHost.ok).toBe(true);
      else expect(withHost).toEqual({ ok: false, error: `host bits are set in "${text}/${String(prefix)}"; did you mean ${networkText}/${String(prefix)}?` });
      const range = cidr(`${networkText}/${String(prefix)}`);
      expect(formatCidr(range)).toBe(`${networkText}/${String(prefix)}`);
      expect(cidrContains(range, fromBig(family, network))).toBe(true);
      expect(cidrContains(range, fromBig(family, broadcast))).toBe(true);
      if (network > 0n) expect(cidrContains(range, fromBig(family, network - 1n))).toBe(false);
      if (broadcast < all) expect(cidrContains(range, fromBig(family, broadcast + 1n))).toBe(false);
    }
  });
});
