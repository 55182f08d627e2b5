// --env-file FILE (exec and create) and -e KEY=VALUE. The file is docker's format: one
// KEY=VALUE per line, the value taken as written (no quotes removed, nothing expanded);
// blank lines and lines starting with `#` skipped; leading whitespace ignored; a KEY
// alone takes its value from this CLI's environment, and is left out when it is not
// set there (as docker does). Bounded: ENV_FILE_MAX_BYTES and ENV_FILE_MAX_VARS. A
// problem is one line naming the file and the line number.

import { readFileSync, statSync } from "node:fs";
import { InvalidArgumentError } from "commander";
import { checkEnvName, parseEnvPair } from "../lifecycle/process-input.js";
import { CliError, EXIT } from "./errors.js";

export const ENV_FILE_MAX_BYTES = 256 * 1024;
export const ENV_FILE_MAX_VARS = 1000;

export type EnvFileResult = { ok: true; env: Record<string, string> } | { ok: false; error: string };

/**
 * Parses an env file's bytes. `lookup` gives a KEY alone its value (this process's
 * environment in the CLI). Later lines win over earlier ones, as in docker.
 */
export function parseEnvFile(bytes: Uint8Array, file: string, lookup: (name: string) => string | undefined): EnvFileResult {
  const fail = (line: number | null, why: string): EnvFileResult => ({ ok: false, error: `--env-file ${file}${line === null ? "" : ` line ${line}`}: ${why}` });
  if (bytes.length > ENV_FILE_MAX_BYTES) return fail(null, `${bytes.length} bytes; the limit is ${ENV_FILE_MAX_BYTES / 1024} KiB`);
  const decoder = new TextDecoder("utf-8", { fatal: true });
  const env = Object.create(null) as Record<string, string>;
  let start = 0;
  let count = 0;
  for (let n = 1; start <= bytes.length; n++) {
    let end = bytes.indexOf(0x0a, start);
    if (end < 0) end = bytes.length;
    let text: string;
    try {
      text = decoder.decode(bytes.subarray(start, end));
    } catch {
      return fail(n, "not valid UTF-8");
    }
    start = end + 1;
    if (n === 1) text = text.replace(/^\uFEFF/, "");
    const line = text.replace(/\r$/, "").replace(/^\s+/, "");
    if (line === "" || line.startsWith("#")) continue;
    const eq = line.indexOf("=");
    if (eq === 0) return fail(n, `no variable name before "="`);
    if (eq < 0) {
      const bad = checkEnvName(line.trimEnd());
      if (bad) return fail(n, `${bad}; expected KEY=VALUE or KEY`);
      const name = line.trimEnd();
      const value = lookup(name);
      if (value === undefined) continue;
      env[name] = value;
    } else {
      const p = parseEnvPair(line);
      if (!p.ok) return fail(n, p.error);
      env[p.name] = p.value;
    }
    if (++count > ENV_FILE_MAX_VARS) return fail(n, `more than ${ENV_FILE_MAX_VARS} variables`);
  }
  return { ok: true, env };
}

/** Reads and parses the files in order (later files win); a problem is a usage error (exit 2). */
export function readEnvFiles(files: readonly string[], lookup: (name: string) => string | undefined = (k) => process.env[k]): Record<string, string> {
  const env = Object.create(null) as Record<string, string>;
  for (const file of files) {
    let bytes: Buffer;
    try {
      // Size first: a huge file (or a device) is never read whole.
      const st = statSync(file);
      if (!st.isFile()) throw new CliError(`--env-file ${file}: not a regular file`, EXIT.usage);
      if (st.size > ENV_FILE_MAX_BYTES) throw new CliError(`--env-file ${file}: ${st.size} bytes; the limit is ${ENV_FILE_MAX_BYTES / 1024} KiB`, EXIT.usage);
      bytes = readFileSync(file);
    } catch (err) {
      if (err instanceof CliError) throw err;
      throw new CliError(`--env-file ${file}: cannot read it: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`, EXIT.usage);
    }
    const r = parseEnvFile(bytes, file, lookup);
    if (!r.ok) throw new CliError(r.error, EXIT.usage);
    Object.assign(env, r.env);
  }
  return env;
}

/** Commander's parser for a repeatable -e KEY=VALUE (a usage error naming the problem). */
export function envPairArg(v: string, acc: Record<string, string> | undefined): Record<string, string> {
  const p = parseEnvPair(v);
  if (!p.ok) throw new InvalidArgumentError(p.error);
  const out = Object.assign(Object.create(null) as Record<string, string>, acc ?? {});
  out[p.name] = p.value;
  return out;
}

/** --env-file files first, then -e pairs over them (docker's order). */
export function mergeEnv(files: readonly string[], pairs: Readonly<Record<string, string>> | undefined): Record<string, string> {
  return Object.assign(readEnvFiles(files), pairs ?? {});
}
