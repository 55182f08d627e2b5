// Every benchmark by name, loaded on demand: `npm run bench` (bench/run.ts) runs them,
// and the test suite's smoke run (test/integration/bench-smoke.test.ts) checks each one wrote its result.

import type { BenchOptions } from "./lib.js";

export const BENCHES = {
  create: () => import("./create.js"),
  recovery: () => import("./recovery.js"),
  "monitor-scale": () => import("./monitor-scale.js"),
  proxy: () => import("./proxy.js"),
  https: () => import("./https.js"),
  "tls-cpu": () => import("./tls-cpu.js"),
  liveness: () => import("./liveness.js"),
  "supervisor-memory": () => import("./supervisor-memory.js"),
  api: () => import("./api.js"),
  "audit-flood": () => import("./audit-flood.js"),
  store: () => import("./store.js"),
} satisfies Record<string, () => Promise<{ run(o: BenchOptions): Promise<void> }>>;
