// GatewayMetrics on prom-client, in a registry of this gateway's own (never the global
// one: two gateways in one process keep apart). Events (transitions, recoveries, Docker
// calls) are counted as they happen; phases, the monitor and the proxies' decisions are
// read from their owners at each scrape. docs/architecture.md lists every family.

import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from "prom-client";
import type { RuntimeCall } from "../../driver/contract.js";
import type { ErrorCode, Phase, StopCode } from "../../lifecycle/phases.js";
import { VERSION } from "../../version.js";
import type { ApiRequest, GatewayMetrics, MetricSources, MetricsExposition, PhaseOrDeleted } from "./contract.js";

/**
 * Distinct endpoint labels kept at most; later ones are counted as "other". The driver
 * gives route templates (a bounded set already); this bounds a driver that did not.
 */
export const MAX_ENDPOINTS = 64;

const LATENCY_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];
const RECOVERY_BUCKETS = [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800];

export class PrometheusMetrics implements GatewayMetrics, MetricsExposition {
  readonly #registry = new Registry();
  readonly #transitions: Counter<"from" | "to" | "reason">;
  readonly #recoveries: Histogram<"outcome">;
  readonly #calls: Histogram<"endpoint">;
  readonly #callErrors: Counter<"endpoint" | "error">;
  readonly #endpoints = new Set<string>();
  readonly #requests: Counter<"route" | "method" | "status">;
  readonly #requestSeconds: Histogram<"route" | "method">;
  readonly #routes = new Set<string>();

  constructor(sources: MetricSources) {
    const registers = [this.#registry];
    // The process's and the runtime's own (CPU, memory, heap, event-loop lag, handles, GC): prom-client's defaults.
    collectDefaultMetrics({ register: this.#registry });
    this.#requests = new Counter({ name: "sandgate_api_requests_total", help: "API requests answered, by route template, method and status (WebSocket upgrades are not counted here)", labelNames: ["route", "method", "status"], registers });
    this.#requestSeconds = new Histogram({ name: "sandgate_api_request_duration_seconds", help: "Time to answer an API request, by route template and method (a streamed answer: until it ended)", labelNames: ["route", "method"], buckets: LATENCY_BUCKETS, registers });
    new Gauge({ name: "sandgate_build_info", help: "The gateway's version (always 1)", labelNames: ["version"], registers }).set({ version: VERSION }, 1);
    new Gauge({
      name: "sandgate_sandboxes",
      help: "Sandboxes in each phase, now",
      labelNames: ["phase"],
      registers,
      async collect() {
        for (const [phase, n] of Object.entries(await sources.sandboxesByPhase())) this.set({ phase }, n);
      },
    });
    this.#transitions = new Counter({ name: "sandgate_lifecycle_transitions_total", help: "Lifecycle transitions committed by this gateway process, by from/to phase and reason (an Error reason, or TtlExpired/IdleTimeout for a stop the gateway made; from none: created; to Deleted: record removed)", labelNames: ["from", "to", "reason"], registers });
    this.#recoveries = new Histogram({ name: "sandgate_recovery_duration_seconds", help: "Time sandboxes spent Recovering, observed when they left it, by the phase they went to (Ready: recovered; Error: failed closed)", labelNames: ["outcome"], buckets: RECOVERY_BUCKETS, registers });
    this.#calls = new Histogram({ name: "sandgate_docker_api_call_duration_seconds", help: "Docker Engine API calls of the driver and the monitor, by route template (a stream: time to open it)", labelNames: ["endpoint"], buckets: LATENCY_BUCKETS, registers });
    this.#callErrors = new Counter({ name: "sandgate_docker_api_call_errors_total", help: "Docker Engine API calls that failed, by route template and kind (http_4xx, http_5xx, timeout, aborted, transport)", labelNames: ["endpoint", "error"], registers });

    // Totals owned by the audit sink and the monitor, read at scrape.
    const total = <L extends string>(name: string, help: string, labelNames: L[], read: () => [Partial<Record<L, string>>, number][] | null) =>
      new Counter({
        name,
        help,
        labelNames,
        registers,
        collect() {
          this.reset();
          for (const [labels, n] of read() ?? []) this.inc(labels, n);
        },
      });
    const now = (name: string, help: string, read: () => number | null) =>
      new Gauge({
        name,
        help,
        registers,
        collect() {
          const v = read();
          if (v === null) this.reset();
          else this.set(v);
        },
      });
    total("sandgate_proxy_decisions_total", "Egress decisions of the sandboxes' proxies as the gateway received them (allow, deny, would_deny: let through in audit mode)", ["decision"], () => {
      const d = sources.proxy().decisions;
      return [[{ decision: "allow" }, d.allow], [{ decision: "deny" }, d.deny], [{ decision: "would_deny" }, d.would_deny]];
    });
    total("sandgate_proxy_bytes_total", "Bytes the sandboxes' proxies moved for their workloads, out (towards origins) and in", ["direction"], () => {
      const b = sources.proxy().bytes;
      return [[{ direction: "out" }, b.out], [{ direction: "in" }, b.in]];
    });
    total("sandgate_audit_records_dropped_total", "Egress decisions the gateway's audit rate limit dropped (counted in a dropped record)", [], () => [[{}, sources.proxy().droppedRecords]]);
    total("sandgate_monitor_disconnects_total", "Times the monitor lost its Docker connection (events stream or ping)", [], () => {
      const m = sources.monitor();
      return m === null ? null : [[{}, m.disconnects]];
    });
    total("sandgate_monitor_reconnect_attempts_total", "The monitor's attempts to reconnect to Docker", [], () => {
      const m = sources.monitor();
      return m === null ? null : [[{}, m.reconnectAttempts]];
    });
    now("sandgate_monitor_docker_connected", "1 while the monitor's Docker events stream is open", () => {
      const m = sources.monitor();
      return m === null ? null : Number(m.connected);
    });
    now("sandgate_monitor_watched_sandboxes", "Sandbox generations the monitor watches", () => sources.monitor()?.watched ?? null);
    now("sandgate_monitor_recovering_sandboxes", "Sandboxes the monitor holds in Recovering", () => sources.monitor()?.recovering ?? null);
  }

  get contentType(): string {
    return this.#registry.contentType;
  }

  scrape(): Promise<string> {
    return this.#registry.metrics();
  }

  transition(from: Phase | null, to: PhaseOrDeleted, reason: ErrorCode | StopCode | null): void {
    this.#transitions.inc({ from: from ?? "none", to, reason: reason ?? "none" });
  }

  recovery(to: PhaseOrDeleted, seconds: number): void {
    this.#recoveries.observe({ outcome: to }, Math.max(0, seconds));
  }

  runtimeCall(call: RuntimeCall): void {
    const endpoint = this.#endpoint(call.endpoint);
    if (call.seconds !== null) this.#calls.observe({ endpoint }, call.seconds);
    if (call.error !== null) this.#callErrors.inc({ endpoint, error: call.error });
  }

  apiRequest(r: ApiRequest): void {
    const route = this.#route(r.route);
    this.#requests.inc({ route, method: r.method, status: String(r.status) });
    this.#requestSeconds.observe({ route, method: r.method }, Math.max(0, r.seconds));
  }

  /** Route templates are a fixed set; this bounds them anyway, as #endpoint does. */
  #route(r: string): string {
    if (this.#routes.has(r)) return r;
    if (this.#routes.size >= MAX_ENDPOINTS) return "other";
    this.#routes.add(r);
    return r;
  }

  #endpoint(e: string): string {
    if (this.#endpoints.has(e)) return e;
    if (this.#endpoints.size >= MAX_ENDPOINTS) return "other";
    this.#endpoints.add(e);
    return e;
  }
}
