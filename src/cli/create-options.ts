// `sandbox create` options about its processes, its time and its place: --env-file,
// -w/--workdir, --ttl, --idle-stop and --host, and how `sandbox get` shows them.

import type { Command } from "commander";
import { IDLE_STOP_RANGE, TTL_RANGE, checkWorkdir, formatDuration } from "../lifecycle/process-input.js";
import { checkHostName } from "../lifecycle/placement.js";
import { secondsArg } from "./args.js";
import { mergeEnv } from "./env-file.js";
import { CliError, EXIT } from "./errors.js";
import { when } from "./format.js";
import type { SandboxView } from "../sdk/types.js";

export interface CreateTimeFlags {
  env: Record<string, string>;
  envFile: string[];
  workdir?: string;
  ttl?: number;
  idleStop?: number;
  host?: string;
}

const days = (s: number): string => `${s / 86_400} d`;

export function addCreateTimeFlags(cmd: Command): Command {
  return cmd
    .option("--env-file <file>", "read the workload's variables from a file: KEY=VALUE lines, # comments, KEY alone takes this shell's value (repeatable)", (v: string, prev: string[]) => [...prev, v], [] as string[])
    .option("-w, --workdir <dir>", "the workload's working directory, an absolute path; exec's default too (default /sandbox)")
    .option("--ttl <duration>", `stop each run this long after it starts, reason TtlExpired; the workspace is kept (e.g. 30m, 8h, 7d; up to ${days(TTL_RANGE.maxS)})`, secondsArg("--ttl", TTL_RANGE))
    .option("--idle-stop <duration>", `stop after no exec, connect or egress for this long, reason IdleTimeout (e.g. 30m, 2h; up to ${days(IDLE_STOP_RANGE.maxS)})`, secondsArg("--idle-stop", IDLE_STOP_RANGE))
    .option("--host <name>", "in a fleet (docs/fleet.md): run it on this host, one a gateway drives now (default: the host of the gateway asked)");
}

/** The workload's environment (files, then -e over them) and the create body's fields; usage errors first. */
export function createTimeBody(o: CreateTimeFlags): { env: Record<string, string>; fields: Record<string, unknown> } {
  const env = { ...mergeEnv(o.envFile, o.env) };
  const fields: Record<string, unknown> = {};
  if (o.workdir !== undefined) {
    const bad = checkWorkdir(o.workdir);
    if (bad) throw new CliError(`--workdir: ${bad}`, EXIT.usage);
    fields.workdir = o.workdir;
  }
  if (o.ttl !== undefined) fields.ttl = o.ttl;
  if (o.idleStop !== undefined) fields.idleStop = o.idleStop;
  if (o.host !== undefined) {
    const bad = checkHostName(o.host);
    if (bad) throw new CliError(`--host: ${bad}`, EXIT.usage);
    fields.host = o.host;
  }
  return { env, fields };
}

/** Rows of `sandbox get`: working directory, TTL and idle stop. */
export function expiryRows(s: SandboxView): [string, string][] {
  const e = s.expiry;
  const ttl = s.spec.ttlSeconds === undefined ? "-" : `${formatDuration(s.spec.ttlSeconds)} per run${e?.ttlDeadline ? `; this one stops at ${when(e.ttlDeadline)}` : ""}`;
  const sessions = e && e.openSessions > 0 ? `; ${e.openSessions} session${e.openSessions > 1 ? "s" : ""} open` : "";
  const idle = s.spec.idleStopSeconds === undefined ? "-" : `${formatDuration(s.spec.idleStopSeconds)}${e?.lastActivityAt ? `; last activity ${when(e.lastActivityAt)}` : ""}${sessions}`;
  return [
    ["workdir", s.spec.workdir ?? "/sandbox"],
    ["ttl", ttl],
    ["idle stop", idle],
  ];
}
