// The audit path is bounded at both ends: the supervisor aggregates repeats, the
// gateway rate-limits each sandbox, bounds its queue, counts what it drops, and
// writes in batches to the audit table (a real SQLite file).
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pino } from "pino";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { AuditSink } from "../../../src/gateway/audit/audit-sink.js";
import { toOcsf } from "../../../src/gateway/audit/ocsf.js";
import { defaultPolicy } from "../../../src/policy/index.js";
import { Store } from "../../../src/store/store.js";
import { AuditAggregator } from "../../../src/supervisor/audit-aggregator.js";
import type { AuditEvent } from "../../../src/supervisor/proxy/index.js";
import { startTestGateway } from "../../support/gateway-fixture.js";
import { MemoryDriver } from "../../support/memory-driver.js";

const ev = (host: string, decision: "allow" | "deny" = "deny", time = "2026-01-01T00:00:00.000Z"): AuditEvent => ({
  type: "egress",
  time,
  decision,
  host,
  port: 443,
  protocol: "https",
  ...(decision === "deny" ? { reason: "no_matching_rule" } : { rule: "api" }),
});

describe("AuditAggregator (supervisor)", () => {
  it("the first decision of a key goes out in full at once; repeats go out as one counted record per flush", () => {
    const out: AuditEvent[] = [];
    const a = new AuditAggregator((e) => out.push(e), { flushMs: 3_600_000 });
    a.record(ev("evil.test"));
    expect(out).toEqual([ev("evil.test")]);
    for (let i = 1; i <= 1000; i++) a.record(ev("evil.test", "deny", `2026-01-01T00:00:${String(i % 60).padStart(2, "0")}.000Z`));
    a.record(ev("api.test", "allow"));
    expect(out).toHaveLength(2);
    a.flush();
    expect(out).toHaveLength(3);
    expect(out[2]).toMatchObject({ host: "evil.test", count: 1000, since: "2026-01-01T00:00:01.000Z" });
    // Nothing repeated since: the next flush writes nothing.
    a.flush();
    expect(out).toHaveLength(3);
    a.close();
  });

  it("a key quiet for two flushes is forgotten: its next decision goes out in full again", () => {
    const out: AuditEvent[] = [];
    const a = new AuditAggregator((e) => out.push(e), { flushMs: 3_600_000 });
    a.record(ev("x.test"));
    a.flush();
    a.flush();
    a.record(ev("x.test"));
    expect(out.map((e) => e.count)).toEqual([undefined, undefined]);
    a.close();
  });

  it("remembers at most maxKeys keys; the least recently seen is flushed and forgotten first", () => {
    const out: AuditEvent[] = [];
    const a = new AuditAggregator((e) => out.push(e), { flushMs: 3_600_000, maxKeys: 3 });
    for (const h of ["a", "b", "c"]) a.record(ev(h));
    a.record(ev("a")); // a is now the most recent, b the least
    a.record(ev("b")); // a repeat of b
    a.record(ev("d")); // evicts c (least recently seen), which has no repeats
    expect(a.keys).toBe(3);
    a.record(ev("e")); // evicts a, flushing its one repeat
    expect(out.filter((e) => e.count !== undefined)).toEqual([{ ...ev("a"), count: 1, since: ev("a").time }]);
    a.close();
  });
});

describe("AuditAggregator: traffic and keys", () => {
  it("repeats' bytes and durations are summed into the counted record; activity and revision are part of the key", () => {
    const out: AuditEvent[] = [];
    const a = new AuditAggregator((e) => out.push(e), { flushMs: 3_600_000 });
    const req = (bytesIn: number, extra: Partial<AuditEvent> = {}): AuditEvent => ({ ...ev("api.test", "allow"), revision: 1, bytesOut: 10, bytesIn, durationMs: 5, ...extra });
    a.record(req(100));
    a.record(req(200));
    a.record(req(300));
    a.record(req(1, { activity: "close" })); // a close record is another key: out in full
    a.record(req(1, { revision: 2 })); // so is another revision
    expect(out).toHaveLength(3);
    a.flush();
    expect(out[3]).toMatchObject({ count: 2, bytesOut: 20, bytesIn: 500, durationMs: 10, revision: 1 });
    a.close();
  });
});

describe("AuditAggregator: only identical records are merged", () => {
  const req = (extra: Partial<AuditEvent> = {}): AuditEvent => ({ ...ev("api.test", "allow"), revision: 1, method: "GET", path: "/a", status: 200, bytesOut: 1, bytesIn: 2, durationMs: 3, ...extra });
  it("requests differing in method, path, status, outcome, route in or address are each a record of their own; the same request again is counted", () => {
    const out: AuditEvent[] = [];
    const a = new AuditAggregator((e) => out.push(e), { flushMs: 3_600_000 });
    const variants: Partial<AuditEvent>[] = [
      {},
      { method: "POST" },
      { path: "/abrupt2" },
      { status: 502 },
      { status: 502, reason: "upstream_certificate" },
      { via: "transparent" },
      { address: "192.0.2.1" },
      { activity: "close" },
      { lockdown: "boundary lost" },
      { method: undefined, path: undefined, status: undefined }, // the tunnel's own record
    ];
    for (const v of variants) a.record(req(v));
    expect(out).toHaveLength(variants.length);
    // Identical but for time and traffic: a repeat.
    a.record(req({ time: "2026-01-01T00:00:09.000Z", bytesIn: 5 }));
    a.record(req({ path: "/abrupt2", time: "2026-01-01T00:00:10.000Z" }));
    expect(out).toHaveLength(variants.length);
    a.flush();
    expect(out.slice(variants.length).map((e) => [e.path, e.count])).toEqual([
      ["/a", 1],
      ["/abrupt2", 1],
    ]);
    a.close();
  });
});

describe("OCSF: the audit trail as OCSF 1.3 events", () => {
  const rec = (decision: string, event: Record<string, unknown>, count = 1) => ({ seq: 42, sandboxId: "sb-1", generation: 3, time: "2026-12-01T10:00:00.000Z", decision, count, event });
  it("a tunnel's close is a Network Activity Close with its traffic; its opening an Open; a refused CONNECT a Refuse", () => {
    const close = toOcsf(rec("allow", { type: "egress", decision: "allow", activity: "close", host: "h.test", port: 443, protocol: "https", bytesOut: 10, bytesIn: 20, durationMs: 7, rule: "r" }));
    expect(close).toMatchObject({ class_uid: 4001, activity_id: 2, activity_name: "Close", type_uid: 400102, traffic: { bytes_out: 10, bytes_in: 20, bytes: 30 }, duration: 7, firewall_rule: { name: "r" }, action_id: 1 });
    expect(close.http_request).toBeUndefined();
    const open = toOcsf(rec("allow", { type: "egress", decision: "allow", host: "h.test", port: 443, protocol: "tcp" }));
    expect(open).toMatchObject({ class_uid: 4001, activity_id: 1, type_uid: 400101, connection_info: { protocol_name: "tcp", direction_id: 2 } });
    const refused = toOcsf(rec("deny", { type: "egress", decision: "deny", host: "h.test", port: 22, protocol: "https", reason: "no_matching_rule" }, 9), { sandboxName: "demo" });
    expect(refused).toMatchObject({ activity_id: 5, action: "Denied", action_id: 2, disposition_id: 2, severity_id: 3, status_id: 2, count: 9, status_detail: "no_matching_rule", src_endpoint: { uid: "sb-1", name: "demo" }, metadata: { uid: "42", version: "1.3.0", product: { name: "Sandgate" } } });
    expect(refused.time).toBe(Date.parse("2026-12-01T10:00:00.000Z"));
  });
  it("a request is an HTTP Activity by method (99 for others); a dropped marker is Other with its count; nothing undefined is written", () => {
    const patch = toOcsf(rec("would_deny", { type: "egress", decision: "would_deny", host: "h.test", port: 443, protocol: "https", method: "PATCH", path: "/a", reason: "method_not_allowed", status: 204 }));
    expect(patch).toMatchObject({ class_uid: 4002, activity_id: 99, activity_name: "Other", type_uid: 400299, action: "Allowed", disposition: "Logged", http_response: { code: 204 }, http_request: { http_method: "PATCH", url: { path: "/a", scheme: "https" } } });
    expect(patch.message).toBe("PATCH https://h.test:443/a allowed by audit mode, would deny (method_not_allowed)");
    const dropped = toOcsf(rec("dropped", { type: "dropped", reason: "audit_rate_limit" }, 120));
    expect(dropped).toMatchObject({ class_uid: 4001, activity_id: 99, count: 120, status_detail: "audit_rate_limit" });
    expect(JSON.stringify(patch)).not.toMatch(/undefined|null/);
  });
});

describe("AuditSink (gateway)", () => {
  let dir: string;
  let store: Store;
  beforeEach(async () => {
    dir = mkdtempSync(join(tmpdir(), "sg-audit-"));
    store = Store.open(join(dir, "state.db"));
    await store.createSandbox({ host: "h1", id: "a", name: "a", spec: { env: {}, resources: { memoryMb: 64, cpus: 1, pids: 64 } }, policy: defaultPolicy() });
  });
  afterEach(() => {
    store.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("rate-limits a sandbox's stream, counts the drops and records them as one `dropped` record; nothing reaches the event log", async () => {
    let now = 0;
    const sink = new AuditSink(store, pino({ level: "silent" }), { ratePerSecond: 10, burst: 20, flushMs: 3_600_000 }, () => now);
    for (let i = 0; i < 1000; i++) sink.accept("a", 1, ev(`h${i}.test`));
    await sink.flush();
    const rows = await store.audit("a", { limit: 10_000 });
    expect(rows.filter((r) => r.decision !== "dropped")).toHaveLength(20);
    expect(rows.filter((r) => r.decision === "dropped").map((r) => r.count)).toEqual([980]);
    expect(sink.stats()).toMatchObject({ accepted: 20, dropped: 980 });
    // The bucket refills with time.
    now += 1000;
    for (let i = 0; i < 100; i++) sink.accept("a", 1, ev(`later${i}.test`));
    await sink.flush();
    expect((await store.audit("a", { limit: 10_000 })).filter((r) => String(r.event.host).startsWith("later"))).toHaveLength(10);
    expect((await store.events("a")).map((e) => e.kind)).toEqual(["phase"]);
    await sink.close();
  });

  it("bounds the queue across sandboxes; aggregated counts are kept", async () => {
    const sink = new AuditSink(store, pino({ level: "silent" }), { ratePerSecond: 1e6, burst: 1e6, maxQueued: 5, flushMs: 3_600_000 });
    sink.accept("a", 1, { ...ev("agg.test"), count: 42 });
    for (let i = 0; i < 9; i++) sink.accept("a", 1, ev(`q${i}.test`));
    await sink.flush();
    const rows = await store.audit("a", { limit: 100 });
    expect(rows.find((r) => r.event.host === "agg.test")?.count).toBe(42);
    expect(rows.filter((r) => r.decision !== "dropped")).toHaveLength(5);
    expect(rows.find((r) => r.decision === "dropped")?.count).toBe(5);
    await sink.close();
  });

  it("keeps no trail for a sandbox that is gone", async () => {
    const sink = new AuditSink(store, pino({ level: "silent" }), { flushMs: 3_600_000 });
    sink.accept("gone", 1, ev("x.test"));
    await sink.flush();
    expect(await store.audit("gone")).toEqual([]);
    await sink.close();
  });
});

describe("the audit limits a user sets", () => {
  it("reach the sink and are shown by GET /v1/status", async () => {
    const t = await startTestGateway(new MemoryDriver(), { audit: { ratePerSecond: 7, burst: 28, audit: { perSandbox: 500, maxAgeMs: 12 * 3600_000 } } });
    try {
      const status = await t.api("GET", "/v1/status");
      expect(status.body.audit.limits).toEqual({ ratePerSecond: 7, burst: 28, keepPerSandbox: 500, maxAgeS: 43_200 });
    } finally {
      await t.close();
    }
  });
});
