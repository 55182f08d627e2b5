// TEST DOUBLE: the in-memory driver with container logs a test scripts (lines per
// generation and role, appended while a follow waits, ended at will), for API and CLI
// tests of `sandbox logs` without Docker. It counts what it delivered and whether a
// delivery is waiting on the gateway (backpressure). Never used by the product.

import type { LogEnd, LogLine, LogRequest, Role } from "../../src/driver/contract.js";
import { MemoryDriver } from "./memory-driver.js";

export class LogsDriver extends MemoryDriver {
  readonly lines = new Map<string, LogLine[]>();
  /** Follows end (with an end record) once this is set. */
  ended = false;
  /** Lines handed to the gateway, reads open now, and whether one waits for the gateway to take a line. */
  delivered = 0;
  open = 0;
  waiting = false;
  readonly requests: Omit<LogRequest, "signal">[] = [];
  /** Lines made on demand for a read of this key (a log too big to hold). */
  readonly generated = new Map<string, { count: number; make: (i: number) => LogLine }>();
  readonly #wake = new Set<() => void>();

  static key(generation: number, role: Role = "workload"): string {
    return `${generation}-${role}`;
  }

  append(generation: number, lines: LogLine[], role: Role = "workload"): void {
    const k = LogsDriver.key(generation, role);
    this.lines.set(k, [...(this.lines.get(k) ?? []), ...lines]);
    for (const w of [...this.#wake]) w();
  }

  end(): void {
    this.ended = true;
    for (const w of [...this.#wake]) w();
  }

  async logs(req: LogRequest, deliver: (line: LogLine) => void | Promise<void>): Promise<LogEnd> {
    const { signal, ...rest } = req;
    this.requests.push(rest);
    const k = LogsDriver.key(req.generation, req.role);
    const gen = this.generated.get(k);
    if (!this.lines.has(k) && !gen) return { kind: "error", code: "not_found", message: `no logs of generation ${req.generation}'s ${req.role}` };
    this.open++;
    try {
      const at = (i: number): LogLine => (gen ? gen.make(i) : this.lines.get(k)![i]!);
      const size = (): number => (gen ? gen.count : this.lines.get(k)!.length);
      let i = 0;
      if (req.since !== undefined && !gen) while (i < size() && at(i).t < req.since) i++;
      if (req.tail !== undefined) i = Math.max(i, size() - req.tail);
      for (;;) {
        while (i < size()) {
          if (signal.aborted) return { kind: "aborted" };
          this.delivered++;
          const p = deliver(at(i++));
          if (p) {
            this.waiting = true;
            await p;
            this.waiting = false;
          }
        }
        if (!req.follow || this.ended) return { kind: "end", reason: "end of the log" };
        await new Promise<void>((resolve) => {
          const done = (): void => {
            this.#wake.delete(done);
            signal.removeEventListener("abort", done);
            resolve();
          };
          this.#wake.add(done);
          signal.addEventListener("abort", done, { once: true });
        });
        if (signal.aborted) return { kind: "aborted" };
      }
    } finally {
      this.open--;
    }
  }
}
