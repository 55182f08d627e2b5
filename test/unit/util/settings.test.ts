// The one parser of numeric settings (src/util/settings.ts): ranges, units, and a
// message naming the setting, the value and what is allowed. Never NaN.
import { describe, expect, it } from "vitest";
import { SettingError, fromFlagOrEnv, parseChoice, parseDecimal, parseDuration, parseInteger } from "../../../src/util/settings.js";
import { buildProgram } from "../../../src/cli/program.js";
import { RECOVERY_DEADLINE_DEFAULT_S } from "../../../src/driver/contract.js";

describe("settings", () => {
  it("whole numbers: digits only, inside the range", () => {
    expect(parseInteger("--port", "7420", { min: 0, max: 65535 })).toBe(7420);
    expect(parseInteger("--port", " 0 ", { min: 0, max: 65535 })).toBe(0);
    for (const bad of ["abc", "", "1e3", "0x10", "7420.5", "65536", "-1", "Infinity", "NaN", "12345678901234567"]) {
      expect(() => parseInteger("--port", bad, { min: 0, max: 65535 }), bad).toThrow(new SettingError(`--port must be a whole number from 0 to 65535; got ${JSON.stringify(bad)}`));
    }
  });

  it("decimals: plain decimals inside the range", () => {
    expect(parseDecimal("--cpus", "0.5", { min: 0.01, max: 256 })).toBe(0.5);
    expect(parseDecimal("--cpus", ".25", { min: 0.01, max: 256 })).toBe(0.25);
    for (const bad of ["0.0001", "1e2", "257", "two", "NaN"]) expect(() => parseDecimal("--cpus", bad, { min: 0.01, max: 256 }), bad).toThrow(/^--cpus must be a number from 0.01 to 256; got /);
  });

  it("durations: seconds by default, ms/s/m/h/d units, inside the range", () => {
    const r = { minS: 1, maxS: 86_400 };
    expect([parseDuration("d", "60", r), parseDuration("d", "90s", r), parseDuration("d", "5m", r), parseDuration("d", "1h", r), parseDuration("d", "1500ms", r), parseDuration("d", "2.5", r), parseDuration("d", "1d", r)]).toEqual([60, 90, 300, 3600, 1.5, 2.5, 86_400]);
    for (const bad of ["abc", "0", "-5", "500ms", "25h", "2d", "1w", "NaN", "", "5 m"]) {
      expect(() => parseDuration("SANDGATE_RECOVERY_DEADLINE", bad, r), bad).toThrow(`SANDGATE_RECOVERY_DEADLINE must be a duration from 1 s to 1 d (e.g. 60, 90s, 5m, 2h, 7d); got ${JSON.stringify(bad)}`);
    }
  });

  it("choices, and flag over environment over default, each named as itself", () => {
    expect(parseChoice("--log-level", "warn", ["info", "warn"])).toBe("warn");
    expect(() => parseChoice("--log-level", "loud", ["info", "warn"])).toThrow('--log-level must be one of info, warn; got "loud"');
    const parse = (w: string, raw: string): number => parseInteger(w, raw, { min: 1, max: 9 });
    expect(fromFlagOrEnv({ name: "--n", value: "3" }, { name: "N", value: "abc" }, 5, parse)).toBe(3);
    expect(fromFlagOrEnv({ name: "--n", value: undefined }, { name: "N", value: "4" }, 5, parse)).toBe(4);
    expect(fromFlagOrEnv({ name: "--n", value: undefined }, { name: "N", value: "" }, 5, parse)).toBe(5);
    expect(() => fromFlagOrEnv({ name: "--n", value: undefined }, { name: "N", value: "abc" }, 5, parse)).toThrow(/^N must be/);
    expect(() => fromFlagOrEnv({ name: "--n", value: "0" }, { name: "N", value: "4" }, 5, parse)).toThrow(/^--n must be/);
  });

  it("the recovery deadline defaults to recovery rule 12's 5 minutes: a live-restore daemon with a few hundred sandboxes takes longer than a minute to answer", () => {
    expect(RECOVERY_DEADLINE_DEFAULT_S).toBe(300);
    const start = buildProgram().commands.find((c) => c.name() === "gateway")?.commands.find((c) => c.name() === "start");
    expect(start?.options.find((o) => o.long === "--recovery-deadline")?.description).toMatch(/default 5 m\)$/);
  });
});
