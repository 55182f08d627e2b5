// Rules on what a user may give a sandbox's processes: environment variables, a
// working directory, a user to run as, and durations (--ttl, --idle-stop, exec
// --timeout). Shared by the CLI (a one-line usage error before anything is sent)
// and the gateway (the same check again). Pure.

/** A variable name as a shell and docker accept it. */
export const ENV_NAME_RE = /^[A-Za-z_][A-Za-z0-9_]*$/;
export const ENV_NAME_RULE = "letters, digits and '_', not starting with a digit";

/** An exec's environment at most (all KEY=VALUE pairs together, UTF-8): it travels in the exec URL. */
export const EXEC_ENV_MAX_VARS = 256;
export const EXEC_ENV_MAX_BYTES = 8192;

/** A working directory path at most (Linux PATH_MAX). */
export const WORKDIR_MAX_BYTES = 4096;

const shown = (s: string): string => (s.length > 80 ? `${JSON.stringify(s.slice(0, 60))}… (${s.length} characters)` : JSON.stringify(s));

/** Null when `name` is a valid variable name, else why not. */
export function checkEnvName(name: string): string | null {
  if (name === "") return "an empty variable name";
  return ENV_NAME_RE.test(name) ? null : `${shown(name)} is not a valid variable name (${ENV_NAME_RULE})`;
}

/** Null when a value can be put in a process's environment (no NUL byte), else why not. */
export function checkEnvValue(name: string, value: string): string | null {
  return value.includes("\0") ? `the value of ${name} contains a NUL byte` : null;
}

/** Every name and value checked, and an exec's bounds; null when all is well, else the first problem. */
export function checkExecEnv(env: Readonly<Record<string, string>>): string | null {
  let bytes = 0;
  const entries = Object.entries(env);
  for (const [k, v] of entries) {
    const bad = checkEnvName(k) ?? checkEnvValue(k, v);
    if (bad) return bad;
    bytes += Buffer.byteLength(k) + 1 + Buffer.byteLength(v);
  }
  if (entries.length > EXEC_ENV_MAX_VARS || bytes > EXEC_ENV_MAX_BYTES) {
    return `the exec environment is ${bytes} bytes in ${entries.length} variables; the limit is ${EXEC_ENV_MAX_BYTES} bytes and ${EXEC_ENV_MAX_VARS} variables`;
  }
  return null;
}

/** `KEY=VALUE` as given to -e: the pair, or why it is not one. */
export function parseEnvPair(text: string): { ok: true; name: string; value: string } | { ok: false; error: string } {
  const i = text.indexOf("=");
  if (i < 0) return { ok: false, error: `expected KEY=VALUE, got ${shown(text)}` };
  const name = text.slice(0, i);
  const value = text.slice(i + 1);
  const bad = checkEnvName(name) ?? checkEnvValue(name, value);
  return bad ? { ok: false, error: `${bad} in ${shown(text)}; expected KEY=VALUE` } : { ok: true, name, value };
}

/**
 * Null when `dir` is an absolute path a process can be started in, else why not. It is a
 * path inside the sandbox: whether it exists is the runtime's answer, at start.
 */
export function checkWorkdir(dir: string): string | null {
  if (!dir.startsWith("/")) return `working directory ${shown(dir)}: expected an absolute path (starting with "/")`;
  if (Buffer.byteLength(dir) > WORKDIR_MAX_BYTES) return `working directory ${shown(dir)}: longer than ${WORKDIR_MAX_BYTES} bytes`;
  if (/[\u0000-\u001f\u007f]/.test(dir)) return `working directory ${shown(dir)}: contains a control character`;
  return null;
}

/** How long a duration is, for people: 90 → "1m30s", 7200 → "2h", 0.5 → "500ms". */
export function formatDuration(seconds: number): string {
  if (seconds < 1) return `${Math.round(seconds * 1000)}ms`;
  let rest = Math.round(seconds);
  const parts: string[] = [];
  for (const [unit, size] of [
    ["d", 86_400],
    ["h", 3600],
    ["m", 60],
    ["s", 1],
  ] as const) {
    if (rest >= size) {
      parts.push(`${Math.floor(rest / size)}${unit}`);
      rest %= size;
    }
  }
  return parts.join("");
}

/** What --ttl and --idle-stop may be (seconds). */
export const TTL_RANGE = { minS: 1, maxS: 366 * 86_400 } as const;
export const IDLE_STOP_RANGE = { minS: 1, maxS: 366 * 86_400 } as const;
/** What exec --timeout may be (seconds). */
export const EXEC_TIMEOUT_RANGE = { minS: 1, maxS: 30 * 86_400 } as const;

/** The exit code of an exec its --timeout ended, as timeout(1) gives. */
export const EXEC_TIMEOUT_EXIT = 124;

/**
 * The user an exec runs as when -u asks for `requested`. Only the workload's own user
 * (`workloadUser`, "uid" or "uid:gid": the policy's process.user, else the gateway's
 * workload id) is allowed, by its full form or its uid alone: any other id would be
 * an identity of the host (containers share the host's uids), root included, which
 * the workload must never gain through an exec. Names are refused: they would be
 * looked up in the image's /etc/passwd, which the workload may control.
 */
export function resolveExecUser(requested: string, workloadUser: string): { ok: true; user: string } | { ok: false; error: string } {
  const allowed = `exec runs as the workload's user ${workloadUser} only`;
  if (!/^\d{1,10}(:\d{1,10})?$/.test(requested)) return { ok: false, error: `user ${shown(requested)}: expected a numeric uid or uid:gid; ${allowed}` };
  const uid = workloadUser.split(":")[0]!;
  const norm = requested.split(":").map((id) => String(Number(id))).join(":");
  if (norm === workloadUser || norm === uid) return { ok: true, user: workloadUser };
  const what = norm.split(":")[0] === "0" ? "root (uid 0) is never allowed" : "any other uid or gid would be an identity of the host";
  return { ok: false, error: `user ${shown(requested)}: ${what}; ${allowed}` };
}
