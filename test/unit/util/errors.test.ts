// One error family (src/util/errors.ts): every code has its exit code (and its HTTP
// status when the API answers it), every error class is a SandgateError whose code is in
// the list, and the gateway, the SDK, the CLI, the MCP server and the docs agree on it.
import { readFileSync, readdirSync, statSync } from "node:fs";
import { join, relative } from "node:path";
import { describe, expect, it } from "vitest";
import { API_ERRORS, CODE_OF_EXIT, ERRORS, EXIT, EXIT_INTERRUPTED, SandgateError, exitCodeOf, isApiErrorCode, type ErrorCode } from "../../../src/util/errors.js";
import { ApiErrorBody } from "../../../src/api/responses.js";
import { ApiError } from "../../../src/gateway/errors.js";
import { StartupError } from "../../../src/gateway/startup.js";
import { fromApiBody, SandgateError as SdkError, ERRORS as SDK_ERRORS } from "../../../src/sdk/errors.js";
import { CliError, cliErrorOf } from "../../../src/cli/errors.js";
import { failed } from "../../../src/mcp/results.js";
import { SettingError } from "../../../src/util/settings.js";
import { TimeoutError } from "../../../src/util/timeout.js";
import { ProvisionError } from "../../../src/driver/contract.js";
import { LogFrameError } from "../../../src/driver/docker/log-frames.js";
import { ProcessGone } from "../../../src/driver/docker/netns.js";
import { ExecError } from "../../../src/driver/docker/exec-session.js";
import { CopyRefused } from "../../../src/files/members.js";
import { TarFormatError } from "../../../src/files/tar-format.js";
import { DuplicateNameError, StaleRevisionError } from "../../../src/store/store.js";
import { PROJECT_ROOT } from "../../support/cli-build.js";

const CODES = Object.keys(ERRORS) as ErrorCode[];
const API_CODES = CODES.filter(isApiErrorCode);
const EXIT_CODES = [...Object.values(EXIT), EXIT_INTERRUPTED];
const read = (p: string): string => readFileSync(join(PROJECT_ROOT, p), "utf8");

function walk(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const p = join(dir, name);
    return statSync(p).isDirectory() ? walk(p) : p.endsWith(".ts") ? [p] : [];
  });
}

describe("the list of codes", () => {
  it("gives every code a documented exit code, and every API code (and only those) a 4xx/5xx status", () => {
    for (const code of CODES) {
      const e: { scope: string; status?: number; exit: number } = ERRORS[code];
      expect(code).toMatch(/^[a-z]+(?:_[a-z]+)*$/);
      expect(EXIT_CODES, code).toContain(e.exit);
      expect(e.exit, code).not.toBe(EXIT.ok);
      if (e.scope === "api") expect(e.status, code).toBeGreaterThanOrEqual(400);
      if (e.scope === "api") expect(e.status, code).toBeLessThan(600);
      else expect(e.status, code).toBeUndefined();
    }
    expect(Object.keys(API_ERRORS)).toEqual(API_CODES);
    for (const code of API_CODES) expect(API_ERRORS[code]).toBe(ERRORS[code].status);
    expect(exitCodeOf("from_a_newer_gateway")).toBe(EXIT.failed);
  });

  it("gives every exit code one code that carries it", () => {
    for (const exit of EXIT_CODES.filter((x) => x !== EXIT.ok)) {
      const code = CODE_OF_EXIT[exit];
      expect(code, `exit ${exit}`).toBeDefined();
      expect(ERRORS[code!].exit).toBe(exit);
    }
  });
});

describe("every error class", () => {
  it("extends SandgateError (nothing in src/ extends Error but the base)", () => {
    const plain = walk(join(PROJECT_ROOT, "src"))
      .filter((f) => /\bextends Error\b/.test(readFileSync(f, "utf8")))
      .map((f) => relative(PROJECT_ROOT, f));
    expect(plain).toEqual(["src/util/errors.ts"]);
  });

  it("carries a code from the list, its exit code, its name and its cause", () => {
    const cause = new Error("underneath");
    const errors: [SandgateError, string, ErrorCode][] = [
      [new SettingError("x", { cause }), "SettingError", "invalid_request"],
      [new TimeoutError("x", { cause }), "TimeoutError", "timeout"],
      [new StartupError("x", { cause }), "StartupError", "startup_failed"],
      [new ProvisionError("x", { cause }), "ProvisionError", "provision_failed"],
      [new LogFrameError("x", { cause }), "LogFrameError", "bad_log_frame"],
      [new ProcessGone("x", { cause }), "ProcessGone", "process_gone"],
      [new ExecError("x", { cause }), "ExecError", "exec_failed"],
      [new CopyRefused("too_large", "x", { cause }), "CopyRefused", "too_large"],
      [new TarFormatError("x", { cause }), "TarFormatError", "bad_tar"],
      [new DuplicateNameError("x", { cause }), "DuplicateNameError", "already_exists"],
      [new ApiError("not_allowed", "x", { cause }), "ApiError", "not_allowed"],
      [new SandgateError("x", "sandbox_failed", { cause }), "SandgateError", "sandbox_failed"],
      [new CliError("x", EXIT.notFound, { cause }), "CliError", "not_found"],
    ];
    for (const [err, name, code] of errors) {
      expect(err).toBeInstanceOf(SandgateError);
      expect(err.name).toBe(name);
      expect(err.code).toBe(code);
      expect(err.exitCode).toBe(ERRORS[code].exit);
      expect(err.cause).toBe(cause);
      expect(err.message).toBe("x");
    }
    const stale = new StaleRevisionError(3, 4);
    expect([stale.code, stale.exitCode, stale.expected, stale.active]).toEqual(["stale_revision", EXIT.conflict, 3, 4]);
    expect("cause" in new SandgateError("x", "internal")).toBe(false);
    expect(new SandgateError("x", "signal_failed", { exitCode: 128 + 15 }).exitCode).toBe(143);
  });

  it("CliError: the code of its exit code, or the code of the failure it wraps", () => {
    for (const exit of EXIT_CODES.filter((x) => x !== EXIT.ok)) expect(new CliError("x", exit).code).toBe(CODE_OF_EXIT[exit]);
    expect(new CliError("x").code).toBe("failed");
    expect(new CliError("x", 124).code).toBe("failed");
    const sdk = new SandgateError("SIGTERM was not delivered", "signal_failed", { exitCode: 143 });
    const cli = cliErrorOf(sdk) as CliError;
    expect(cli).toBeInstanceOf(CliError);
    expect([cli.message, cli.code, cli.exitCode, cli.cause]).toEqual([sdk.message, "signal_failed", 143, sdk]);
    const already = new CliError("x", EXIT.usage);
    expect(cliErrorOf(already)).toBe(already);
    const other = new Error("not ours");
    expect(cliErrorOf(other)).toBe(other);
  });
});

describe("the gateway, the SDK, the CLI and the MCP server agree", () => {
  it("the SDK's list is the list", () => {
    expect(SDK_ERRORS).toBe(ERRORS);
    expect(SdkError).toBe(SandgateError);
  });

  it("each API error the gateway answers is, in the SDK, the same code with the code's exit code; in the CLI that exit code", () => {
    for (const code of API_CODES) {
      const sent = new ApiError(code, `because ${code}`);
      expect(sent.status).toBe(ERRORS[code].status);
      const body = { error: { code: sent.code, message: sent.message } };
      expect(ApiErrorBody.safeParse(body).success, code).toBe(true);
      const got = fromApiBody(JSON.parse(JSON.stringify(body)), "fallback");
      expect(got).toBeInstanceOf(SandgateError);
      expect([got.code, got.message, got.exitCode]).toEqual([code, `because ${code}`, ERRORS[code].exit]);
      const cli = cliErrorOf(got) as CliError;
      expect([cli.code, cli.exitCode]).toEqual([code, ERRORS[code].exit]);
    }
  });

  it("a code the API does not answer with is not an API body; an unknown one is `internal` to the SDK", () => {
    for (const code of CODES.filter((c) => !isApiErrorCode(c))) expect(ApiErrorBody.safeParse({ error: { code, message: "x" } }).success, code).toBe(false);
    const got = fromApiBody({ error: { code: "timeout", message: "m" } }, "fallback");
    expect([got.code, got.message]).toEqual(["internal", "m"]);
    expect(fromApiBody("<html>", "the gateway answered 502").message).toBe("the gateway answered 502");
  });

  it("the MCP server's tool errors carry the family's code; anything else is `internal`", () => {
    const text = (err: unknown): string => (failed(err).content[0] as { text: string }).text;
    expect(text(new ApiError("not_found", "no such sandbox: nope"))).toBe("no such sandbox: nope (code: not_found)");
    expect(text(new SettingError("timeout must be a duration"))).toBe("timeout must be a duration (code: invalid_request)");
    expect(text(new TimeoutError("timed out after 5 ms"))).toBe("timed out after 5 ms (code: timeout)");
    expect(text(new Error("boom"))).toBe("internal error: boom (code: internal)");
  });
});

describe("the docs", () => {
  it("docs/commands.md's exit codes are the CLI's", () => {
    const doc = read("docs/commands.md");
    const start = doc.indexOf("Exit codes (");
    expect(start).toBeGreaterThan(-1);
    const table = doc.slice(start, doc.indexOf("`sandbox exec` exits with the command's own code", start));
    const documented = [...table.matchAll(/^\| `(\d+)` \|/gm)].map((m) => Number(m[1]));
    expect(documented.sort((a, b) => a - b)).toEqual([...EXIT_CODES].sort((a, b) => a - b));
  });

  it("docs/sdk.md lists every API and client code with its exit code", () => {
    const sdk = read("docs/sdk.md");
    const section = sdk.slice(sdk.indexOf("## Errors"), sdk.indexOf("## How the CLI uses it"));
    const listed = new Map<string, string>();
    for (const m of section.matchAll(/^\| (`[a-z_]+`(?:, `[a-z_]+`)*) \| ([^|]+) \|/gm)) {
      for (const c of m[1]!.matchAll(/`([a-z_]+)`/g)) listed.set(c[1]!, m[2]!.trim());
    }
    const sdkCodes = CODES.filter((c) => ERRORS[c].scope === "api" || ERRORS[c].scope === "client");
    expect([...listed.keys()].sort()).toEqual([...sdkCodes].sort());
    for (const [code, exit] of listed) expect(exit, code).toBe(code === "signal_failed" ? "128 + n" : String(ERRORS[code as ErrorCode].exit));
  });
});
