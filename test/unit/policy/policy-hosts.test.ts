import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { hostMatches, normalizeRequestHost, validateHostPattern } from "../../../src/policy/hosts.js";

describe("validateHostPattern accepts and normalises", () => {
  it.each([
    ["registry.npmjs.org", "registry.npmjs.org"],
    ["Registry.NPMJS.org", "registry.npmjs.org"],
    ["example.com.", "example.com"],
    ["origin", "origin"],
    ["my_container-1", "my_container-1"],
    ["*.example.com", "*.example.com"],
    ["*.Example.COM.", "*.example.com"],
    ["*.co.uk", "*.co.uk"],
    ["xn--bcher-kva.example", "xn--bcher-kva.example"],
    ["1.2.3.4", "1.2.3.4"],
    ["2001:DB8:0::1", "2001:db8::1"],
    ["::1", "::1"],
    ["::ffff:10.0.0.1", "10.0.0.1"],
    ["a".repeat(63) + ".test", "a".repeat(63) + ".test"],
    ["123.example.com", "123.example.com"],
  ])("%s -> %s", (input, normal) => {
    expect(validateHostPattern(input)).toEqual({ ok: true, value: normal });
  });
});

describe("validateHostPattern rejects", () => {
  it.each([
    ["*", '"*" alone would match every host'],
    ["*.com", "a wildcard needs at least two labels"],
    ["*.com.", "a wildcard needs at least two labels"],
    ["foo*.example.com", '"*" must be a whole label at the start'],
    ["*foo.example.com", '"*" must be a whole label at the start'],
    ["a.*.example.com", '"*" must be a whole label at the start'],
    ["*.*.example.com", '"*" must be a whole label at the start'],
    ["example.*", '"*" must be a whole label at the start'],
    ["**.example.com", '"*" must be a whole label at the start'],
    ["", "empty host name"],
    [".", "empty host name"],
    ["a..b", "empty label"],
    [".example.com", "empty label"],
    ["example.com..", "empty label"],
    ["*..example.com", "empty label"],
    ["exa mple.com", 'invalid character " "'],
    ["ex/ample.com", 'invalid character "/"'],
    ["exämple.com", 'invalid character "ä"'],
    ["example.com:443", "not a valid IPv6 address"],
    ["-a.example.com", 'starts or ends with "-"'],
    ["a-.example.com", 'starts or ends with "-"'],
    ["a".repeat(64) + ".test", "longer than 63 characters"],
    [Array.from({ length: 130 }, () => "ab").join("."), "longer than 253 characters"],
    ["[::1]", "without brackets"],
    ["fe80::1%eth0", "zone ids"],
    ["1::2::3", "not a valid IPv6 address"],
    ["127.1", "numeric IP address"],
    ["01.2.3.4", "numeric IP address"],
    ["256.1.1.1", "numeric IP address"],
    ["2130706433", "numeric IP address"],
    ["0x7f.0.0.1", "numeric IP address"],
    ["foo.0x7f", "numeric IP address"],
    ["*.0.0.1", "numeric IP address"],
  ])("%j (%s)", (input, message) => {
    const result = validateHostPattern(input);
    expect(result.ok).toBe(false);
    if (!result.ok) {
      expect(result.error).toContain(message);
      // Every error names the entry it is about.
      expect(result.error.startsWith(JSON.stringify(input))).toBe(true);
    }
  });
});

describe("validateHostPattern at the limits", () => {
  // 63 + 1 + 63 + 1 + 63 + 1 + 61 = 253 characters, the longest DNS name.
  const name253 = ["a".repeat(63), "b".repeat(63), "c".repeat(63), "d".repeat(61)].join(".");
  const name251 = name253.slice(2);
  const name252 = name253.slice(1);

  it("253 characters is a name, 254 is not, with or without a trailing dot", () => {
    expect(name253).toHaveLength(253);
    expect(validateHostPattern(name253)).toEqual({ ok: true, value: name253 });
    expect(validateHostPattern(`${name253}.`)).toEqual({ ok: true, value: name253 });
    expect(validateHostPattern(`e${name253}`)).toEqual({ ok: false, error: `"e${name253}": host name longer than 253 characters` });
    expect(normalizeRequestHost(name253)).toBe(name253);
    expect(normalizeRequestHost(`e${name253}`)).toBeNull();
  });

  it("a wildcard pattern counts its \"*.\" too", () => {
    expect(validateHostPattern(`*.${name251}`)).toEqual({ ok: true, value: `*.${name251}` });
    expect(validateHostPattern(`*.${name252}`)).toEqual({ ok: false, error: `"*.${name252}": host name longer than 253 characters` });
  });

  it("a long label is quoted by its first 20 characters", () => {
    const label = "abcdefghij".repeat(7);
    expect(validateHostPattern(`${label}.test`)).toEqual({ ok: false, error: `"${label}.test": label "abcdefghijabcdefghij..." is longer than 63 characters` });
  });

  it.each(["a.9z", "a.b0x1", "a.0xyz", "a.1-2", "9z", "0xg"])("%s: a last label that is not all digits or 0x-hex is a name", (name) => {
    expect(validateHostPattern(name)).toEqual({ ok: true, value: name });
  });

  it.each(["a.0x", "0x", "a.0xff", "a.00", "1.2.3"])("%s: a numeric last label is an IP spelling", (name) => {
    expect(validateHostPattern(name)).toEqual({ ok: false, error: `${JSON.stringify(name)}: looks like a numeric IP address but is not a dotted-quad IPv4 address` });
  });

  it("names the first invalid character", () => {
    expect(validateHostPattern("a.b$c%d")).toEqual({ ok: false, error: '"a.b$c%d": invalid character "$" (allowed: letters, digits, "-", "_")' });
  });
});

describe("normalizeRequestHost", () => {
  it.each([
    ["Example.COM", "example.com"],
    ["example.com.", "example.com"],
    ["[::1]", "::1"],
    ["[2001:DB8::0:1]", "2001:db8::1"],
    ["::ffff:127.0.0.1", "127.0.0.1"],
    ["10.0.0.1", "10.0.0.1"],
  ])("%s -> %s", (input, normal) => {
    expect(normalizeRequestHost(input)).toBe(normal);
  });

  it.each(["", "*.example.com", "*", "a..b", "exa mple.com", "127.1", "example.com:443", "[::1", "::1]", "abc]", "[abc", "fe80::1%eth0", "a".repeat(64)])("%j is not a host", (input) => {
    expect(normalizeRequestHost(input)).toBeNull();
  });
});

describe("hostMatches", () => {
  it.each([
    ["registry.npmjs.org", "registry.npmjs.org", true],
    ["registry.npmjs.org", "REGISTRY.npmjs.org.", true],
    ["registry.npmjs.org", "npmjs.org", false],
    ["registry.npmjs.org", "x.registry.npmjs.org", false],
    ["registry.npmjs.org", "registry.npmjs.org.evil.test", false],
    ["*.example.com", "a.example.com", true],
    ["*.example.com", "a.b.example.com", true],
    ["*.example.com", "A.Example.Com.", true],
    ["*.example.com", "example.com", false],
    ["*.example.com", "badexample.com", false],
    ["*.example.com", "example.com.evil.test", false],
    ["*.example.com", "a.example.co", false],
    ["1.2.3.4", "1.2.3.4", true],
    ["1.2.3.4", "::ffff:1.2.3.4", true],
    ["1.2.3.4", "1.2.3.5", false],
    ["2001:db8::1", "[2001:DB8:0:0::1]", true],
    ["::1", "127.0.0.1", false],
    // Invalid input on either side matches nothing.
    ["*", "example.com", false],
    ["*.com", "example.com", false],
    ["example.com", "exa mple.com", false],
  ])("%s vs %s -> %s", (pattern, host, want) => {
    expect(hostMatches(pattern, host)).toBe(want);
  });
});

const label = fc.stringMatching(/^[a-z0-9]([a-z0-9-]{0,10}[a-z0-9])?$/);
const tld = fc.stringMatching(/^[a-z]{2,6}$/);
const domain = fc.tuple(fc.array(label, { minLength: 1, maxLength: 3 }), tld).map(([ls, t]) => [...ls, t].join("."));
const randomCase = (s: string, flips: boolean[]) => s.replace(/./g, (c, i: number) => (flips[i % flips.length] ? c.toUpperCase() : c));

describe("host pattern properties", () => {
  it("a *. pattern never matches its own apex", () => {
    fc.assert(
      fc.property(domain, (apex) => {
        expect(hostMatches(`*.${apex}`, apex)).toBe(false);
        expect(hostMatches(`*.${apex}`, `${apex}.`)).toBe(false);
      }),
    );
  });

  it("a *. pattern matches one or more whole labels in front of the apex, in any case", () => {
    fc.assert(
      fc.property(domain, fc.array(label, { minLength: 1, maxLength: 3 }), fc.array(fc.boolean(), { minLength: 1 }), (apex, prefix, flips) => {
        const host = randomCase(`${prefix.join(".")}.${apex}`, flips);
        expect(hostMatches(`*.${apex}`, host)).toBe(true);
      }),
    );
  });

  it("a *. pattern never matches a host that only shares a partial label", () => {
    fc.assert(
      fc.property(domain, label, (apex, glued) => {
        expect(hostMatches(`*.${apex}`, `${glued}${apex}`)).toBe(false);
      }),
    );
  });

  it("an exact pattern matches exactly its own name, up to case and a trailing dot", () => {
    fc.assert(
      fc.property(domain, domain, fc.array(fc.boolean(), { minLength: 1 }), (a, b, flips) => {
        expect(hostMatches(a, randomCase(a, flips) + ".")).toBe(true);
        expect(hostMatches(a, b)).toBe(a === b);
      }),
    );
  });

  it("a wildcard never matches an IP literal", () => {
    fc.assert(
      fc.property(domain, fc.oneof(fc.ipV4(), fc.ipV6()), (apex, ip) => {
        expect(hostMatches(`*.${apex}`, ip)).toBe(false);
      }),
    );
  });

  it("validation is idempotent: the normal form validates to itself", () => {
    fc.assert(
      fc.property(fc.oneof(domain, domain.map((d) => `*.${d}`), fc.ipV4(), fc.ipV6()), fc.array(fc.boolean(), { minLength: 1 }), (p, flips) => {
        const first = validateHostPattern(randomCase(p, flips));
        expect(first.ok).toBe(true);
        if (first.ok) expect(validateHostPattern(first.value)).toEqual(first);
      }),
    );
  });

  it("never throws on arbitrary input", () => {
    fc.assert(
      fc.property(fc.string(), fc.string(), (p, h) => {
        validateHostPattern(p);
        normalizeRequestHost(h);
        expect(typeof hostMatches(p, h)).toBe("boolean");
      }),
      { numRuns: 2000 },
    );
  });
});
