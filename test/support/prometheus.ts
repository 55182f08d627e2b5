// Reads a /metrics answer with a Prometheus text parser (parse-prometheus-text-format):
// the whole text must parse (it throws on a malformed line), and every sample can be
// looked up by family and labels. That parser folds a histogram's series into one when
// they carry labels besides `le`, so histogram samples are read from a second parse in
// which histograms are declared untyped: `<name>_bucket`, `_sum` and `_count` are then
// families of their own (repeated for each label set, as prom-client interleaves them).

import parsePrometheusTextFormat, { type PromFamily } from "parse-prometheus-text-format";

export interface Scrape {
  text: string;
  families: PromFamily[];
  /** A family by name (throws naming the ones there are). */
  family(name: string): PromFamily;
  /** The value of the sample of `name` (a histogram's `_count`, `_sum` or `_bucket` too) whose labels include `labels`; undefined when none. */
  value(name: string, labels?: Record<string, string>): number | undefined;
  /** Every sample of `name`: labels and value. */
  samples(name: string): { labels: Record<string, string>; value: number }[];
}

export function parseScrape(text: string): Scrape {
  const families = parsePrometheusTextFormat(text);
  const flat = parsePrometheusTextFormat(text.replace(/^# TYPE (\S+) histogram$/gm, "# TYPE $1 untyped"));
  const samples = (name: string) =>
    flat.filter((f) => f.name === name).flatMap((f) => f.metrics.map((m) => ({ labels: m.labels ?? {}, value: Number(m.value) })));
  return {
    text,
    families,
    family(name) {
      const f = families.find((x) => x.name === name);
      if (!f) throw new Error(`no family ${name} among ${families.map((x) => x.name).join(", ")}`);
      return f;
    },
    samples,
    value(name, labels = {}) {
      return samples(name).find((s) => Object.entries(labels).every(([k, v]) => s.labels[k] === v))?.value;
    },
  };
}
