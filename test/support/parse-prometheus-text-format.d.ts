// Types of parse-prometheus-text-format 1.1.1 (it ships none), as its README documents
// its output (prom2json's shape): values are strings as written in the text.
declare module "parse-prometheus-text-format" {
  export interface PromSample {
    labels?: Record<string, string>;
    value?: string;
    /** Histograms: upper bound (as written, e.g. "0.5", "+Inf") → cumulative count. */
    buckets?: Record<string, string>;
    count?: string;
    sum?: string;
  }
  export interface PromFamily {
    name: string;
    help: string;
    type: "COUNTER" | "GAUGE" | "HISTOGRAM" | "SUMMARY" | "UNTYPED";
    metrics: PromSample[];
  }
  export default function parsePrometheusTextFormat(text: string): PromFamily[];
}
