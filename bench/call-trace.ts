// Which Docker calls a path makes, and when: a per-step timeline for the create bench. Fed
// by the engine's call observer (route template and latency, reported as each call ends),
// so a call's span is [end − latency, end]. Runs are aggregated by (route, occurrence).
import { performance } from "node:perf_hooks";
import type { RuntimeCall } from "../src/driver/contract.js";
import { printTable, stats } from "./lib.js";

interface Span {
  route: string;
  start: number;
  end: number;
}

export class CallTrace {
  #spans: Span[] | null = null;
  #t0 = 0;
  readonly #runs: { total: number; spans: Span[] }[] = [];

  /** The observer to hand to the engine (or driver): records calls only between begin() and end(). */
  readonly observe = (call: RuntimeCall): void => {
    if (this.#spans === null || call.seconds === null) return;
    const end = performance.now();
    this.#spans.push({ route: call.endpoint, start: end - call.seconds * 1000 - this.#t0, end: end - this.#t0 });
  };

  begin(): void {
    this.#t0 = performance.now();
    this.#spans = [];
  }

  /** Ends a run; `keep` false discards it (a warm-up). */
  end(keep: boolean): void {
    const total = performance.now() - this.#t0;
    if (keep && this.#spans !== null) this.#runs.push({ total, spans: this.#spans.sort((a, b) => a.start - b.start) });
    this.#spans = null;
  }

  /** Per step (route and occurrence, in order of median start): start, duration; then the time outside any call. */
  print(title: string): { steps: { step: string; runs: number; startMs: number; durationMs: number }[]; outsideCallsMs: number } {
    const byKey = new Map<string, { starts: number[]; durations: number[] }>();
    const outside: number[] = [];
    for (const run of this.#runs) {
      const seen = new Map<string, number>();
      let covered = 0;
      let reach = 0;
      for (const s of run.spans) {
        const n = (seen.get(s.route) ?? 0) + 1;
        seen.set(s.route, n);
        const key = n === 1 ? s.route : `${s.route} #${n}`;
        const e = byKey.get(key) ?? { starts: [], durations: [] };
        e.starts.push(s.start);
        e.durations.push(s.end - s.start);
        byKey.set(key, e);
        // Union of the spans (sorted by start): the time at least one call was in flight.
        const from = Math.max(s.start, reach);
        if (s.end > from) covered += s.end - from;
        reach = Math.max(reach, s.end);
      }
      outside.push(run.total - covered);
    }
    const steps = [...byKey.entries()]
      .map(([step, e]) => ({ step, runs: e.starts.length, startMs: stats(e.starts).median, durationMs: stats(e.durations).median }))
      .sort((a, b) => a.startMs - b.startMs);
    const outsideCallsMs = stats(outside).median;
    printTable(
      `${title} (${this.#runs.length} runs; medians, ms from the start of the path)`,
      ["Docker call", "runs", "starts at", "takes"],
      [...steps.map((s) => [s.step, s.runs, s.startMs, s.durationMs]), ["(no Docker call in flight)", this.#runs.length, "", outsideCallsMs], ["(whole path)", this.#runs.length, "", stats(this.#runs.map((r) => r.total)).median]],
    );
    return { steps, outsideCallsMs };
  }
}
