// readClientHello on real ClientHellos (captured from node's TLS client on loopback),
// on every prefix of them, on hand-made malformed ones, and on random bytes.
import net from "node:net";
import tls from "node:tls";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { MAX_HELLO_BYTES, readClientHello } from "../../src/supervisor/tls/client-hello.js";

/** The first bytes node's TLS client sends for these options. */
async function capture(opts: tls.ConnectionOptions): Promise<Buffer> {
  const server = net.createServer();
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const port = (server.address() as net.AddressInfo).port;
  const got = new Promise<Buffer>((resolve) => {
    server.once("connection", (s) => {
      let buf = Buffer.alloc(0);
      s.on("data", (d: Buffer) => {
        buf = Buffer.concat([buf, d]);
        if (buf.length >= 5 && buf.length >= 5 + buf.readUInt16BE(3)) {
          resolve(buf.subarray(0, 5 + buf.readUInt16BE(3)));
          s.destroy();
        }
      });
    });
  });
  const client = tls.connect({ host: "127.0.0.1", port, rejectUnauthorized: false, ...opts });
  client.on("error", () => {});
  const hello = await got;
  client.destroy();
  server.close();
  return hello;
}

/** A minimal ClientHello with the given extensions block (type, body) pairs. */
function handmade(exts: Array<[number, Buffer]>, tweak: { sessionId?: number; suites?: number; compression?: number } = {}): Buffer {
  const extBytes = Buffer.concat(exts.map(([t, b]) => Buffer.concat([u16(t), u16(b.length), b])));
  const sid = tweak.sessionId ?? 0;
  const suites = tweak.suites ?? 2;
  const comp = tweak.compression ?? 1;
  const body = Buffer.concat([
    Buffer.from([0x03, 0x03]),
    Buffer.alloc(32, 7),
    Buffer.from([sid]),
    Buffer.alloc(sid),
    u16(suites),
    Buffer.alloc(suites, 0x13),
    Buffer.from([comp]),
    Buffer.alloc(comp),
    u16(extBytes.length),
    extBytes,
  ]);
  const hs = Buffer.concat([Buffer.from([0x01, body.length >> 16, (body.length >> 8) & 0xff, body.length & 0xff]), body]);
  return Buffer.concat([Buffer.from([0x16, 0x03, 0x01]), u16(hs.length), hs]);
}
function u16(n: number): Buffer {
  const b = Buffer.alloc(2);
  b.writeUInt16BE(n);
  return b;
}
const sni = (...names: string[]): [number, Buffer] => {
  const list = Buffer.concat(names.map((n) => Buffer.concat([Buffer.from([0]), u16(n.length), Buffer.from(n, "latin1")])));
  return [0, Buffer.concat([u16(list.length), list])];
};
const alpn = (...protos: string[]): [number, Buffer] => {
  const list = Buffer.concat(protos.map((p) => Buffer.concat([Buffer.from([p.length]), Buffer.from(p)])));
  return [0x10, Buffer.concat([u16(list.length), list])];
};

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
