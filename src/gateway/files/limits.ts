// The bounds of file transfers (`sandbox cp`, the files API), their defaults and
// the environment variables that set them. Each is checked at gateway start with a
// one-line error naming the variable, the value and what is allowed.

import { SettingError, parseDuration, parseInteger } from "../../util/settings.js";

export interface FilesLimits {
  /** Bytes one transfer may move (the tar stream, or one file). */
  maxBytes: number;
  /** Members one transfer may hold. */
  maxEntries: number;
  /** Bytes of symlink names one upload may make the gateway remember (see src/files/members.ts). */
  symlinkMemoryBytes: number;
  /** Transfers at once, over all sandboxes. */
  concurrent: number;
  /** Transfers at once, per sandbox. */
  perSandbox: number;
  /** A transfer with no bytes moving in either direction for this long is ended. */
  idleTimeoutMs: number;
}

const KIB = 1024;
const MIB = 1024 * KIB;
const GIB = 1024 * MIB;
const TIB = 1024 * GIB;

export const DEFAULT_FILES_LIMITS: FilesLimits = {
  maxBytes: 16 * GIB,
  maxEntries: 1_000_000,
  symlinkMemoryBytes: 16 * MIB,
  concurrent: 8,
  perSandbox: 2,
  idleTimeoutMs: 60_000,
};

/** The environment variable of each limit (named in errors that a limit was reached). */
export const FILES_LIMIT_ENV: Record<keyof FilesLimits, string> = {
  maxBytes: "SANDGATE_CP_MAX_BYTES",
  maxEntries: "SANDGATE_CP_MAX_ENTRIES",
  symlinkMemoryBytes: "SANDGATE_CP_SYMLINK_MEMORY",
  concurrent: "SANDGATE_CP_CONCURRENCY",
  perSandbox: "SANDGATE_CP_PER_SANDBOX",
  idleTimeoutMs: "SANDGATE_CP_IDLE_TIMEOUT",
};

export const FILES_RANGES = {
  maxBytes: { min: MIB, max: 16 * TIB },
  maxEntries: { min: 1, max: 100_000_000 },
  symlinkMemoryBytes: { min: 64 * KIB, max: 4 * GIB },
  concurrent: { min: 1, max: 1024 },
  perSandbox: { min: 1, max: 1024 },
  idleTimeoutS: { minS: 1, maxS: 86_400 },
} as const;

const UNITS: Record<string, number> = { "": 1, k: KIB, m: MIB, g: GIB, t: TIB };

/** A byte size: "16G", "512M", "1GiB", "1048576" (binary units), in [min, max]. */
export function parseByteSize(what: string, raw: string, range: { min: number; max: number }): number {
  const m = /^([0-9]{1,15})([kKmMgGtT]?)(?:(i?)[bB])?$/.exec(raw.trim());
  const n = m && !(m[3] === "i" && m[2] === "") ? Number(m[1]) * UNITS[m[2]!.toLowerCase()]! : Number.NaN;
  if (!Number.isSafeInteger(n) || n < range.min || n > range.max) {
    throw new SettingError(`${what} must be a size such as 512M or 16G (binary units K, M, G, T) from ${range.min} to ${range.max} bytes; got ${JSON.stringify(raw)}`);
  }
  return n;
}

/** The limits from the environment (unset or empty: the default). Throws SettingError. */
export function filesLimitsFromEnv(env: NodeJS.ProcessEnv): FilesLimits {
  const get = (k: keyof FilesLimits): string | undefined => {
    const v = env[FILES_LIMIT_ENV[k]];
    return v === undefined || v === "" ? undefined : v;
  };
  const int = (k: "maxEntries" | "concurrent" | "perSandbox"): number => {
    const v = get(k);
    return v === undefined ? DEFAULT_FILES_LIMITS[k] : parseInteger(FILES_LIMIT_ENV[k], v, FILES_RANGES[k]);
  };
  const size = (k: "maxBytes" | "symlinkMemoryBytes"): number => {
    const v = get(k);
    return v === undefined ? DEFAULT_FILES_LIMITS[k] : parseByteSize(FILES_LIMIT_ENV[k], v, FILES_RANGES[k]);
  };
  const idle = get("idleTimeoutMs");
  return {
    maxBytes: size("maxBytes"),
    maxEntries: int("maxEntries"),
    symlinkMemoryBytes: size("symlinkMemoryBytes"),
    concurrent: int("concurrent"),
    perSandbox: int("perSandbox"),
    idleTimeoutMs: idle === undefined ? DEFAULT_FILES_LIMITS.idleTimeoutMs : parseDuration(FILES_LIMIT_ENV.idleTimeoutMs, idle, FILES_RANGES.idleTimeoutS) * 1000,
  };
}
