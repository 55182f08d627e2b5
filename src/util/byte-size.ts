// Sizes given as settings: "10M", "512K", "1GiB", "65536" (bytes). Binary units
// (K = 1024); a trailing "B" is optional. Pure; a bad value is a SettingError naming
// the setting, the value and the allowed range.

import { SettingError } from "./settings.js";

const UNITS: Record<string, number> = { "": 1, k: 1024, m: 1024 ** 2, g: 1024 ** 3 };

/** 10485760 → "10 MiB"; exact multiples print without a fraction. */
export function formatSize(bytes: number): string {
  for (const [unit, size] of [
    ["GiB", 1024 ** 3],
    ["MiB", 1024 ** 2],
    ["KiB", 1024],
  ] as const) {
    if (bytes >= size) {
      const v = bytes / size;
      return `${Number.isInteger(v) ? v : v.toFixed(1)} ${unit}`;
    }
  }
  return `${bytes} B`;
}

export function parseByteSize(what: string, raw: string, range: { min: number; max: number }): number {
  const m = /^(\d{1,12})([kKmMgG]?)(?:i?[bB])?$/.exec(raw.trim());
  const bytes = m && !(m[2] === "" && /i/i.test(raw)) ? Number(m[1]) * UNITS[m[2]!.toLowerCase()]! : Number.NaN;
  if (!Number.isSafeInteger(bytes) || bytes < range.min || bytes > range.max) {
    throw new SettingError(`${what} must be a size from ${formatSize(range.min)} to ${formatSize(range.max)} (e.g. 512K, 10M, 1G); got ${JSON.stringify(raw)}`);
  }
  return bytes;
}

const TRANSFER_UNITS: Record<string, number> = { "": 1, k: 1024, m: 1024 ** 2, g: 1024 ** 3, t: 1024 ** 4 };

/** A file transfer's size bound (SANDGATE_CP_*): "16G", "512M", "1GiB", "1048576"; T allowed. In [min, max]. */
export function parseTransferSize(what: string, raw: string, range: { min: number; max: number }): number {
  const m = /^([0-9]{1,15})([kKmMgGtT]?)(?:(i?)[bB])?$/.exec(raw.trim());
  const n = m && !(m[3] === "i" && m[2] === "") ? Number(m[1]) * TRANSFER_UNITS[m[2]!.toLowerCase()]! : Number.NaN;
  if (!Number.isSafeInteger(n) || n < range.min || n > range.max) {
    throw new SettingError(`${what} must be a size such as 512M or 16G (binary units K, M, G, T) from ${range.min} to ${range.max} bytes; got ${JSON.stringify(raw)}`);
  }
  return n;
}
