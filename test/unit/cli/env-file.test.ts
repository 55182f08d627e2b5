// --env-file: docker's format, its bounds, and one-line errors naming the file and line.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { ENV_FILE_MAX_BYTES, ENV_FILE_MAX_VARS, mergeEnv, parseEnvFile, readEnvFiles } from "../../../src/cli/env-file.js";
import { CliError } from "../../../src/cli/errors.js";

const enc = (s: string): Uint8Array => new TextEncoder().encode(s);
const parse = (text: string | Uint8Array, lookup: Record<string, string> = {}) => parseEnvFile(typeof text === "string" ? enc(text) : text, "vars.env", (k) => lookup[k]);

describe("parseEnvFile", () => {
  it("reads KEY=VALUE lines, values as written, skipping blanks and comments", () => {
    const r = parse("# a comment\n\nA=1\n  B=two words \nC='quoted'\nD=\"dq\"\nE=a=b\nF=\n   # indented comment\nG=$HOME\n");
    expect(r).toEqual({ ok: true, env: { A: "1", B: "two words ", C: "'quoted'", D: '"dq"', E: "a=b", F: "", G: "$HOME" } });
  });

  it("takes a KEY alone from the CLI's environment, and leaves it out when unset (as docker)", () => {
    expect(parse("TOKEN\nMISSING\nX=1\n", { TOKEN: "t0k" })).toEqual({ ok: true, env: { TOKEN: "t0k", X: "1" } });
  });

  it("handles CRLF, a BOM, no final newline, and later lines winning", () => {
    expect(parse("\uFEFFA=1\r\nB=2\r\nA=3")).toEqual({ ok: true, env: { A: "3", B: "2" } });
  });

  it("a variable named __proto__ is a variable", () => {
    const r = parse("__proto__=x\n");
    expect(r.ok && Object.entries(r.env)).toEqual([["__proto__", "x"]]);
  });

  it.each([
    ["A=1\n=2\n", "--env-file vars.env line 2: no variable name before \"=\""],
    ["A=1\nB C=2\n", "--env-file vars.env line 2: \"B C\" is not a valid variable name (letters, digits and '_', not starting with a digit) in \"B C=2\"; expected KEY=VALUE"],
    ["\n\n1X=2\n", "--env-file vars.env line 3: \"1X\" is not a valid variable name (letters, digits and '_', not starting with a digit) in \"1X=2\"; expected KEY=VALUE"],
    ["OK\nexport A=1\n", "--env-file vars.env line 2: \"export A\" is not a valid variable name (letters, digits and '_', not starting with a digit) in \"export A=1\"; expected KEY=VALUE"],
    ["A B\n", "--env-file vars.env line 1: \"A B\" is not a valid variable name (letters, digits and '_', not starting with a digit); expected KEY=VALUE or KEY"],
    ["A=x\0y\n", "--env-file vars.env line 1: the value of A contains a NUL byte in \"A=x\\u0000y\"; expected KEY=VALUE"],
  ])("%j → one line naming the line", (text, error) => {
    expect(parse(text)).toEqual({ ok: false, error });
  });

  it("refuses bytes that are not UTF-8, naming the line", () => {
    const bytes = new Uint8Array([...enc("A=1\nB="), 0xff, 0xfe, ...enc("\n")]);
    expect(parse(bytes)).toEqual({ ok: false, error: "--env-file vars.env line 2: not valid UTF-8" });
  });

  it("is bounded in variables and bytes, both edges", () => {
    const lines = (n: number): string => Array.from({ length: n }, (_, i) => `V${i}=1`).join("\n");
    expect(parse(lines(ENV_FILE_MAX_VARS)).ok).toBe(true);
    expect(parse(lines(ENV_FILE_MAX_VARS + 1))).toEqual({ ok: false, error: `--env-file vars.env line ${ENV_FILE_MAX_VARS + 1}: more than ${ENV_FILE_MAX_VARS} variables` });
    expect(parse("# " + "x".repeat(ENV_FILE_MAX_BYTES - 2)).ok).toBe(true);
    expect(parse("# " + "x".repeat(ENV_FILE_MAX_BYTES - 1))).toEqual({ ok: false, error: `--env-file vars.env: ${ENV_FILE_MAX_BYTES + 1} bytes; the limit is 256 KiB` });
  });
});

describe("readEnvFiles", () => {
  const dir = mkdtempSync(join(tmpdir(), "sg-envfile-"));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const file = (name: string, text: string): string => {
    const p = join(dir, name);
    writeFileSync(p, text);
    return p;
  };
  const usage = (fn: () => unknown): string => {
    try {
      fn();
    } catch (err) {
      expect(err).toBeInstanceOf(CliError);
      expect((err as CliError).exitCode).toBe(2);
      return (err as CliError).message;
    }
    throw new Error("no error");
  };

  it("reads files in order, later ones winning, and -e pairs over them", () => {
    const a = file("a.env", "A=1\nB=1\n");
    const b = file("b.env", "B=2\nC=2\n");
    expect(readEnvFiles([a, b])).toEqual({ A: "1", B: "2", C: "2" });
    expect(mergeEnv([a, b], { C: "3" })).toEqual({ A: "1", B: "2", C: "3" });
  });

  it("names a missing file, a directory and a file over the limit (without reading it) in one line, exit 2", () => {
    expect(usage(() => readEnvFiles([join(dir, "nope.env")]))).toBe(`--env-file ${join(dir, "nope.env")}: cannot read it: ENOENT`);
    expect(usage(() => readEnvFiles([dir]))).toBe(`--env-file ${dir}: not a regular file`);
    const big = file("big.env", "x".repeat(ENV_FILE_MAX_BYTES + 1));
    expect(usage(() => readEnvFiles([big]))).toBe(`--env-file ${big}: ${ENV_FILE_MAX_BYTES + 1} bytes; the limit is 256 KiB`);
    const bad = file("bad.env", "A=1\nnot valid\n");
    expect(usage(() => readEnvFiles([bad]))).toMatch(new RegExp(`^--env-file ${bad} line 2: "not valid" is not a valid variable name`));
  });
});
