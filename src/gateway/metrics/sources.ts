// Where a scrape reads what the gateway's parts own: sandboxes by phase (one GROUP BY
// on the store), the monitor's counters (its metrics()), the audit sink's totals.

import type { RuntimeMonitor } from "../../driver/contract.js";
import type { Store } from "../../store/contract.js";
import type { AuditStats } from "../audit/audit-sink.js";
import type { MetricSources, MonitorCounts } from "./contract.js";

const num = (v: unknown): number => (typeof v === "number" && Number.isFinite(v) ? v : 0);

/** The counters a monitor's metrics() carries (the contract types it as an object: read defensively). */
export function monitorCounts(m: object): MonitorCounts {
  const r = m as Record<string, unknown>;
  return { connected: r.dockerConnected === true, disconnects: num(r.disconnects), reconnectAttempts: num(r.reconnectAttempts), watched: num(r.monitors), recovering: num(r.recoveringNow) };
}

export function gatewaySources(d: { store: Store; monitor: () => Pick<RuntimeMonitor, "metrics"> | null; audit: () => AuditStats }): MetricSources {
  return {
    sandboxesByPhase: async () => await d.store.countByPhase(),
    monitor: () => {
      const m = d.monitor();
      return m === null ? null : monitorCounts(m.metrics());
    },
    proxy: () => {
      const a = d.audit();
      return { decisions: a.decisions, bytes: a.bytes, droppedRecords: a.dropped };
    },
  };
}
