// What the gateway's parts report for GET /metrics, and what is read at each scrape.
// Types only: components receive GatewayMetrics; prometheus.ts implements it with
// prom-client. Label values come from fixed vocabularies (phases, reasons, route
// templates, decisions): never a sandbox's name or id, so the series stay bounded.

import type { RuntimeCall } from "../../driver/contract.js";
import type { ErrorCode, Phase, StopCode } from "../../lifecycle/phases.js";

/** A phase, or "Deleted" once the sandbox's record is gone. */
export type PhaseOrDeleted = Phase | "Deleted";

export interface GatewayMetrics {
  /** A committed lifecycle transition; `from` null when the sandbox was created. */
  transition(from: Phase | null, to: PhaseOrDeleted, reason: ErrorCode | StopCode | null): void;
  /** A sandbox left Recovering for `to`, after `seconds` in it (over gateway restarts). */
  recovery(to: PhaseOrDeleted, seconds: number): void;
  /** One call to the runtime's API, as the driver reports it. */
  runtimeCall(call: RuntimeCall): void;
}

/** One API request answered: its route template (never its path), method, status and time taken. */
export interface ApiRequest {
  /** The matched route's template (`/v1/sandboxes/:name`), or "unmatched". */
  route: string;
  method: string;
  status: number;
  seconds: number;
}

/** The runtime monitor's connection to Docker. */
export interface MonitorCounts {
  connected: boolean;
  disconnects: number;
  reconnectAttempts: number;
  /** Sandbox generations it watches. */
  watched: number;
  recovering: number;
}

/** The proxies' decisions and traffic as the audit sink received them. */
export interface ProxyCounts {
  decisions: { allow: number; deny: number; would_deny: number };
  bytes: { out: number; in: number };
  /** Audit records the gateway's rate limit dropped. */
  droppedRecords: number;
}

/** Read at each scrape: cheap, one query or a counter read each. */
export interface MetricSources {
  sandboxesByPhase(): Promise<Record<Phase, number>>;
  /** Null when the runtime has no monitor. */
  monitor(): MonitorCounts | null;
  proxy(): ProxyCounts;
}

/** The text a scrape answers. */
export interface MetricsExposition {
  readonly contentType: string;
  scrape(): Promise<string>;
}
