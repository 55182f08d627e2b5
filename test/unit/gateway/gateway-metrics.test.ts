// GET /metrics: a real gateway (HTTP API, SQLite file) on the in-memory driver test
// double, scraped and parsed with a Prometheus text parser. Sandboxes by phase and
// lifecycle transitions follow creates, stops, failures and deletes; the token guards
// it; no sandbox name or id ever appears. Recoveries, proxy decisions and the monitor's
// connection are checked on the parts that feed them (store events with a set clock, a
// real audit sink, a monitor's counters).
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pino } from "pino";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { AuditSink, type AuditStats } from "../../../src/gateway/audit/audit-sink.js";
import type { MetricSources } from "../../../src/gateway/metrics/contract.js";
import { observeLifecycle } from "../../../src/gateway/metrics/lifecycle-metrics.js";
import { PrometheusMetrics } from "../../../src/gateway/metrics/prometheus.js";
import { gatewaySources, monitorCounts } from "../../../src/gateway/metrics/sources.js";
import type { Phase } from "../../../src/lifecycle/phases.js";
import { defaultPolicy } from "../../../src/policy/index.js";
import { Store } from "../../../src/store/store.js";
import { eventually, startTestGateway, type TestGateway } from "../../support/gateway-fixture.js";
import { MemoryDriver } from "../../support/memory-driver.js";
import { parseScrape, type Scrape } from "../../support/prometheus.js";

const FAMILIES: [string, string][] = [
  ["sandgate_build_info", "GAUGE"],
  ["sandgate_sandboxes", "GAUGE"],
  ["sandgate_lifecycle_transitions_total", "COUNTER"],
  ["sandgate_recovery_duration_seconds", "HISTOGRAM"],
  ["sandgate_docker_api_call_duration_seconds", "HISTOGRAM"],
  ["sandgate_docker_api_call_errors_total", "COUNTER"],
  ["sandgate_proxy_decisions_total", "COUNTER"],
  ["sandgate_proxy_bytes_total", "COUNTER"],
  ["sandgate_audit_records_dropped_total", "COUNTER"],
  ["sandgate_monitor_docker_connected", "GAUGE"],
  ["sandgate_monitor_disconnects_total", "COUNTER"],
  ["sandgate_monitor_reconnect_attempts_total", "COUNTER"],
  ["sandgate_monitor_watched_sandboxes", "GAUGE"],
  ["sandgate_monitor_recovering_sandboxes", "GAUGE"],
  ["sandgate_api_requests_total", "COUNTER"],
  ["sandgate_api_request_duration_seconds", "HISTOGRAM"],
];

/** An audit sink's stats with nothing received (the parts under test here are elsewhere). */
const noAudit = (): AuditStats => ({ accepted: 0, dropped: 0, written: 0, pruned: { audit: 0, events: 0 }, decisions: { allow: 0, deny: 0, would_deny: 0 }, bytes: { out: 0, in: 0 } });

async function scrape(t: TestGateway, token = t.token): Promise<{ status: number; type: string | null; text: string }> {
  const r = await t.fetch(`/metrics`, { headers: token === "" ? {} : { authorization: `Bearer ${token}` } });
  return { status: r.status, type: r.headers.get("content-type"), text: await r.text() };
}
async function metricsOf(t: TestGateway): Promise<Scrape> {
  const r = await scrape(t);
  expect(r.status).toBe(200);
  return parseScrape(r.text);
}

describe("GET /metrics on a running gateway", () => {
  let driver: MemoryDriver;
  let t: TestGateway;
  beforeEach(async () => {
    driver = new MemoryDriver();
    t = await startTestGateway(driver);
  });
  afterEach(async () => {
    await t.close();
  });

  const phaseOf = async (name: string): Promise<string> => {
    const r = await t.api("GET", `/v1/sandboxes/${name}`);
    return r.status === 404 ? "gone" : (r.body.phase as string);
  };
  const until = (name: string, phase: string) => eventually(async () => ((await phaseOf(name)) === phase ? true : undefined), 30_000, `${name} → ${phase}`);

  it("answers 401 without the token or with a wrong one, and nothing of the metrics", async () => {
    for (const token of ["", "not-the-token", `${t.token}x`]) {
      const r = await scrape(t, token);
      expect(r.status).toBe(401);
      expect(JSON.parse(r.text)).toEqual({ error: { code: "unauthorized", message: "missing or wrong bearer token" } });
      expect(r.text).not.toContain("sandgate_");
    }
  });

  it("GET /healthz answers \"ok\" with no token (or a wrong one) and says nothing else; other methods on it still need the token", async () => {
    for (const token of ["", "not-the-token"]) {
      const r = await t.fetch("/healthz", { headers: token === "" ? {} : { authorization: `Bearer ${token}` } });
      expect([r.status, r.headers.get("content-type"), await r.text()]).toEqual([200, "text/plain; charset=utf-8", "ok\n"]);
    }
    const post = await t.fetch("/healthz", { method: "POST" });
    expect(post.status).toBe(401);
    const sub = await t.fetch("/healthz/x");
    expect(sub.status).toBe(401);
  });

  it("has the process's and runtime's metrics (prom-client's defaults), and counts API requests by route template, method and status", async () => {
    await t.api("GET", "/v1/sandboxes");
    await t.api("GET", "/v1/sandboxes/no-such-sandbox");
    await t.api("GET", "/v1/sandboxes/no-such-sandbox");
    await t.fetch("/v1/nowhere");
    const m = await metricsOf(t);
    for (const family of ["process_cpu_user_seconds_total", "process_resident_memory_bytes", "nodejs_eventloop_lag_seconds", "nodejs_heap_size_used_bytes", "nodejs_version_info"]) expect(m.text, family).toContain(`\n${family}`);
    expect(m.value("sandgate_api_requests_total", { route: "/v1/sandboxes", method: "GET", status: "200" })).toBeGreaterThanOrEqual(1);
    expect(m.value("sandgate_api_requests_total", { route: "/v1/sandboxes/:name", method: "GET", status: "404" })).toBe(2);
    // An unknown path is "unmatched" (and refused for want of the token): never the path itself.
    expect(m.value("sandgate_api_requests_total", { route: "unmatched", method: "GET", status: "401" })).toBe(1);
    expect(m.text).not.toContain("no-such-sandbox");
    expect(m.text).not.toContain("nowhere");
    expect(m.value("sandgate_api_request_duration_seconds_count", { route: "/v1/sandboxes/:name", method: "GET" })).toBe(2);
  });

  it("parses as Prometheus text with every family; phases and transitions follow create, stop, start and delete", async () => {
    const first = await scrape(t);
    expect(first.type).toMatch(/^text\/plain; version=0\.0\.4/);
    const m0 = parseScrape(first.text);
    for (const [name, type] of FAMILIES) expect(m0.family(name).type, name).toBe(type);
    for (const f of m0.families) expect(f.help, f.name).not.toBe("");
    // Every phase is a series from the start, at 0.
    expect(m0.samples("sandgate_sandboxes").map((s) => s.labels.phase).sort()).toEqual(["Completed", "Deleting", "Error", "Provisioning", "Ready", "Recovering", "Stopped", "Stopping"]);
    expect(m0.samples("sandgate_sandboxes").every((s) => s.value === 0)).toBe(true);
    expect(m0.samples("sandgate_lifecycle_transitions_total")).toEqual([]);

    expect((await t.api("POST", "/v1/sandboxes", { name: "alpha" })).status).toBe(201);
    expect((await t.api("POST", "/v1/sandboxes", { name: "beta" })).status).toBe(201);
    await until("alpha", "Ready");
    await until("beta", "Ready");
    const m1 = await metricsOf(t);
    expect(m1.value("sandgate_sandboxes", { phase: "Ready" })).toBe(2);
    expect(m1.value("sandgate_lifecycle_transitions_total", { from: "none", to: "Provisioning", reason: "none" })).toBe(2);
    expect(m1.value("sandgate_lifecycle_transitions_total", { from: "Provisioning", to: "Ready", reason: "none" })).toBe(2);

    expect((await t.api("POST", "/v1/sandboxes/alpha/stop")).status).toBe(202);
    await until("alpha", "Stopped");
    const m2 = await metricsOf(t);
    expect(m2.value("sandgate_sandboxes", { phase: "Ready" })).toBe(1);
    expect(m2.value("sandgate_sandboxes", { phase: "Stopped" })).toBe(1);
    expect(m2.value("sandgate_lifecycle_transitions_total", { from: "Ready", to: "Stopping" })).toBe(1);
    expect(m2.value("sandgate_lifecycle_transitions_total", { from: "Stopping", to: "Stopped" })).toBe(1);

    expect((await t.api("POST", "/v1/sandboxes/alpha/start")).status).toBe(202);
    await until("alpha", "Ready");
    expect((await t.api("DELETE", "/v1/sandboxes/beta")).status).toBe(202);
    await until("beta", "gone");
    const m3 = await metricsOf(t);
    expect(m3.value("sandgate_sandboxes", { phase: "Ready" })).toBe(1);
    expect(m3.value("sandgate_sandboxes", { phase: "Stopped" })).toBe(0);
    expect(m3.value("sandgate_lifecycle_transitions_total", { from: "Stopped", to: "Provisioning" })).toBe(1);
    expect(m3.value("sandgate_lifecycle_transitions_total", { from: "Provisioning", to: "Ready" })).toBe(3);
    expect(m3.value("sandgate_lifecycle_transitions_total", { from: "Ready", to: "Deleting" })).toBe(1);
    expect(m3.value("sandgate_lifecycle_transitions_total", { from: "Deleting", to: "Deleted" })).toBe(1);
    expect(m3.value("sandgate_sandboxes", { phase: "Deleting" })).toBe(0);
  });

  it("labels a failure with its reason code, and no sandbox name, id or detail appears anywhere in the text", async () => {
    const names = ["tenant-acme-prod-7f3a", "customer-secret-project"];
    expect((await t.api("POST", "/v1/sandboxes", { name: names[0] })).status).toBe(201);
    expect((await t.api("POST", "/v1/sandboxes", { name: names[1], image: "does-not-exist:latest" })).status).toBe(201);
    await until(names[0]!, "Ready");
    await until(names[1]!, "Error");
    const ids = await Promise.all(names.map(async (n) => (await t.api("GET", `/v1/sandboxes/${n}`)).body.id as string));
    const m = await metricsOf(t);
    expect(m.value("sandgate_lifecycle_transitions_total", { from: "Provisioning", to: "Error", reason: "ProvisioningFailed" })).toBe(1);
    expect(m.value("sandgate_sandboxes", { phase: "Error" })).toBe(1);
    for (const secret of [...names, ...ids, "does-not-exist", "acme", "secret"]) expect(m.text).not.toContain(secret);
    // Every label value of Sandgate's own families comes from a fixed vocabulary: phases, reasons,
    // decisions, route templates (never a path), methods, statuses. (prom-client's process and
    // runtime families label handle types, heap spaces and GC kinds; the name check above covers them.)
    const ours = m.text.split("\n").filter((l) => l.startsWith("sandgate_")).join("\n");
    const values = new Set(Array.from(ours.matchAll(/="([^"]*)"/g), (x) => x[1]!));
    for (const v of values) expect(v, v).toMatch(/^(none|Deleted|Provisioning|Ready|Recovering|Stopping|Stopped|Completed|Error|Deleting|ProvisioningFailed|allow|deny|would_deny|out|in|unmatched|GET|HEAD|POST|PUT|DELETE|\/[a-z0-9/:._-]*|\d+\.\d+\.\d+|[0-9.e+-]+|\+Inf)$/);
    expect(m.text).toContain('route="/v1/sandboxes/:name"');
  });

  it("two gateways in one process keep their own registries", async () => {
    const other = await startTestGateway(new MemoryDriver());
    try {
      expect((await other.api("POST", "/v1/sandboxes", { name: "elsewhere" })).status).toBe(201);
      await eventually(async () => ((await other.api("GET", "/v1/sandboxes/elsewhere")).body.phase === "Ready" ? true : undefined), 30_000);
      expect((await metricsOf(other)).value("sandgate_sandboxes", { phase: "Ready" })).toBe(1);
      const mine = await metricsOf(t);
      expect(mine.value("sandgate_sandboxes", { phase: "Ready" })).toBe(0);
      expect(mine.samples("sandgate_lifecycle_transitions_total")).toEqual([]);
      // The other's token is not this one's.
      expect((await scrape(t, other.token)).status).toBe(401);
    } finally {
      await other.close();
    }
  });
});

describe("recoveries: from the store's committed events", () => {
  let dir: string;
  let clock: number;
  const spec = { env: {}, resources: { memoryMb: 64, cpus: 1, pids: 64 } };
  const T0 = Date.parse("2026-12-01T00:00:00.000Z");
  const sources = (store: Store): MetricSources => gatewaySources({ store, monitor: () => null, audit: noAudit });
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), "sg-metrics-"));
    clock = T0;
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  const open = () => Store.open(join(dir, "state.db"), { now: () => new Date(clock) });
  const move = async (store: Store, id: string, from: Phase, to: Phase, reason: { code: "RuntimeUnavailable"; detail: string } | null = null) =>
    expect(await store.transition(id, { expect: { phase: from, generation: 1 }, next: { phase: to, generation: 1, reason } })).not.toBeNull();

  it("observes how long a sandbox was Recovering, by where it went, across a gateway restart", async () => {
    let store = open();
    let metrics = new PrometheusMetrics(sources(store));
    observeLifecycle(store, metrics, (err) => {
      throw err;
    });
    for (const id of ["a", "b"]) {
      await store.createSandbox({ host: "h1", id, name: id, spec, policy: defaultPolicy() });
      await move(store, id, "Provisioning", "Ready");
    }
    clock = T0 + 10_000;
    await move(store, "a", "Ready", "Recovering");
    await move(store, "b", "Ready", "Recovering");
    clock = T0 + 12_500;
    await move(store, "a", "Recovering", "Ready");
    let m = parseScrape(await metrics.scrape());
    expect(m.value("sandgate_recovery_duration_seconds_count", { outcome: "Ready" })).toBe(1);
    expect(m.value("sandgate_recovery_duration_seconds_sum", { outcome: "Ready" })).toBe(2.5);
    expect(m.value("sandgate_recovery_duration_seconds_bucket", { outcome: "Ready", le: "1" })).toBe(0);
    expect(m.value("sandgate_recovery_duration_seconds_bucket", { outcome: "Ready", le: "2.5" })).toBe(1);

    // The gateway restarts while "b" is Recovering; the new one measures from the recorded entry.
    store.close();
    clock = T0 + 70_000;
    store = open();
    metrics = new PrometheusMetrics(sources(store));
    observeLifecycle(store, metrics, (err) => {
      throw err;
    });
    await move(store, "b", "Recovering", "Error", { code: "RuntimeUnavailable", detail: "deadline" });
    m = parseScrape(await metrics.scrape());
    expect(m.value("sandgate_recovery_duration_seconds_count", { outcome: "Error" })).toBe(1);
    expect(m.value("sandgate_recovery_duration_seconds_sum", { outcome: "Error" })).toBe(60);
    expect(m.value("sandgate_recovery_duration_seconds_count", { outcome: "Ready" })).toBeUndefined();
    expect(m.value("sandgate_lifecycle_transitions_total", { from: "Recovering", to: "Error", reason: "RuntimeUnavailable" })).toBe(1);
    store.close();
  });

  it("a metrics failure never fails the transition that was committed", async () => {
    const store = open();
    const seen: unknown[] = [];
    observeLifecycle(
      store,
      {
        transition: () => {
          throw new Error("metrics broke");
        },
        recovery: () => undefined,
      },
      (err) => seen.push(err),
    );
    await store.createSandbox({ host: "h1", id: "a", name: "a", spec, policy: defaultPolicy() });
    await move(store, "a", "Provisioning", "Ready");
    expect((await store.get("a"))?.phase).toBe("Ready");
    expect(seen).toHaveLength(2);
    store.close();
  });
});

describe("proxy decisions and the monitor: read from their owners at scrape", () => {
  it("counts the audit sink's decisions (repeats included, a tunnel's close not) and bytes, before its rate limit", async () => {
    const dir = mkdtempSync(join(tmpdir(), "sg-metrics-"));
    const store = Store.open(join(dir, "state.db"));
    const sink = new AuditSink(store, pino({ level: "silent" }), { burst: 3, ratePerSecond: 1, flushMs: 3_600_000 }, () => 0);
    const metrics = new PrometheusMetrics(gatewaySources({ store, monitor: () => null, audit: () => sink.stats() }));
    const ev = (decision: "allow" | "deny" | "would_deny", extra: Record<string, unknown> = {}) => ({ type: "egress" as const, time: "2026-12-01T00:00:00.000Z", decision, host: "secret-host.example", port: 443, protocol: "https" as const, ...extra });
    sink.accept("a", 1, ev("allow", { count: 3, bytesOut: 100, bytesIn: 2000 }));
    sink.accept("a", 1, ev("deny", { count: 2 }));
    sink.accept("a", 1, ev("would_deny", { bytesOut: 5, bytesIn: 7 }));
    // A tunnel's close carries its traffic but is not another decision; over the burst: dropped, still counted.
    sink.accept("a", 1, ev("allow", { activity: "close", bytesOut: 1, bytesIn: 1 }));
    sink.accept("a", 1, ev("deny"));
    const m = parseScrape(await metrics.scrape());
    expect(m.value("sandgate_proxy_decisions_total", { decision: "allow" })).toBe(3);
    expect(m.value("sandgate_proxy_decisions_total", { decision: "deny" })).toBe(3);
    expect(m.value("sandgate_proxy_decisions_total", { decision: "would_deny" })).toBe(1);
    expect(m.value("sandgate_proxy_bytes_total", { direction: "out" })).toBe(106);
    expect(m.value("sandgate_proxy_bytes_total", { direction: "in" })).toBe(2008);
    expect(m.value("sandgate_audit_records_dropped_total")).toBe(2);
    expect(m.text).not.toContain("secret-host");
    await sink.close();
    store.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("shows the monitor's Docker connection from its metrics(), and reads a malformed one as zeros", async () => {
    let counters: object = { dockerConnected: true, disconnects: 2, reconnectAttempts: 5, monitors: 7, recoveringNow: 1, classifications: {} };
    const store = Store.open(":memory:");
    const metrics = new PrometheusMetrics(gatewaySources({ store, monitor: () => ({ metrics: () => counters }), audit: noAudit }));
    let m = parseScrape(await metrics.scrape());
    expect(m.value("sandgate_monitor_docker_connected")).toBe(1);
    expect(m.value("sandgate_monitor_disconnects_total")).toBe(2);
    expect(m.value("sandgate_monitor_reconnect_attempts_total")).toBe(5);
    expect(m.value("sandgate_monitor_watched_sandboxes")).toBe(7);
    expect(m.value("sandgate_monitor_recovering_sandboxes")).toBe(1);
    counters = { dockerConnected: false, disconnects: 3, reconnectAttempts: 9, monitors: 7, recoveringNow: 7 };
    m = parseScrape(await metrics.scrape());
    expect(m.value("sandgate_monitor_docker_connected")).toBe(0);
    expect(m.value("sandgate_monitor_disconnects_total")).toBe(3);
    expect(m.value("sandgate_monitor_recovering_sandboxes")).toBe(7);
    expect(monitorCounts({ dockerConnected: "yes", disconnects: "many", monitors: Number.NaN })).toEqual({ connected: false, disconnects: 0, reconnectAttempts: 0, watched: 0, recovering: 0 });
    store.close();
  });
});
