// The pure parts of `sandbox logs`: line times (canonical form, Docker's `since`,
// `--since` as a time or a duration), the resume cursor (no line twice, none lost,
// lines sharing a time included), the line bound (split at UTF-8 character
// boundaries, parts join back), Docker's log frames read whole from chunks cut
// anywhere, and the size and bound settings.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { FrameReader, LOG_FRAME_MAX, LogFrameError, encodeLogFrame, logLineOf } from "../../../src/driver/docker/log-frames.js";
import { CONTAINER_LOG_LIMITS, DEFAULT_CONTAINER_LOG, keptBytes, logConfig } from "../../../src/driver/docker/log-config.js";
import { supervisorConfig, workloadConfig } from "../../../src/driver/docker/objects.js";
import { parseByteSize } from "../../../src/util/byte-size.js";
import { ResumeFilter } from "../../../src/util/log-cursor.js";
import { splitLine } from "../../../src/util/log-line.js";
import { canonicalTime, dockerSince, parseSince } from "../../../src/util/log-time.js";
import { SettingError } from "../../../src/util/settings.js";

describe("line times", () => {
  it("canonical: UTC, nine fraction digits, so that text order is time order", () => {
    expect(canonicalTime("2026-12-03T13:16:36.1Z")).toBe("2026-12-03T13:16:36.100000000Z");
    expect(canonicalTime("2026-12-03T13:16:36.099Z")).toBe("2026-12-03T13:16:36.099000000Z");
    expect(canonicalTime("2026-12-03T13:16:36Z")).toBe("2026-12-03T13:16:36.000000000Z");
    expect(canonicalTime("2026-12-03T13:16:36.123456789Z")).toBe("2026-12-03T13:16:36.123456789Z");
    // Docker's trimmed form sorts wrong as text; the canonical one does not.
    expect("2026-12-03T13:16:36.1Z" > "2026-12-03T13:16:36.12Z").toBe(true);
    expect(canonicalTime("2026-12-03T13:16:36.1Z")! < canonicalTime("2026-12-03T13:16:36.12Z")!).toBe(true);
  });

  it("offsets move to UTC, across a day and a year", () => {
    expect(canonicalTime("2026-12-03T14:16:36.5+01:00")).toBe("2026-12-03T13:16:36.500000000Z");
    expect(canonicalTime("2026-12-31T23:30:00-01:00")).toBe("2027-01-01T00:30:00.000000000Z");
    expect(canonicalTime("2026-01-01t00:00:00.000000001z")).toBe("2026-01-01T00:00:00.000000001Z");
  });

  it("refuses what is not an RFC 3339 time", () => {
    for (const bad of ["", "yesterday", "2026-02-30T00:00:00Z", "2026-13-01T00:00:00Z", "2026-12-03T24:00:00Z", "2026-12-03T13:60:00Z", "2026-12-03T13:16:60Z", "2026-12-03 13:16:36Z", "2026-12-03T13:16:36", "2026-12-03T13:16:36.1234567890Z", "2026-12-03T13:16:36+25:00", "1700000000", "2026-12-03T13:16:36.Z"]) {
      expect(canonicalTime(bad), bad).toBeNull();
    }
  });

  it("Docker's since: seconds and nanoseconds, exactly (no float rounding)", () => {
    expect(dockerSince("2023-11-14T22:13:20.000000001Z")).toBe("1700000000.000000001");
    expect(dockerSince("1970-01-01T00:00:00.999999999Z")).toBe("0.999999999");
    expect(dockerSince("1969-12-31T23:59:59.000000000Z")).toBe("0.000000000");
  });

  it("--since: a time, or a duration back from now; anything else names both forms", () => {
    const now = new Date("2026-12-03T12:00:00.000Z");
    expect(parseSince("--since", "10m", now)).toBe("2026-12-03T11:50:00.000000000Z");
    expect(parseSince("--since", "2h", now)).toBe("2026-12-03T10:00:00.000000000Z");
    expect(parseSince("--since", "0", now)).toBe("2026-12-03T12:00:00.000000000Z");
    expect(parseSince("--since", "2026-12-01T10:00:00+02:00", now)).toBe("2026-12-01T08:00:00.000000000Z");
    for (const bad of ["-5m", "abc", "5 weeks", "1w", "2026-12-01", ""]) {
      expect(() => parseSince("--since", bad, now), bad).toThrow(new SettingError(`--since must be an RFC 3339 time (e.g. 2026-12-01T10:00:00Z) or a duration back from now (e.g. 90s, 10m, 2h, 7d); got ${JSON.stringify(bad)}`));
    }
  });
});

describe("the resume cursor", () => {
  const T = (n: number): string => `2026-12-03T13:16:${String(n).padStart(2, "0")}.000000000Z`;

  it("lines that share a time: after a break, exactly those not yet delivered", () => {
    const log = [T(1), T(2), T(2), T(2), T(3)];
    const f = new ResumeFilter();
    // First read delivers four lines, then breaks.
    expect(log.slice(0, 3).map((t) => f.accept(t))).toEqual([true, true, true]);
    expect(f.cursor).toEqual({ t: T(2), n: 2 });
    // Docker answers since=T(2) with every line at or after it.
    f.rewind();
    expect(log.slice(1).map((t) => f.accept(t))).toEqual([false, false, true, true]);
    expect(f.cursor).toEqual({ t: T(3), n: 1 });
  });

  it("a since of its own is inclusive; lines before it are dropped", () => {
    const f = new ResumeFilter({ t: T(2), n: 0 });
    expect(f.delivered).toBe(false);
    expect([T(1), T(2), T(2), T(3)].map((t) => f.accept(t))).toEqual([false, true, true, true]);
    expect(f.delivered).toBe(true);
  });

  it("identical lines at one time are counted, not merged", () => {
    const f = new ResumeFilter();
    expect([T(5), T(5)].map((t) => f.accept(t))).toEqual([true, true]);
    f.rewind();
    expect([T(5), T(5), T(5)].map((t) => f.accept(t))).toEqual([false, false, true]);
  });

  it("within one read a clock that steps back loses nothing; a replay drops what is before the cursor", () => {
    const f = new ResumeFilter();
    expect([T(5), T(3), T(6)].map((t) => f.accept(t))).toEqual([true, true, true]);
    expect(f.cursor).toEqual({ t: T(6), n: 1 });
    f.rewind();
    expect([T(5), T(6), T(7)].map((t) => f.accept(t))).toEqual([false, false, true]);
  });

  it("a clone counts on its own", () => {
    const f = new ResumeFilter();
    f.accept(T(1));
    const c = f.clone();
    c.accept(T(2));
    expect(f.cursor).toEqual({ t: T(1), n: 1 });
    expect(c.cursor).toEqual({ t: T(2), n: 1 });
  });

  it("property: a log read in pieces, each resumed from the cursor with since, is delivered exactly once, in order", () => {
    fc.assert(
      fc.property(
        // Non-decreasing times with many repeats, and the points where streams break.
        fc.array(fc.nat(4), { minLength: 0, maxLength: 60 }),
        fc.array(fc.nat(60), { maxLength: 8 }),
        (steps, breaks) => {
          let t = 0;
          const log = steps.map((s, i) => ({ t: T((t += s === 0 ? 0 : 1)), i }));
          const f = new ResumeFilter();
          const out: number[] = [];
          let pos = 0;
          for (const b of [...breaks.sort((a, c) => a - c), log.length]) {
            // A read starts at the first line at or after the cursor's time (Docker's since), and breaks after line b.
            const from = f.cursor === null ? 0 : log.findIndex((l) => l.t >= f.cursor!.t);
            f.rewind();
            const until = Math.max(pos, Math.min(b, log.length));
            for (const l of log.slice(from === -1 ? log.length : from, until)) if (f.accept(l.t)) out.push(l.i);
            pos = until;
          }
          expect(out).toEqual(log.map((l) => l.i));
        },
      ),
    );
  });
});

describe("the line bound", () => {
  it("a line within the bound is one part", () => {
    expect(splitLine("hello", 16)).toEqual(["hello"]);
    expect(splitLine("", 16)).toEqual([""]);
    expect(splitLine("x".repeat(16), 16)).toEqual(["x".repeat(16)]);
  });

  it("a longer one is cut into parts of at most the bound, never inside a character", () => {
    expect(splitLine("x".repeat(17), 16)).toEqual(["x".repeat(16), "x"]);
    // "é" is 2 bytes, "€" 3, "😀" 4 (two UTF-16 units).
    const parts = splitLine("aé€😀".repeat(4), 8);
    for (const p of parts) expect(Buffer.byteLength(p)).toBeLessThanOrEqual(8);
    expect(parts.join("")).toBe("aé€😀".repeat(4));
    expect(parts.every((p) => !/[\uD800-\uDBFF]$/.test(p))).toBe(true);
  });

  it("property: parts are within the bound and join back to the line", () => {
    fc.assert(
      fc.property(fc.string({ unit: "grapheme", maxLength: 200 }), fc.integer({ min: 4, max: 64 }), (s, max) => {
        const parts = splitLine(s, max);
        expect(parts.join("")).toBe(s);
        for (const p of parts) expect(Buffer.byteLength(p)).toBeLessThanOrEqual(max);
        if (parts.length > 1) for (const p of parts) expect(p.length).toBeGreaterThan(0);
      }),
    );
  });

  it("refuses a bound smaller than one character", () => {
    expect(() => splitLine("abc", 3)).toThrow(RangeError);
  });
});

describe("Docker's log frames", () => {
  const t1 = "2026-12-03T13:16:36.1Z";
  const frames = Buffer.concat([encodeLogFrame("out", t1, "hello\n"), encodeLogFrame("err", "2026-12-03T13:16:36.2Z", "oops\n"), encodeLogFrame("out", "2026-12-03T13:16:36.3Z", "no newline")]);
  const expected = [
    { t: "2026-12-03T13:16:36.100000000Z", s: "out", l: "hello" },
    { t: "2026-12-03T13:16:36.200000000Z", s: "err", l: "oops" },
    { t: "2026-12-03T13:16:36.300000000Z", s: "out", l: "no newline", p: true },
  ];

  it("whole frames from chunks cut at every byte", () => {
    for (let cut = 0; cut <= frames.length; cut++) {
      const r = new FrameReader();
      const got = [...r.push(frames.subarray(0, cut)), ...r.push(frames.subarray(cut))].map(logLineOf);
      expect(got, `cut at ${cut}`).toEqual(expected);
      expect(r.pending).toBe(0);
    }
    const r = new FrameReader();
    const one = [...frames].flatMap((b) => r.push(Buffer.from([b])));
    expect(one.map(logLineOf)).toEqual(expected);
  });

  it("a frame cut by a broken stream is held, not delivered", () => {
    const r = new FrameReader();
    expect(r.push(frames.subarray(0, 20))).toEqual([]);
    expect(r.pending).toBe(20);
  });

  it("the workload's text is text: a forged time, a JSON record, control bytes and invalid UTF-8 stay inside the line", () => {
    const hostile = `2099-01-01T00:00:00Z {"end":"forged"}\u001b[2J\r\u0000`;
    const line = logLineOf(new FrameReader().push(Buffer.concat([encodeLogFrame("out", t1, hostile + "\n")]))[0]!);
    expect(line).toEqual({ t: "2026-12-03T13:16:36.100000000Z", s: "out", l: hostile });
    const bad = Buffer.concat([Buffer.from([1, 0, 0, 0, 0, 0, 0, 27]), Buffer.from(`${t1} \xff\xfe\n`, "latin1")]);
    bad.writeUInt32BE(bad.length - 8, 4);
    expect(logLineOf(new FrameReader().push(bad)[0]!).l).toBe("\uFFFD\uFFFD");
    expect(logLineOf(new FrameReader().push(encodeLogFrame("out", t1, "\n"))[0]!)).toEqual({ t: "2026-12-03T13:16:36.100000000Z", s: "out", l: "" });
  });

  it("bytes that are not log frames are refused: unknown stream, oversized frame, no time", () => {
    expect(() => new FrameReader().push(Buffer.from([3, 0, 0, 0, 0, 0, 0, 1, 0x41]))).toThrow(LogFrameError);
    const big = Buffer.from([1, 0, 0, 0, 0, 0, 0, 0]);
    big.writeUInt32BE(LOG_FRAME_MAX + 1, 4);
    expect(() => new FrameReader().push(big)).toThrow(/over the bound/);
    const noTime = Buffer.concat([Buffer.from([1, 0, 0, 0, 0, 0, 0, 6]), Buffer.from("hello\n")]);
    expect(() => logLineOf(new FrameReader().push(noTime)[0]!)).toThrow(/without a time/);
  });
});

describe("the container log bound", () => {
  it("json-file, rotated at the size, so many files", () => {
    expect(logConfig(DEFAULT_CONTAINER_LOG)).toEqual({ Type: "json-file", Config: { "max-size": String(10 * 1024 * 1024), "max-file": "3" } });
    expect(keptBytes(DEFAULT_CONTAINER_LOG)).toBe(30 * 1024 * 1024);
  });

  it("is set on both containers of a sandbox, the default unless the gateway says otherwise", () => {
    const i = { gatewayId: "gw", sandboxId: "sbx_1", name: "n", generation: 1, nonce: "x" };
    const bound = { maxBytes: 1 << 20, files: 2 };
    const w = (log?: typeof bound) =>
      workloadConfig(i, { imageId: "sha256:x", command: undefined, env: {}, resources: { memoryMb: 64, cpus: 1, pids: 64 }, proxyUrl: "http://p:3128", defaultImage: true, resolvConf: "/r", uid: 2e9, workspace: null, ...(log ? { log } : {}) });
    expect(w().HostConfig!.LogConfig).toEqual(logConfig(DEFAULT_CONTAINER_LOG));
    expect(w(bound).HostConfig!.LogConfig).toEqual({ Type: "json-file", Config: { "max-size": "1048576", "max-file": "2" } });
    expect(supervisorConfig(i, "sha256:s", "/l", 2e9 + 1).HostConfig!.LogConfig).toEqual(logConfig(DEFAULT_CONTAINER_LOG));
    expect(supervisorConfig(i, "sha256:s", "/l", 2e9 + 1, undefined, bound).HostConfig!.LogConfig).toEqual(logConfig(bound));
  });

  it("sizes: binary units, inside the range, else one line naming the value", () => {
    const r = CONTAINER_LOG_LIMITS.maxBytes;
    expect([parseByteSize("s", "10M", r), parseByteSize("s", "512k", r), parseByteSize("s", "1GiB", r), parseByteSize("s", "65536", r), parseByteSize("s", "2mb", r)]).toEqual([10 << 20, 512 << 10, 1 << 30, 65536, 2 << 20]);
    for (const bad of ["10", "1.5M", "2G", "ten", "", "10T", "-1M", "1iB"]) {
      expect(() => parseByteSize("--container-log-size", bad, r), bad).toThrow(new SettingError(`--container-log-size must be a size from 64 KiB to 1 GiB (e.g. 512K, 10M, 1G); got ${JSON.stringify(bad)}`));
    }
  });
});
