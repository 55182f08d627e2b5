// The shape of the proxy's audit records (src/supervisor/proxy/audit-record.ts, pure): the
// same decision gives the same record on any path, fields in the same order, and a field it
// does not have is absent, never undefined (toStrictEqual).
import { describe, expect, it } from "vitest";
import { closeRecord, connectionLimitRecord, decisionRecord, exchangeRecord } from "../../../src/supervisor/proxy/audit-record.js";
import type { Target } from "../../../src/supervisor/proxy/target.js";

const T0 = "2026-01-01T00:00:00.000Z";
const get: Target = { host: "h.test", port: 80, protocol: "http", method: "GET", path: "/a" };
const tunnel: Target = { host: "t.test", port: 443, protocol: "tcp", method: "CONNECT" };

describe("decisionRecord", () => {
  it("an allow: rule, method, path, address and revision, in this order", () => {
    const r = decisionRecord(get, { kind: "allow", rule: "web", address: "10.0.0.1" }, 7, T0);
    expect(r).toStrictEqual({ type: "egress", time: T0, decision: "allow", host: "h.test", port: 80, protocol: "http", rule: "web", method: "GET", path: "/a", address: "10.0.0.1", revision: 7 });
    expect(Object.keys(r)).toEqual(["type", "time", "decision", "host", "port", "protocol", "rule", "method", "path", "address", "revision"]);
  });

  it("a deny: its reason, its rule when one decided, never a method for a tunnel, no revision without a policy", () => {
    expect(decisionRecord(tunnel, { kind: "deny", reason: "policy_missing" }, undefined, T0)).toStrictEqual({ type: "egress", time: T0, decision: "deny", host: "t.test", port: 443, protocol: "tcp", reason: "policy_missing" });
    expect(decisionRecord(tunnel, { kind: "deny", reason: "private_address", rule: "r", address: "127.0.0.1" }, 2, T0)).toStrictEqual({
      type: "egress",
      time: T0,
      decision: "deny",
      host: "t.test",
      port: 443,
      protocol: "tcp",
      reason: "private_address",
      rule: "r",
      address: "127.0.0.1",
      revision: 2,
    });
  });

  it("audit mode: would_deny, with the reason and the rule an enforcing policy would have refused it by", () => {
    expect(decisionRecord(get, { kind: "allow", rule: "(audit)", wouldDeny: { reason: "path_not_allowed", rule: "web" } }, 1, T0)).toMatchObject({ decision: "would_deny", reason: "path_not_allowed", rule: "web" });
    // No rule refused it (nothing matched): the allowing rule is named.
    expect(decisionRecord(get, { kind: "allow", rule: "(audit)", wouldDeny: { reason: "no_matching_rule" } }, 1, T0)).toMatchObject({ decision: "would_deny", reason: "no_matching_rule", rule: "(audit)" });
  });
});

describe("records that follow a decision", () => {
  const opened = decisionRecord(get, { kind: "allow", rule: "web", address: "10.0.0.1" }, 1, T0);

  it("an exchange adds what moved, how long, the status; the decision's record is left as it was", () => {
    const before = { ...opened };
    expect(exchangeRecord(opened, { bytesOut: 10, bytesIn: 20 }, 5, 201)).toEqual({ ...opened, bytesOut: 10, bytesIn: 20, durationMs: 5, status: 201 });
    expect(opened).toEqual(before);
  });

  it("a close is the opening record at its own time, marked close, with what moved", () => {
    const at = "2026-01-01T00:01:00.000Z";
    expect(closeRecord(opened, at, { bytesOut: 1, bytesIn: 2, durationMs: 60_000 })).toEqual({ ...opened, time: at, activity: "close", bytesOut: 1, bytesIn: 2, durationMs: 60_000 });
    expect(opened.time).toBe(T0);
  });

  it("a connection refused past the cap names the proxy address it reached (empty when unknown)", () => {
    expect(connectionLimitRecord({ localAddress: "10.1.0.2", localPort: 3128, remoteAddress: "10.1.0.3" }, T0)).toEqual({ type: "egress", time: T0, decision: "deny", reason: "connection_limit", host: "10.1.0.2", port: 3128, protocol: "tcp" });
    expect(connectionLimitRecord({ localAddress: undefined, localPort: undefined, remoteAddress: undefined }, T0)).toMatchObject({ host: "", port: 0 });
  });
});
