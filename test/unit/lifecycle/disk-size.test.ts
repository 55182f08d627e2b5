// The workspace size parser: every accepted form, every refusal, the bounds and the
// one-line errors; and the formatter `sandbox get` prints with.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { DEFAULT_DISK_BYTES, DISK_BYTES_RANGE, checkDiskBytes, formatBytes, parseDiskSize } from "../../../src/lifecycle/disk-size.js";

const K = 1024;
const M = K * K;
const G = K * M;
const T = K * G;

describe("parseDiskSize", () => {
  it.each([
    ["64M", 64 * M],
    ["64m", 64 * M],
    ["64MB", 64 * M],
    ["64Mb", 64 * M],
    ["64MiB", 64 * M],
    ["64mib", 64 * M],
    ["16M", 16 * M],
    ["512M", 512 * M],
    ["10G", 10 * G],
    ["10g", 10 * G],
    ["1GiB", G],
    ["1GB", G],
    ["1.5G", 1.5 * G],
    ["0.5G", 512 * M],
    ["16T", 16 * T],
    ["16TiB", 16 * T],
    ["16384K", 16 * M],
    ["16384KiB", 16 * M],
    [String(16 * M), 16 * M],
    [`${16 * M}B`, 16 * M],
    [String(16 * T), 16 * T],
  ])("%s is %i bytes", (text, bytes) => {
    expect(parseDiskSize(text)).toEqual({ ok: true, bytes });
  });

  it.each([
    "",
    " ",
    "M",
    "G",
    "iB",
    "B",
    "64X",
    "64 M",
    " 64M",
    "64M ",
    "-64M",
    "+64M",
    "64iB",
    "64Mi",
    "64MiBB",
    "64MM",
    "1e9",
    "0x40M",
    "64,5M",
    "1.5",
    "1.M",
    ".5G",
    "1.2.3G",
    "64M\n",
    "１０G",
    "10P",
    "NaN",
    "Infinity",
    "1.0000001G",
  ])("%j is not a size", (text) => {
    const r = parseDiskSize(text);
    expect(r).toEqual({ ok: false, error: `invalid disk size ${JSON.stringify(text)}: expected a size such as 512M, 10G or 1GiB (binary units K, M, G, T), from 16 MiB to 16 TiB` });
  });

  it.each([
    ["0", "0"],
    ["1M", "1M"],
    ["15M", "15M"],
    ["16383K", "16383K"],
    [String(16 * M - 1), String(16 * M - 1)],
    ["17T", "17T"],
    ["16385G", "16385G"],
    ["999999999999999T", "999999999999999T"],
    [String(16 * T + 1), String(16 * T + 1)],
  ])("%s is out of range", (text) => {
    expect(parseDiskSize(text)).toEqual({ ok: false, error: `invalid disk size ${JSON.stringify(text)}: expected from 16 MiB to 16 TiB` });
  });

  it("accepts exactly the bounds, refuses one byte beyond them", () => {
    expect(parseDiskSize(String(DISK_BYTES_RANGE.min))).toEqual({ ok: true, bytes: DISK_BYTES_RANGE.min });
    expect(parseDiskSize(String(DISK_BYTES_RANGE.max))).toEqual({ ok: true, bytes: DISK_BYTES_RANGE.max });
    expect(parseDiskSize(String(DISK_BYTES_RANGE.min - 1)).ok).toBe(false);
    expect(parseDiskSize(String(DISK_BYTES_RANGE.max + 1)).ok).toBe(false);
  });

  it("the default is within range: 10 GiB", () => {
    expect(DEFAULT_DISK_BYTES).toBe(10 * G);
    expect(checkDiskBytes(DEFAULT_DISK_BYTES)).toBeNull();
  });

  it("every whole number of a unit in range parses to that many units, with any spelling of the unit", () => {
    const units = [
      ["K", K],
      ["M", M],
      ["G", G],
      ["T", T],
    ] as const;
    fc.assert(
      fc.property(fc.constantFrom(...units), fc.integer({ min: 1, max: 1 << 24 }), fc.constantFrom("", "B", "iB", "b", "ib"), fc.boolean(), ([u, size], n, suffix, lower) => {
        const text = `${n}${lower ? u.toLowerCase() : u}${suffix}`;
        const bytes = n * size;
        const r = parseDiskSize(text);
        if (bytes < DISK_BYTES_RANGE.min || bytes > DISK_BYTES_RANGE.max) expect(r.ok).toBe(false);
        else expect(r).toEqual({ ok: true, bytes });
      }),
      { seed: 11, numRuns: 2000 },
    );
  });

  it("never throws and every error is one line naming the input", () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 24 }), (text) => {
        const r = parseDiskSize(text);
        if (!r.ok) {
          expect(r.error.split("\n")).toHaveLength(1);
          expect(r.error).toContain(JSON.stringify(text));
        } else {
          expect(Number.isSafeInteger(r.bytes)).toBe(true);
          expect(checkDiskBytes(r.bytes)).toBeNull();
        }
      }),
      { seed: 12, numRuns: 3000 },
    );
  });
});

describe("checkDiskBytes", () => {
  it.each([16 * M, 10 * G, 16 * T])("%i is fine", (n) => expect(checkDiskBytes(n)).toBeNull());
  it.each([
    [0, "invalid disk size 0 bytes: expected from 16 MiB to 16 TiB"],
    [16 * M - 1, "invalid disk size 16777215 bytes: expected from 16 MiB to 16 TiB"],
    [17 * T, "invalid disk size 18691697672192 bytes: expected from 16 MiB to 16 TiB"],
    [-1, "invalid disk size -1 bytes: expected from 16 MiB to 16 TiB"],
    [1.5, "invalid disk size 1.5: expected a whole number of bytes from 16 MiB to 16 TiB"],
    [Number.NaN, "invalid disk size NaN: expected a whole number of bytes from 16 MiB to 16 TiB"],
    [Number.MAX_SAFE_INTEGER + 1, "invalid disk size 9007199254740992: expected a whole number of bytes from 16 MiB to 16 TiB"],
  ])("%d is refused", (n, error) => expect(checkDiskBytes(n)).toBe(error));
});

describe("formatBytes", () => {
  it.each([
    [0, "0 B"],
    [1023, "1023 B"],
    [K, "1 KiB"],
    [1536, "1.5 KiB"],
    [64 * M, "64 MiB"],
    [1.5 * G, "1.5 GiB"],
    [10 * G, "10 GiB"],
    [16 * T, "16 TiB"],
  ])("%i → %s", (n, s) => expect(formatBytes(n)).toBe(s));
});
