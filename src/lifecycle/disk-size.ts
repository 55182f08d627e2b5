// Workspace disk sizes: `--disk 512M`, `10G`, `1GiB`, `2048MiB`, a plain number of
// bytes. Units are binary (K = KiB = 1024); a trailing "B" is optional. Pure.

const KIB = 1024;
const MIB = 1024 * KIB;
const GIB = 1024 * MIB;
const TIB = 1024 * GIB;

export const DEFAULT_DISK_BYTES = 10 * GIB;
/** ext4 needs a few MiB for itself; below this a workspace holds nothing useful. */
export const DISK_BYTES_RANGE = { min: 16 * MIB, max: 16 * TIB } as const;

const UNITS: Record<string, number> = { "": 1, k: KIB, m: MIB, g: GIB, t: TIB };

/** 1536 MiB → "1.5 GiB"; exact multiples print without a fraction. */
export function formatBytes(bytes: number): string {
  for (const [unit, size] of [
    ["TiB", TIB],
    ["GiB", GIB],
    ["MiB", MIB],
    ["KiB", KIB],
  ] as const) {
    if (bytes >= size) {
      const v = bytes / size;
      return `${Number.isInteger(v) ? v : v.toFixed(1)} ${unit}`;
    }
  }
  return `${bytes} B`;
}

const RANGE = `from ${formatBytes(DISK_BYTES_RANGE.min)} to ${formatBytes(DISK_BYTES_RANGE.max)}`;
const FORMS = `a size such as 512M, 10G or 1GiB (binary units K, M, G, T)`;

/** A whole number of bytes in DISK_BYTES_RANGE, else a one-line error naming the value. */
export function checkDiskBytes(n: number): string | null {
  if (!Number.isSafeInteger(n)) return `invalid disk size ${String(n)}: expected a whole number of bytes ${RANGE}`;
  if (n < DISK_BYTES_RANGE.min || n > DISK_BYTES_RANGE.max) return `invalid disk size ${n} bytes: expected ${RANGE}`;
  return null;
}

export function parseDiskSize(text: string): { ok: true; bytes: number } | { ok: false; error: string } {
  const m = /^([0-9]{1,15})(?:\.([0-9]{1,6}))?([kKmMgGtT]?)(?:(i?)[bB])?$/.exec(text);
  // "1iB" and a bare "iB" are not sizes; neither are fractions of a byte.
  if (!m || (m[4] === "i" && m[3] === "") || (m[2] !== undefined && m[3] === "")) {
    return { ok: false, error: `invalid disk size ${JSON.stringify(text)}: expected ${FORMS}, ${RANGE}` };
  }
  const unit = UNITS[m[3]!.toLowerCase()]!;
  const frac = m[2] ?? "";
  // Integer arithmetic: whole part, then the fraction's digits scaled by the unit.
  const whole = Number(m[1]) * unit;
  const bytes = whole + Math.round((Number(frac || "0") * unit) / 10 ** frac.length);
  if (checkDiskBytes(bytes) !== null) return { ok: false, error: `invalid disk size ${JSON.stringify(text)}: expected ${RANGE}` };
  return { ok: true, bytes };
}
