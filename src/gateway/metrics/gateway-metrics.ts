// The gateway's metrics, wired: one registry per gateway, the driver's Docker calls
// reported from the start (the monitor's too: instrument before watch), lifecycle
// transitions and recoveries from the store's committed events, and the monitor's and
// audit sink's counters read at each scrape.

import type { Logger } from "pino";
import type { ComputeDriver, RuntimeMonitor } from "../../driver/contract.js";
import type { Store } from "../../store/contract.js";
import type { AuditStats } from "../audit/audit-sink.js";
import { observeLifecycle } from "./lifecycle-metrics.js";
import { PrometheusMetrics } from "./prometheus.js";
import { gatewaySources } from "./sources.js";

export function createGatewayMetrics(d: { store: Store; driver: ComputeDriver; log: Logger; monitor: () => Pick<RuntimeMonitor, "metrics"> | null; audit: () => AuditStats }): PrometheusMetrics {
  const metrics = new PrometheusMetrics(gatewaySources(d));
  d.driver.instrument?.((call) => metrics.runtimeCall(call));
  // Dropped with the store's other listeners when it closes.
  observeLifecycle(d.store, metrics, (err) => d.log.warn({ err }, "lifecycle metrics failed"));
  return metrics;
}
