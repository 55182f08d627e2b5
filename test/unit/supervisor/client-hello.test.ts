// readClientHello on real ClientHellos (captured from node's TLS client on loopback),
// on every prefix of them, on hand-made malformed ones, and on random bytes.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { MAX_HELLO_BYTES, readClientHello } from "../../../src/supervisor/tls/client-hello.js";
import { alpn, capture, handmade, sni, u16 } from "../../support/client-hellos.js";

describe("readClientHello on node's own ClientHellos", () => {
  it("reads the server name and the ALPN list", async () => {
    const hello = await capture({ servername: "API.Example.com", ALPNProtocols: ["h2", "http/1.1"] });
    expect(readClientHello(hello)).toEqual({ kind: "hello", serverName: "api.example.com", alpn: ["h2", "http/1.1"] });
  });

  it("no SNI when connecting to an IP address (node sends none)", async () => {
    const hello = await capture({});
    expect(readClientHello(hello)).toEqual({ kind: "hello", serverName: null, alpn: [] });
  });

  it("every strict prefix is incomplete, never a verdict", async () => {
    const hello = await capture({ servername: "a.test" });
    for (let n = 0; n < hello.length; n++) expect(readClientHello(hello.subarray(0, n)).kind, `prefix ${n}`).toBe("incomplete");
    // Bytes after the record (the client's next flight) change nothing.
    expect(readClientHello(Buffer.concat([hello, Buffer.from("more")]))).toMatchObject({ kind: "hello", serverName: "a.test" });
  });
});

describe("readClientHello refuses what is not a ClientHello", () => {
  it.each([
    ["plain HTTP", Buffer.from("GET / HTTP/1.1\r\n"), "the first byte is not a TLS handshake record"],
    ["SSH banner", Buffer.from("SSH-2.0-x\r\n"), "the first byte is not a TLS handshake record"],
    ["SSL 3.0 / unknown version", Buffer.from([0x16, 0x03, 0x00, 0x00, 0x10]), "not a TLS 1.x record version"],
    ["version 3.5", Buffer.from([0x16, 0x03, 0x05, 0x00, 0x10]), "not a TLS 1.x record version"],
    ["record too long", Buffer.from([0x16, 0x03, 0x01, 0x40, 0x01]), "record length 16385 out of range"],
    ["record too short", Buffer.from([0x16, 0x03, 0x01, 0x00, 0x03]), "record length 3 out of range"],
    ["a ServerHello", Buffer.from([0x16, 0x03, 0x03, 0x00, 0x10, 0x02]), "the first handshake message is not a ClientHello"],
  ])("%s", (_, bytes, reason) => {
    expect(readClientHello(bytes)).toEqual({ kind: "not-tls", reason });
  });

  it("malformed inside: lengths past the end, repeated extensions, two names, bad names, empty ALPN", () => {
    const bad = (b: Buffer) => readClientHello(b);
    expect(bad(handmade([sni("a.test"), sni("b.test")]))).toEqual({ kind: "not-tls", reason: "extension 0 repeated" });
    expect(bad(handmade([[0, Buffer.concat([u16(18), Buffer.from([0]), u16(6), Buffer.from("a.test"), Buffer.from([0]), u16(6), Buffer.from("b.test")])]]))).toEqual({ kind: "not-tls", reason: "two host names in server_name" });
    for (const name of ["", "a b.test", "a..test", "-a.test", "a.test\u0000.evil", "x".repeat(254)]) {
      expect(bad(handmade([sni(name)])), JSON.stringify(name)).toEqual({ kind: "not-tls", reason: "server_name is not a host name" });
    }
    expect(bad(handmade([alpn("")]))).toEqual({ kind: "not-tls", reason: "empty ALPN protocol name" });
    expect(bad(handmade([], { sessionId: 33 }))).toEqual({ kind: "not-tls", reason: "session id longer than 32 bytes" });
    expect(bad(handmade([], { suites: 0 }))).toEqual({ kind: "not-tls", reason: "no cipher suites" });
    expect(bad(handmade([], { suites: 3 }))).toEqual({ kind: "not-tls", reason: "no cipher suites" });
    expect(bad(handmade([], { compression: 0 }))).toEqual({ kind: "not-tls", reason: "no compression methods" });
    // An extension length that runs past the block.
    const h = handmade([sni("a.test")]);
    const cut = Buffer.from(h);
    cut.writeUInt16BE(0xffff, h.length - (2 + 2 + 1 + 2 + 6)); // the SNI extension's length
    expect(bad(cut)).toEqual({ kind: "not-tls", reason: "a length runs past the ClientHello" });
  });

  it("a well-formed hand-made hello: SNI (a trailing dot dropped, other name types skipped) and ALPN", () => {
    const other: [number, Buffer] = [0, Buffer.concat([u16(13), Buffer.from([1]), u16(1), Buffer.from("x"), Buffer.from([0]), u16(6), Buffer.from("a.test")])];
    expect(readClientHello(handmade([other, alpn("http/1.1")]))).toEqual({ kind: "hello", serverName: "a.test", alpn: ["http/1.1"] });
    expect(readClientHello(handmade([sni("b.test.")]))).toEqual({ kind: "hello", serverName: "b.test", alpn: [] });
    expect(readClientHello(handmade([]))).toEqual({ kind: "hello", serverName: null, alpn: [] });
  });

  it("random bytes, and random bytes after a TLS record header: a verdict, never a throw; incomplete only below the record's end", () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 600 }), fc.boolean(), (raw, header) => {
        const b = header ? Buffer.concat([Buffer.from([0x16, 0x03, 0x01, raw.length >> 8, raw.length & 0xff, 0x01]), raw]) : Buffer.from(raw);
        const v = readClientHello(b);
        expect(["incomplete", "not-tls", "hello"]).toContain(v.kind);
        if (v.kind === "incomplete") expect(b.length).toBeLessThan(MAX_HELLO_BYTES);
      }),
      { seed: 4242, numRuns: 2000 },
    );
  });
});
