// ClientHellos for tests: captured from node's own TLS client on loopback, or made by hand.
import net from "node:net";
import tls from "node:tls";

/** The first bytes node's TLS client sends for these options. */
export async function capture(opts: tls.ConnectionOptions): Promise<Buffer> {
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
export function handmade(exts: Array<[number, Buffer]>, tweak: { sessionId?: number; suites?: number; compression?: number } = {}): Buffer {
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
export function u16(n: number): Buffer {
  const b = Buffer.alloc(2);
  b.writeUInt16BE(n);
  return b;
}
export const sni = (...names: string[]): [number, Buffer] => {
  const list = Buffer.concat(names.map((n) => Buffer.concat([Buffer.from([0]), u16(n.length), Buffer.from(n, "latin1")])));
  return [0, Buffer.concat([u16(list.length), list])];
};
export const alpn = (...protos: string[]): [number, Buffer] => {
  const list = Buffer.concat(protos.map((p) => Buffer.concat([Buffer.from([p.length]), Buffer.from(p)])));
  return [0x10, Buffer.concat([u16(list.length), list])];
};
