// What the workload is told when the proxy does not carry its request
// (src/supervisor/proxy/refusals.ts, pure): the bodies and the raw response around them.
import { describe, expect, it } from "vitest";
import { TimeoutError } from "../../../src/util/timeout.js";
import { certificateBody, denialBody, notAbsoluteForm, otherUpgrade, rawJsonResponse, unreachable, unreachableBody } from "../../../src/supervisor/proxy/refusals.js";
import type { Target } from "../../../src/supervisor/proxy/target.js";

const get: Target = { host: "h.test", port: 80, protocol: "http", method: "GET", path: "/a" };
const tunnel: Target = { host: "t.test", port: 443, protocol: "https", method: "CONNECT" };

describe("unreachable", () => {
  it("a timeout is 504, any other failure 502 with its code; no code or no Error still says something", () => {
    const timedOut = unreachable(new TimeoutError("connect to 1.2.3.4:80 timed out"));
    expect(timedOut).toEqual({ kind: "unreachable", status: 504, code: "ETIMEDOUT", message: "connect to 1.2.3.4:80 timed out" });
    expect(unreachable(Object.assign(new Error("refused"), { code: "ECONNREFUSED" }))).toEqual({ kind: "unreachable", status: 502, code: "ECONNREFUSED", message: "refused" });
    expect(unreachable(new Error("odd"))).toMatchObject({ status: 502, code: "EUPSTREAM", message: "odd" });
    expect(unreachable("text")).toMatchObject({ status: 502, code: "EUPSTREAM", message: "text" });
    expect(unreachable(undefined)).toMatchObject({ status: 502, code: "EUPSTREAM", message: "undefined" });
  });
});

describe("bodies", () => {
  it("a denial names the target, the reason and the rule (null when none), the address only when one was checked", () => {
    expect(denialBody(get, { kind: "deny", reason: "no_matching_rule" })).toStrictEqual({ error: "policy_denied", host: "h.test", port: 80, method: "GET", path: "/a", reason: "no_matching_rule", rule: null });
    expect(denialBody(tunnel, { kind: "deny", reason: "private_address", rule: "r", address: "10.0.0.1" })).toEqual({
      error: "policy_denied",
      host: "t.test",
      port: 443,
      method: "CONNECT",
      path: null,
      reason: "private_address",
      rule: "r",
      address: "10.0.0.1",
    });
  });

  it("an unreachable origin names the target, the failure, and the address dialled when there was one", () => {
    const o = unreachable(Object.assign(new Error("refused"), { code: "ECONNREFUSED" }));
    expect(unreachableBody(get, o)).toStrictEqual({ error: "upstream_unreachable", host: "h.test", port: 80, method: "GET", path: "/a", code: "ECONNREFUSED", message: "refused" });
    expect(unreachableBody(get, o, "127.0.0.1")).toMatchObject({ address: "127.0.0.1" });
  });

  it("a refused origin certificate names its code (TLS when it has none)", () => {
    expect(certificateBody(tunnel, Object.assign(new Error("self-signed"), { code: "DEPTH_ZERO_SELF_SIGNED_CERT" }))).toEqual({ error: "upstream_certificate", host: "t.test", port: 443, code: "DEPTH_ZERO_SELF_SIGNED_CERT", message: "self-signed" });
    expect(certificateBody(tunnel, new Error("x"))).toMatchObject({ code: "TLS" });
  });

  it("a request not in absolute form is told to use CONNECT for https:// (any case), else the absolute form", () => {
    expect(notAbsoluteForm("HTTPS://h/")).toEqual({ error: "bad_request", message: "https:// URLs must be tunnelled with CONNECT" });
    for (const url of ["/x", undefined, "https:/h", "/a?next=https://h"]) expect(notAbsoluteForm(url)).toEqual({ error: "bad_request", message: "this is a forward proxy: send absolute-form requests (GET http://host/path) or CONNECT" });
  });

  it("an upgrade other than WebSocket on GET names what was asked, quoted and cut at 60 characters", () => {
    expect(otherUpgrade("POST", "websocket")).toEqual({ error: "bad_request", message: 'only GET with "Upgrade: websocket" is relayed, got POST with "websocket"' });
    expect((otherUpgrade(undefined, "h2c".padEnd(100, "x")) as { message: string }).message).toBe(`only GET with "Upgrade: websocket" is relayed, got ? with "${"h2c".padEnd(60, "x")}"`);
  });
});

describe("rawJsonResponse", () => {
  it("a complete response that closes the connection, its length in bytes", () => {
    const body = { error: "policy_denied", host: "é.test" };
    const json = JSON.stringify(body);
    expect(rawJsonResponse(403, "sandgate-policy", body)).toBe(
      `HTTP/1.1 403 Forbidden\r\nX-Proxy-Error: sandgate-policy\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(json)}\r\nConnection: close\r\n\r\n${json}`,
    );
    expect(Buffer.byteLength(json)).toBe(json.length + 1);
  });

  it("says the status text of each status it is used with, and Error for any other", () => {
    const line = (status: number): string => rawJsonResponse(status, "x", {}).split("\r\n")[0]!;
    expect([400, 403, 502, 504, 500].map(line)).toEqual(["HTTP/1.1 400 Bad Request", "HTTP/1.1 403 Forbidden", "HTTP/1.1 502 Bad Gateway", "HTTP/1.1 504 Gateway Timeout", "HTTP/1.1 500 Error"]);
  });
});
