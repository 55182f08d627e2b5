// The bounds of `sandbox cp` from the environment (through the settings table): defaults,
// every variable, and a one-line error naming the variable, the value and the range.
import { describe, expect, it } from "vitest";
import { DEFAULT_FILES_LIMITS, filesLimitsOf } from "../../../src/gateway/files/limits.js";
import { resolveSettings } from "../../../src/gateway/settings.js";
import { parseTransferSize as parseByteSize } from "../../../src/util/byte-size.js";
import { SettingError } from "../../../src/util/settings.js";

const filesLimitsFromEnv = (env: NodeJS.ProcessEnv) => filesLimitsOf(resolveSettings({}, env));

describe("filesLimitsFromEnv", () => {
  it("unset or empty: the defaults", () => {
    expect(filesLimitsFromEnv({})).toEqual(DEFAULT_FILES_LIMITS);
    expect(filesLimitsFromEnv({ SANDGATE_CP_MAX_BYTES: "" })).toEqual(DEFAULT_FILES_LIMITS);
    expect(DEFAULT_FILES_LIMITS).toEqual({ maxBytes: 16 * 1024 ** 3, maxEntries: 1_000_000, symlinkMemoryBytes: 16 * 1024 ** 2, concurrent: 8, perSandbox: 2, idleTimeoutMs: 60_000 });
  });

  it("reads every variable", () => {
    expect(
      filesLimitsFromEnv({
        SANDGATE_CP_MAX_BYTES: "2G",
        SANDGATE_CP_MAX_ENTRIES: "5000",
        SANDGATE_CP_SYMLINK_MEMORY: "1MiB",
        SANDGATE_CP_CONCURRENCY: "3",
        SANDGATE_CP_PER_SANDBOX: "1",
        SANDGATE_CP_IDLE_TIMEOUT: "90s",
      }),
    ).toEqual({ maxBytes: 2 * 1024 ** 3, maxEntries: 5000, symlinkMemoryBytes: 1024 ** 2, concurrent: 3, perSandbox: 1, idleTimeoutMs: 90_000 });
  });

  it.each([
    [{ SANDGATE_CP_MAX_BYTES: "lots" }, 'SANDGATE_CP_MAX_BYTES must be a size such as 512M or 16G (binary units K, M, G, T) from 1048576 to 17592186044416 bytes; got "lots"'],
    [{ SANDGATE_CP_MAX_BYTES: "1K" }, 'SANDGATE_CP_MAX_BYTES must be a size such as 512M or 16G (binary units K, M, G, T) from 1048576 to 17592186044416 bytes; got "1K"'],
    [{ SANDGATE_CP_MAX_ENTRIES: "0" }, 'SANDGATE_CP_MAX_ENTRIES must be a whole number from 1 to 100000000; got "0"'],
    [{ SANDGATE_CP_CONCURRENCY: "1.5" }, 'SANDGATE_CP_CONCURRENCY must be a whole number from 1 to 1024; got "1.5"'],
    [{ SANDGATE_CP_PER_SANDBOX: "-1" }, 'SANDGATE_CP_PER_SANDBOX must be a whole number from 1 to 1024; got "-1"'],
    [{ SANDGATE_CP_IDLE_TIMEOUT: "never" }, 'SANDGATE_CP_IDLE_TIMEOUT must be a duration from 1 s to 1 d (e.g. 60, 90s, 5m, 2h, 7d); got "never"'],
  ])("%j is refused in one line", (env, message) => {
    expect(() => filesLimitsFromEnv(env)).toThrow(SettingError);
    expect(() => filesLimitsFromEnv(env)).toThrow(message);
  });

  it("parseByteSize takes binary units with an optional B or iB", () => {
    const r = { min: 1, max: 2 ** 50 };
    expect(["1", "1K", "1k", "1KB", "1KiB", "3M", "2G", "1T"].map((s) => parseByteSize("x", s, r))).toEqual([1, 1024, 1024, 1024, 1024, 3 * 1024 ** 2, 2 * 1024 ** 3, 1024 ** 4]);
    expect(() => parseByteSize("x", "1iB", r)).toThrow(SettingError);
    expect(() => parseByteSize("x", "1.5G", r)).toThrow(SettingError);
  });
});
