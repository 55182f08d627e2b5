// Numeric settings from flags, environment variables and files, parsed in one
// place: whole numbers and durations, each with its allowed range. Pure. A bad
// value is a SettingError whose message names the setting, the value and what is
// allowed, in one line (`SANDGATE_RECOVERY_DEADLINE must be a duration from 1 s to
// 86400 s (e.g. 60, 90s, 5m); got "abc"`). Never NaN, never a silent default.

import { SandgateError } from "./errors.js";

/** A value the user gave that is not allowed: the API's `invalid_request`, the CLI's usage error. */
export class SettingError extends SandgateError {
  override readonly name = "SettingError";
  constructor(message: string, options?: ErrorOptions) {
    super(message, "invalid_request", options);
  }
}

export interface IntRange {
  min: number;
  max: number;
}

export interface DurationRange {
  /** Smallest allowed, in seconds. */
  minS: number;
  /** Largest allowed, in seconds. */
  maxS: number;
}

const shown = (raw: unknown): string => (typeof raw === "string" ? JSON.stringify(raw) : String(raw));

/** A whole number in [min, max], from decimal digits (an optional leading "-"), or a JSON number. */
export function parseInteger(what: string, raw: string | number, range: IntRange): number {
  const text = typeof raw === "number" ? String(raw) : raw.trim();
  const n = /^-?\d{1,16}$/.test(text) ? Number(text) : typeof raw === "number" ? raw : Number.NaN;
  if (!Number.isSafeInteger(n) || n < range.min || n > range.max) {
    throw new SettingError(`${what} must be a whole number from ${range.min} to ${range.max}; got ${shown(raw)}`);
  }
  return n;
}

/** A decimal number in [min, max] ("0.5", "2", "1e3" is refused: plain decimals only). */
export function parseDecimal(what: string, raw: string | number, range: IntRange): number {
  const text = typeof raw === "number" ? String(raw) : raw.trim();
  const n = /^-?(\d{1,16}(\.\d{1,16})?|\.\d{1,16})$/.test(text) ? Number(text) : typeof raw === "number" ? raw : Number.NaN;
  if (!Number.isFinite(n) || n < range.min || n > range.max) {
    throw new SettingError(`${what} must be a number from ${range.min} to ${range.max}; got ${shown(raw)}`);
  }
  return n;
}

const UNIT_S: Record<string, number> = { ms: 0.001, s: 1, m: 60, h: 3600, d: 86_400 };

/** A duration in seconds, in [minS, maxS]: "60" (seconds), "1.5", "90s", "500ms", "5m", "1h", "7d". */
/** Whole seconds in the largest unit that divides them ("366 d", "10 m", "90 s"), as durations are written. */
export function humanSeconds(s: number): string {
  if (s === 0 || !Number.isInteger(s)) return `${s} s`;
  for (const [unit, n] of [["d", 86_400], ["h", 3600], ["m", 60]] as const) if (s % n === 0) return `${s / n} ${unit}`;
  return `${s} s`;
}

export function parseDuration(what: string, raw: string | number, range: DurationRange): number {
  const text = typeof raw === "number" ? String(raw) : raw.trim();
  const m = /^(\d{1,12}(?:\.\d{1,9})?)(ms|s|m|h|d)?$/.exec(text);
  const s = m ? Number(m[1]) * UNIT_S[m[2] ?? "s"]! : Number.NaN;
  if (!Number.isFinite(s) || s < range.minS || s > range.maxS) {
    throw new SettingError(`${what} must be a duration from ${humanSeconds(range.minS)} to ${humanSeconds(range.maxS)} (e.g. 60, 90s, 5m, 2h, 7d); got ${shown(raw)}`);
  }
  return s;
}

/** One of a fixed set of words. */
export function parseChoice<T extends string>(what: string, raw: string, allowed: readonly T[]): T {
  if ((allowed as readonly string[]).includes(raw)) return raw as T;
  throw new SettingError(`${what} must be one of ${allowed.join(", ")}; got ${shown(raw)}`);
}

/**
 * A setting given as a flag, else an environment variable, else its default: the
 * flag wins, and whichever is used is parsed (and named in the error) as itself.
 */
export function fromFlagOrEnv<T>(
  flag: { name: string; value: string | undefined },
  env: { name: string; value: string | undefined },
  fallback: T,
  parse: (what: string, raw: string) => T,
): T {
  if (flag.value !== undefined) return parse(flag.name, flag.value);
  if (env.value !== undefined && env.value !== "") return parse(env.name, env.value);
  return fallback;
}
