// The create options about a sandbox's processes and its time: working directory, --ttl
// and --idle-stop, checked into the spec. Invalid input is a 400 naming the field.

import { IDLE_STOP_RANGE, TTL_RANGE, checkWorkdir } from "../../lifecycle/process-input.js";
import type { SandboxSpec } from "../../lifecycle/spec.js";
import { SettingError, parseDuration, type DurationRange } from "../../util/settings.js";
import { ApiError } from "../errors.js";

export interface CreateTimeOptions {
  /** The workload's working directory (absolute). */
  workdir?: string;
  /** Seconds, or a duration such as "90s", "30m", "2h", "7d". */
  ttl?: string | number;
  idleStop?: string | number;
}

function seconds(field: string, raw: string | number, range: DurationRange): number {
  try {
    return parseDuration(field, raw, range);
  } catch (err) {
    if (err instanceof SettingError) throw new ApiError("invalid_request", err.message);
    throw err;
  }
}

export function timeSpec(o: CreateTimeOptions): Pick<SandboxSpec, "workdir" | "ttlSeconds" | "idleStopSeconds"> {
  const out: Pick<SandboxSpec, "workdir" | "ttlSeconds" | "idleStopSeconds"> = {};
  if (o.workdir !== undefined) {
    const bad = checkWorkdir(o.workdir);
    if (bad) throw new ApiError("invalid_request", `workdir: ${bad}`);
    out.workdir = o.workdir;
  }
  if (o.ttl !== undefined) out.ttlSeconds = seconds("ttl", o.ttl, TTL_RANGE);
  if (o.idleStop !== undefined) out.idleStopSeconds = seconds("idleStop", o.idleStop, IDLE_STOP_RANGE);
  return out;
}
