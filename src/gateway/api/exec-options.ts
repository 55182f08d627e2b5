// What an exec request may carry beyond its command, in the WebSocket's query
// (`env=K=V` repeated, `workdir`, `user`, `timeout`) and in the body of a detached
// exec (POST /v1/sandboxes/:name/execs), checked in one place into an ExecRequest.

import { EXEC_TIMEOUT_RANGE, checkExecEnv, checkWorkdir, parseEnvPair } from "../../lifecycle/process-input.js";
import { SettingError, parseDuration } from "../../util/settings.js";
import { ApiError } from "../errors.js";
import type { ExecRequest } from "../sandboxes/exec-service.js";
import { checkExecArgv } from "../../api/schemas.js";

/** The command's options, checked: a 400 naming the first problem. */
export function execOptions(o: { cmd: string[]; env?: Record<string, string> | string[]; workdir?: string; user?: string; timeout?: string | number }): Omit<ExecRequest, "tty" | "size"> {
  if (o.cmd.length === 0) throw new ApiError("invalid_request", "cmd: at least one argument is required");
  const over = checkExecArgv(o.cmd);
  if (over) throw new ApiError("invalid_request", over);
  const req: Omit<ExecRequest, "tty" | "size"> = { cmd: o.cmd };
  if (o.env !== undefined) {
    // No prototype: a variable named __proto__ is a variable like any other.
    let env = Object.create(null) as Record<string, string>;
    if (Array.isArray(o.env)) {
      for (const pair of o.env) {
        const p = parseEnvPair(pair);
        if (!p.ok) throw new ApiError("invalid_request", `env: ${p.error}`);
        env[p.name] = p.value;
      }
    } else env = o.env;
    const bad = checkExecEnv(env);
    if (bad) throw new ApiError("invalid_request", `env: ${bad}`);
    req.env = env;
  }
  if (o.workdir !== undefined) {
    const bad = checkWorkdir(o.workdir);
    if (bad) throw new ApiError("invalid_request", `workdir: ${bad}`);
    req.workdir = o.workdir;
  }
  if (o.user !== undefined) req.user = o.user;
  if (o.timeout !== undefined) {
    try {
      req.timeoutSeconds = parseDuration("timeout", o.timeout, EXEC_TIMEOUT_RANGE);
    } catch (err) {
      if (err instanceof SettingError) throw new ApiError("invalid_request", err.message);
      throw err;
    }
  }
  return req;
}
