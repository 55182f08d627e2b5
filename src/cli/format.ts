// Human-readable output: aligned tables and one time format. --json bypasses all
// of it (times there are RFC 3339, as the API gives them).

export function table(headers: string[], rows: string[][]): string {
  const widths = headers.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? "").length)));
  const line = (cells: string[]): string =>
    cells.map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i]!))).join("  ").trimEnd();
  return [line(headers), ...rows.map(line)].join("\n");
}

/**
 * The one human time format of tables and lines: "2026-12-03 13:16:36Z" (UTC, to
 * the second). Anything that is not a time is shown as it is.
 */
export function when(iso: string | null | undefined): string {
  if (!iso) return "-";
  const t = Date.parse(iso);
  if (Number.isNaN(t)) return iso;
  return new Date(t).toISOString().replace("T", " ").replace(/\.\d+Z$/, "Z");
}

export const short = (id: string | undefined, n = 12): string => (id ? id.replace(/^sha256:/, "").slice(0, n) : "-");

export function printJson(value: unknown): void {
  process.stdout.write(JSON.stringify(value, null, 2) + "\n");
}

/** "1 rule", "2 rules": a count and its noun, which takes an s unless it is one. */
/** "1 rule", "2 rules"; `many` for a noun whose plural is not noun + s ("deny entries"). */
export const plural = (n: number, noun: string, many = `${noun}s`): string => `${n} ${n === 1 ? noun : many}`;
