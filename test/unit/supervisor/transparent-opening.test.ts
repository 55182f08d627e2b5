import { describe, expect, it } from "vitest";
import { classifyOpening } from "../../../src/supervisor/transparent/opening.js";
import { handmade, sni } from "../../support/client-hellos.js";

const b = (s: string): Buffer => Buffer.from(s, "latin1");

describe("what a transparent connection opens with", () => {
  it("an HTTP/1 request line, whole or not yet", () => {
    expect(classifyOpening(b("GET /x HTTP/1.1\r\nHost: a\r\n"))).toEqual({ kind: "http", method: "GET", target: "/x" });
    expect(classifyOpening(b("CONNECT a.test:443 HTTP/1.1\r\n"))).toEqual({ kind: "http", method: "CONNECT", target: "a.test:443" });
    expect(classifyOpening(b("POST http://a.test/ HTTP/1.0\r\n"))).toEqual({ kind: "http", method: "POST", target: "http://a.test/" });
    expect(classifyOpening(b("GE"))).toEqual({ kind: "incomplete" });
    expect(classifyOpening(b("GET /long"))).toEqual({ kind: "incomplete" });
    expect(classifyOpening(b(`GET /${"a".repeat(9000)}`))).toEqual({ kind: "other", why: "a request line over 8 KiB" });
  });

  it("anything else is raw: an HTTP/2 preface, a banner, binary, a malformed line", () => {
    for (const s of ["PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", "SSH-2.0-OpenSSH_9.2\r\n", "GET /x HTTP/2\r\n", "get me\r\n", "\x00\x01\x02", "HELLO WORLD\r\n"]) {
      expect(classifyOpening(b(s)).kind, JSON.stringify(s)).toBe("other");
    }
  });

  it("a TLS ClientHello, with its SNI (none for an IP), whole or not yet; a record that is no hello is raw", () => {
    const hello = handmade([sni("api.test")]);
    expect(classifyOpening(hello)).toEqual({ kind: "tls", serverName: "api.test", alpn: [] });
    expect(classifyOpening(hello.subarray(0, 10))).toEqual({ kind: "incomplete" });
    expect(classifyOpening(handmade([]))).toMatchObject({ kind: "tls", serverName: null });
    expect(classifyOpening(Buffer.from([0x16, 0x03, 0x01, 0x00, 0x05, 0x02, 0, 0, 1, 0]))).toMatchObject({ kind: "other" });
  });
});
