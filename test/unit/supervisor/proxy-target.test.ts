// The proxy's targets, read from what the workload sent (src/supervisor/proxy/target.ts, pure):
// an absolute-form http:// request, a CONNECT authority, a host:port known otherwise.
import { describe, expect, it } from "vitest";
import { connectTarget, httpsAuthority, normalizeHost, parseAbsoluteHttp, parseConnectTarget } from "../../../src/supervisor/proxy/target.js";

describe("parseAbsoluteHttp", () => {
  it("reads host (normalized), port, the path without its query for decisions and with it for upstream, the authority as sent", () => {
    expect(parseAbsoluteHttp("http://Example.COM./a/b?x=1", "POST")).toEqual({
      host: "example.com",
      port: 80,
      protocol: "http",
      method: "POST",
      path: "/a/b",
      authority: "example.com.",
      requestPath: "/a/b?x=1",
    });
    expect(parseAbsoluteHttp("HTTP://h:8080/", "GET")).toMatchObject({ host: "h", port: 8080, authority: "h:8080", requestPath: "/" });
    expect(parseAbsoluteHttp("http://[::1]:81/p", "GET")).toMatchObject({ host: "::1", port: 81, authority: "[::1]:81" });
    // Credentials in the URL never reach the authority sent upstream.
    expect(parseAbsoluteHttp("http://u:p@h/x", "GET")).toMatchObject({ host: "h", authority: "h", requestPath: "/x" });
  });

  it("anything but an absolute http:// URL is no target", () => {
    for (const url of [undefined, "/origin/form", "https://h/", "ftp://h/", "ftp://h/?http://x", "http://", "ws://h/"]) expect(parseAbsoluteHttp(url, "GET")).toBeUndefined();
  });
});

describe("parseConnectTarget", () => {
  it("reads host:port (a name normalized, an IPv6 literal in brackets) as a CONNECT target", () => {
    expect(parseConnectTarget("H.Example.:443")).toEqual({ host: "h.example", port: 443, protocol: "https", method: "CONNECT" });
    expect(parseConnectTarget("[::FFFF:1.2.3.4]:5")).toEqual({ host: "::ffff:1.2.3.4", port: 5, protocol: "https", method: "CONNECT" });
    expect(parseConnectTarget("10.0.0.1:65535")).toMatchObject({ host: "10.0.0.1", port: 65535 });
    expect(parseConnectTarget("h:1")).toMatchObject({ port: 1 });
  });

  it("refuses no port, port 0 or above 65535, a path, user info, and brackets around anything but IPv6", () => {
    for (const a of [undefined, "", "h", "h:", "h:0", "h:65536", "h:123456", "h:80/x", "u@h:80", "[1.2.3.4]:443", "[h]:443", "h :80", ":80"]) expect(parseConnectTarget(a)).toBeUndefined();
  });
});

describe("connectTarget, normalizeHost, httpsAuthority", () => {
  it("a host:port known otherwise becomes the same target a CONNECT to it would be", () => {
    expect(connectTarget("Blind.Test.", 443)).toEqual(parseConnectTarget("blind.test:443"));
    expect(connectTarget("[::1]", 22)).toEqual({ host: "::1", port: 22, protocol: "https", method: "CONNECT" });
  });

  it("normalizes case, IPv6 brackets and one trailing dot", () => {
    expect(normalizeHost("WWW.Example.Org.")).toBe("www.example.org");
    expect(normalizeHost("[FE80::1]")).toBe("fe80::1");
    expect(normalizeHost("a.b")).toBe("a.b");
    // Brackets only as a pair.
    expect(normalizeHost("[fe80::1")).toBe("[fe80::1");
    expect(normalizeHost("fe80::1]")).toBe("fe80::1]");
  });

  it("names the port in an https Host header only when it is not 443", () => {
    expect(httpsAuthority("h.test", 443)).toBe("h.test");
    expect(httpsAuthority("h.test", 8443)).toBe("h.test:8443");
  });
});
