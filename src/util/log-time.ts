// Times of log lines. Docker stamps each line RFC 3339 with up to nine fraction digits,
// trailing zeros trimmed ("…:05.1Z" is later than "…:05.099Z" but sorts before it as
// text). Sandgate carries one canonical form instead: UTC, always nine digits
// ("2026-12-03T13:16:36.100000000Z"), so times compare as strings. Pure.

import { SettingError, parseDuration } from "./settings.js";

const RFC3339 = /^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?([Zz]|[+-]\d{2}:\d{2})$/;

/** A line's time in the canonical form; null when `text` is not an RFC 3339 time. */
export function canonicalTime(text: string): string | null {
  const m = RFC3339.exec(text);
  if (!m) return null;
  const [, y, mo, d, h, mi, s, frac, zone] = m as unknown as [string, string, string, string, string, string, string, string | undefined, string];
  const date = new Date(0);
  // setUTCFullYear, not Date.UTC: years 0-99 stay themselves.
  date.setUTCFullYear(Number(y), Number(mo) - 1, Number(d));
  date.setUTCHours(Number(h), Number(mi), Number(s), 0);
  // Fields out of range roll over (Feb 30 → Mar 2): only a round trip is a real date.
  if (date.getUTCFullYear() !== Number(y) || date.getUTCMonth() !== Number(mo) - 1 || date.getUTCDate() !== Number(d)) return null;
  if (Number(h) > 23 || Number(mi) > 59 || Number(s) > 59) return null;
  if (zone !== "Z" && zone !== "z") {
    const sign = zone.startsWith("-") ? -1 : 1;
    const [oh, om] = zone.slice(1).split(":").map(Number) as [number, number];
    if (oh > 23 || om > 59) return null;
    // An offset is whole minutes: the fraction is unchanged by it.
    date.setTime(date.getTime() - sign * (oh * 60 + om) * 60_000);
  }
  const year = date.getUTCFullYear();
  if (year < 0 || year > 9999) return null;
  return `${date.toISOString().slice(-24, -5)}.${(frac ?? "").padEnd(9, "0")}Z`;
}

/** A canonical time as Docker's `since` query value: Unix seconds, a dot, nine digits of nanoseconds. */
export function dockerSince(canonical: string): string {
  const seconds = Math.floor(Date.parse(`${canonical.slice(0, 19)}Z`) / 1000);
  // Before 1970 is "everything": Docker reads no negative times.
  if (!(seconds >= 0)) return "0.000000000";
  return `${seconds}.${canonical.slice(20, 29)}`;
}

/** How far back `--since 10m` may reach: 100 years. */
const SINCE_MAX_S = 100 * 366 * 86_400;

/**
 * `--since`: an RFC 3339 time, or a duration back from `now` ("90s", "10m", "2h", "7d").
 * Throws a SettingError naming the value and both forms.
 */
export function parseSince(what: string, raw: string, now: Date): string {
  const text = raw.trim();
  const exact = canonicalTime(text);
  if (exact !== null) return exact;
  let seconds: number;
  try {
    seconds = parseDuration(what, text, { minS: 0, maxS: SINCE_MAX_S });
  } catch {
    throw new SettingError(`${what} must be an RFC 3339 time (e.g. 2026-12-01T10:00:00Z) or a duration back from now (e.g. 90s, 10m, 2h, 7d); got ${JSON.stringify(raw)}`);
  }
  const at = new Date(now.getTime() - Math.round(seconds * 1000));
  return canonicalTime(at.toISOString())!;
}
