// Human-readable output: aligned tables and one time format. --json bypasses all
// of it (times there are RFC 3339, as the API gives them).

export function table(headers: string[], rows: string[][]): string {
  const columns = new Columns(headers);
  columns.fit(rows);
  return [columns.header(), ...rows.map((r) => columns.line(r))].join("\n");
}

/**
 * The columns of a table printed a part at a time (pages, a followed log): every line is
 * padded to the same widths, so rows printed later line up with the header and the rows
 * before them. A column is as wide as its header, its `min` and the rows given to `fit`
 * before the header is printed; only a later cell longer than that (a number outgrowing its
 * room) widens its column from then on. The last column is never padded.
 */
export class Columns {
  readonly #headers: string[];
  readonly #widths: number[];

  constructor(headers: string[], min: readonly number[] = []) {
    this.#headers = headers;
    this.#widths = headers.map((h, i) => Math.max(h.length, min[i] ?? 0));
  }

  /** Widens the columns to hold `rows` (before the header is printed). */
  fit(rows: readonly string[][]): void {
    for (const r of rows) r.forEach((c, i) => (this.#widths[i] = Math.max(this.#widths[i] ?? 0, c.length)));
  }

  header(): string {
    return this.line(this.#headers);
  }

  line(cells: readonly string[]): string {
    this.fit([cells.slice(0, -1)]);
    return cells.map((c, i) => (i === cells.length - 1 ? c : c.padEnd(this.#widths[i]!))).join("  ").trimEnd();
  }
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
