// What a user may give a sandbox's processes: variable names and values, an exec's
// environment bounds, working directories, durations shown, and the one user exec may
// run as (never root, never another host identity).
import { describe, expect, it } from "vitest";
import {
  EXEC_ENV_MAX_BYTES,
  EXEC_ENV_MAX_VARS,
  checkEnvName,
  checkExecEnv,
  checkWorkdir,
  formatDuration,
  parseEnvPair,
  resolveExecUser,
} from "../../../src/lifecycle/process-input.js";

describe("environment variables", () => {
  it.each(["A", "_", "a_b", "PATH", "X1", "__proto__"])("%s is a name", (n) => expect(checkEnvName(n)).toBeNull());
  it.each([
    ["", "an empty variable name"],
    ["1A", '"1A" is not a valid variable name (letters, digits and \'_\', not starting with a digit)'],
    ["A B", '"A B" is not a valid variable name (letters, digits and \'_\', not starting with a digit)'],
    ["A-B", '"A-B" is not a valid variable name (letters, digits and \'_\', not starting with a digit)'],
    ["É", '"É" is not a valid variable name (letters, digits and \'_\', not starting with a digit)'],
  ])("%j is refused: %s", (n, why) => expect(checkEnvName(n)).toBe(why));

  it("parses KEY=VALUE at the first '=', the value as written", () => {
    expect(parseEnvPair("A=1")).toEqual({ ok: true, name: "A", value: "1" });
    expect(parseEnvPair("A=")).toEqual({ ok: true, name: "A", value: "" });
    expect(parseEnvPair("A=b=c ' \" $HOME")).toEqual({ ok: true, name: "A", value: "b=c ' \" $HOME" });
  });

  it("refuses what is not KEY=VALUE, naming it", () => {
    expect(parseEnvPair("A")).toEqual({ ok: false, error: 'expected KEY=VALUE, got "A"' });
    expect(parseEnvPair("=1")).toEqual({ ok: false, error: 'an empty variable name in "=1"; expected KEY=VALUE' });
    expect(parseEnvPair("A B=1")).toMatchObject({ ok: false, error: expect.stringMatching(/^"A B" is not a valid variable name/) });
    expect(parseEnvPair("A=x\0y")).toEqual({ ok: false, error: 'the value of A contains a NUL byte in "A=x\\u0000y"; expected KEY=VALUE' });
  });

  it("bounds an exec's environment in variables and bytes, both edges", () => {
    const vars = (n: number): Record<string, string> => Object.fromEntries(Array.from({ length: n }, (_, i) => [`V${i}`, ""]));
    expect(checkExecEnv(vars(EXEC_ENV_MAX_VARS))).toBeNull();
    expect(checkExecEnv(vars(EXEC_ENV_MAX_VARS + 1))).toMatch(/in 257 variables; the limit is 8192 bytes and 256 variables$/);
    // "A=" + value: the pair's bytes count.
    expect(checkExecEnv({ A: "x".repeat(EXEC_ENV_MAX_BYTES - 2) })).toBeNull();
    expect(checkExecEnv({ A: "x".repeat(EXEC_ENV_MAX_BYTES - 1) })).toBe("the exec environment is 8193 bytes in 1 variables; the limit is 8192 bytes and 256 variables");
    expect(checkExecEnv({ "B C": "1" })).toMatch(/^"B C" is not a valid variable name/);
  });
});

describe("working directories", () => {
  it("takes absolute paths", () => {
    for (const d of ["/", "/sandbox", "/sandbox/my app", "/a/../b"]) expect(checkWorkdir(d)).toBeNull();
  });
  it("refuses relative paths, control characters and overlong paths, naming the value", () => {
    expect(checkWorkdir("sandbox")).toBe('working directory "sandbox": expected an absolute path (starting with "/")');
    expect(checkWorkdir("")).toBe('working directory "": expected an absolute path (starting with "/")');
    expect(checkWorkdir("/a\nb")).toBe('working directory "/a\\nb": contains a control character');
    expect(checkWorkdir("/" + "a".repeat(4095))).toBeNull();
    expect(checkWorkdir("/" + "a".repeat(4096))).toMatch(/: longer than 4096 bytes$/);
  });
});

describe("formatDuration", () => {
  it.each([
    [0.5, "500ms"],
    [1, "1s"],
    [90, "1m30s"],
    [3600, "1h"],
    [7200 + 60, "2h1m"],
    [86_400 * 7, "7d"],
  ])("%d s → %s", (s, text) => expect(formatDuration(s)).toBe(text));
});

describe("the user an exec may run as", () => {
  const W = "2000000000:2000000000";
  it("is the workload's own user, by its full form or its uid, with leading zeros as the same number", () => {
    expect(resolveExecUser(W, W)).toEqual({ ok: true, user: W });
    expect(resolveExecUser("2000000000", W)).toEqual({ ok: true, user: W });
    expect(resolveExecUser("01000:1000", "1000:1000")).toEqual({ ok: true, user: "1000:1000" });
    // A policy's user without a gid: that form, and nothing else.
    expect(resolveExecUser("1000", "1000")).toEqual({ ok: true, user: "1000" });
  });

  it("is never root", () => {
    for (const u of ["0", "0:0", "00", "0:2000000000"]) {
      expect(resolveExecUser(u, W)).toEqual({ ok: false, error: `user "${u}": root (uid 0) is never allowed; exec runs as the workload's user ${W} only` });
    }
  });

  it("is no other uid, and not the workload's uid with another gid", () => {
    for (const u of ["1000", "2000000001", "2000000000:0", "2000000000:1000", "1000:1000"]) {
      expect(resolveExecUser(u, W)).toEqual({ ok: false, error: `user "${u}": any other uid or gid would be an identity of the host; exec runs as the workload's user ${W} only` });
    }
    // A policy that fixes the user: -u cannot pick another, not even the gateway's default id.
    expect(resolveExecUser(W, "1000:1000")).toMatchObject({ ok: false });
    expect(resolveExecUser("1000:0", "1000")).toMatchObject({ ok: false });
  });

  it("refuses names: the image's /etc/passwd, which the workload may control, would decide", () => {
    for (const u of ["root", "nobody", "sandbox", "1000:root", "-1", "1e3", " 1000", ""]) {
      expect(resolveExecUser(u, W)).toMatchObject({ ok: false, error: expect.stringMatching(/expected a numeric uid or uid:gid; exec runs as the workload's user/) });
    }
  });
});
