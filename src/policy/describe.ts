// How a found value is shown in an error message: short, quoted, never a whole document.

/** A short, quoted rendering of a found value for an error message. */
export function describeValue(value: unknown): string {
  if (value === undefined) return "nothing";
  if (value === null) return "null";
  if (typeof value === "string") return JSON.stringify(value.length > 60 ? `${value.slice(0, 57)}...` : value);
  if (typeof value === "number" || typeof value === "boolean" || typeof value === "bigint") return String(value);
  if (Array.isArray(value)) return "a list";
  if (value instanceof Date) return "a date";
  if (typeof value === "object") return "a mapping";
  return typeof value;
}

/**
 * The error of keys a mapping does not take: each named, the closest allowed key offered
 * for those that look like a typo of one (closestKey), then every allowed key.
 */
export function unknownKeysMessage(keys: readonly string[], allowed: readonly string[]): string {
  const named = `unknown key${keys.length > 1 ? "s" : ""} ${keys.map((k) => JSON.stringify(k)).join(", ")}`;
  const guesses = keys.flatMap((k) => {
    const near = closestKey(k, allowed);
    return near === undefined ? [] : [{ k, near }];
  });
  const guess =
    guesses.length === 0 ? "" : keys.length === 1 ? `; did you mean ${JSON.stringify(guesses[0]!.near)}?` : `; did you mean ${guesses.map((g) => `${JSON.stringify(g.near)} for ${JSON.stringify(g.k)}`).join(", ")}?`;
  return `${named}${guess} (allowed: ${allowed.join(", ")})`;
}

/** Edits that still make a key a likely typo of an allowed one. */
const TYPO_EDITS = 2;

/**
 * The allowed key `key` is most likely a typo of: one that differs only in case, else the
 * nearest within TYPO_EDITS edits (a letter added, dropped, changed, or two swapped; case
 * ignored) and fewer edits than `key` has letters, the first in `allowed` on a tie.
 */
export function closestKey(key: string, allowed: readonly string[]): string | undefined {
  const k = key.toLowerCase();
  let best: { key: string; d: number } | undefined;
  for (const a of allowed) {
    const d = editDistance(k, a.toLowerCase());
    if (d <= TYPO_EDITS && d < key.length && (best === undefined || d < best.d)) best = { key: a, d };
  }
  return best?.key;
}

/** Optimal string alignment distance: insertions, deletions, substitutions and swaps of neighbours. */
function editDistance(a: string, b: string): number {
  const rows: number[][] = [];
  for (let i = 0; i <= a.length; i++) {
    const row = [i];
    for (let j = 1; j <= b.length; j++) {
      if (i === 0) {
        row.push(j);
        continue;
      }
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let d = Math.min(rows[i - 1]![j]! + 1, row[j - 1]! + 1, rows[i - 1]![j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) d = Math.min(d, rows[i - 2]![j - 2]! + 1);
      row.push(d);
    }
    rows.push(row);
  }
  return rows[a.length]![b.length]!;
}
