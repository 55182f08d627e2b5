// TLS termination in the boundary, on loopback with real TLS on every leg: a node https
// client trusting only the sandbox CA, the terminator (leaf minted for the tunnel's
// host), and a TLS origin whose certificate the terminator verifies.
import http from "node:http";
import https from "node:https";
import net from "node:net";
import tls from "node:tls";
import { X509Certificate } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LeafCertificates, issueSandboxCa, type CaMaterial } from "../../../src/supervisor/tls/leaf-certs.js";
import { TlsTerminator, isCertificateError, type TerminatedTunnel } from "../../../src/supervisor/tls/terminate.js";

let sandboxCa: CaMaterial;
let originCa: CaMaterial;
let origin: https.Server;
let originPort: number;
let proxy: net.Server;
let proxyPort: number;
let terminator: TlsTerminator;
const seen: string[] = [];
/** The tunnel the next proxy connection stands for (the test plays the CONNECT). */
let nextTunnel: () => TerminatedTunnel;
let trustOrigin = true;
/** The workload-side TLS socket of the newest terminated connection. */
let terminated: tls.TLSSocket | undefined;
/** Bytes the origin's /flood handler has written; it writes only while its socket takes more. */
let flooded = 0;
const FLOOD_MAX = 64 << 20;

const listen = (s: net.Server): Promise<number> => new Promise((r) => s.listen(0, "127.0.0.1", () => r((s.address() as net.AddressInfo).port)));

beforeAll(async () => {
  sandboxCa = await issueSandboxCa("sbx_test");
  originCa = await issueSandboxCa("origin");
  const originLeafs = new LeafCertificates(originCa);
  origin = https.createServer({ SNICallback: (name, cb) => void originLeafs.context(name).then((c) => cb(null, c), cb) }, (req, res) => {
    if (req.url === "/flood") {
      const chunk = Buffer.alloc(64 << 10, 120);
      const more = (): void => {
        while (flooded < FLOOD_MAX) {
          flooded += chunk.length;
          if (!res.write(chunk)) return void res.once("drain", more);
        }
        res.end();
      };
      more();
      return;
    }
    res.end(`origin saw ${req.method} ${req.url} host=${req.headers.host}`);
  });
  originPort = await listen(origin);
  terminator = new TlsTerminator(new LeafCertificates(sandboxCa, { maxEntries: 16 }), (req, res, t) => {
    seen.push(`${t.host} ${req.method} ${req.url}`);
    if (req.url?.startsWith("/denied")) {
      res.writeHead(403, { "x-proxy-error": "sandgate-policy" }).end("denied");
      return;
    }
    const headers = Object.entries(req.headers).flatMap(([k, v]) => (k === "host" ? [] : [k, String(v)]));
    headers.push("Host", t.host);
    const up = terminator.request(t, { method: req.method ?? "GET", path: req.url ?? "/", headers, ca: trustOrigin ? originCa.certPem : undefined });
    up.on("response", (r) => {
      res.writeHead(r.statusCode ?? 502, r.headers);
      r.pipe(res);
    });
    up.on("error", (err) => res.writeHead(502, { "x-proxy-error": isCertificateError(err) ? "sandgate-upstream-tls" : "sandgate-upstream" }).end((err as NodeJS.ErrnoException).code));
    req.pipe(up);
  });
  proxy = net.createServer((socket) =>
    void terminator.terminate(socket, Buffer.alloc(0), nextTunnel()).then(
      (s) => (terminated = s),
      () => {},
    ),
  );
  proxyPort = await listen(proxy);
});
afterAll(() => {
  terminator.close();
  proxy.close();
  origin.close();
});

/** A request from a client that trusts only `ca`, as the workload would make it. */
function get(host: string, path: string, ca = sandboxCa.certPem): Promise<{ status: number; body: string; headers: http.IncomingHttpHeaders; peer: X509Certificate }> {
  nextTunnel = () => ({ host, port: originPort, address: "127.0.0.1" });
  return new Promise((resolve, reject) => {
    const req = https.request({ host: "127.0.0.1", port: proxyPort, servername: host, path, ca, agent: false, headers: { host }, checkServerIdentity: (_a, cert) => tls.checkServerIdentity(host, cert) }, (res) => {
      let body = "";
      res.on("data", (d: Buffer) => (body += d.toString()));
      const socket = res.socket;
      if (!(socket instanceof tls.TLSSocket)) throw new Error("not a TLS socket");
      const peer = new X509Certificate(socket.getPeerX509Certificate()!.raw);
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body, headers: res.headers, peer }));
    });
    req.on("error", reject);
    req.end();
  });
}

describe("TLS termination", () => {
  it("the workload's client verifies a leaf for the host signed by the sandbox CA; the request reaches the origin over verified TLS", async () => {
    const r = await get("api.origin.test", "/repos/a?x=1");
    expect(r.status).toBe(200);
    expect(r.body).toBe("origin saw GET /repos/a?x=1 host=api.origin.test");
    expect(r.peer.subjectAltName).toBe("DNS:api.origin.test");
    expect(r.peer.checkIssued(new X509Certificate(sandboxCa.certPem))).toBe(true);
    expect(seen.at(-1)).toBe("api.origin.test GET /repos/a?x=1");
  });

  it("each decrypted request is the proxy's to decide: a denied path never reaches the origin", async () => {
    const r = await get("api.origin.test", "/denied/x");
    expect(r.status).toBe(403);
    expect(r.body).toBe("denied");
  });

  it("an origin whose certificate does not verify is a 502 naming it, never a silent pass", async () => {
    trustOrigin = false;
    try {
      const r = await get("api.origin.test", "/x");
      expect(r.status).toBe(502);
      expect(r.headers["x-proxy-error"]).toBe("sandgate-upstream-tls");
    } finally {
      trustOrigin = true;
    }
  });

  it("a client that does not trust the sandbox CA fails its handshake; nothing is dispatched", async () => {
    const before = seen.length;
    await expect(get("api.origin.test", "/x", originCa.certPem)).rejects.toThrow(/self.signed|unable to verify|certificate/i);
    expect(seen.length).toBe(before);
  });
});

describe("leaf certificates", () => {
  it("one per host, cached; the cache holds at most maxEntries, least recently used out first", async () => {
    const leafs = new LeafCertificates(sandboxCa, { maxEntries: 2 });
    await leafs.context("a.test");
    await leafs.context("b.test");
    await leafs.context("a.test"); // hit: a is now the most recent
    expect(leafs.issued).toBe(2);
    await leafs.context("c.test"); // evicts b
    expect(leafs.size).toBe(2);
    await leafs.context("a.test");
    expect(leafs.issued).toBe(3);
    await leafs.context("b.test");
    expect(leafs.issued).toBe(4);
  });

  it("an IP literal gets an IP SAN; the CA may sign leaves only (path length 0)", async () => {
    const ca = new X509Certificate(sandboxCa.certPem);
    expect(ca.ca).toBe(true);
    expect(ca.subject).toMatch(/sbx_test/);
    nextTunnel = () => ({ host: "127.0.0.1", port: originPort, address: "127.0.0.1" });
    const peer = await new Promise<X509Certificate>((resolve, reject) => {
      const s = tls.connect({ host: "127.0.0.1", port: proxyPort, ca: sandboxCa.certPem }, () => {
        resolve(new X509Certificate(s.getPeerX509Certificate()!.raw));
        s.destroy();
      });
      s.on("error", reject);
    });
    expect(peer.subjectAltName).toBe("IP Address:127.0.0.1");
  });

  it("a workload that stops reading holds the origin back: the terminated socket buffers at most its high-water mark and a chunk", async () => {
    nextTunnel = () => ({ host: "flood.origin.test", port: originPort, address: "127.0.0.1" });
    flooded = 0;
    terminated = undefined;
    const client = tls.connect({ host: "127.0.0.1", port: proxyPort, servername: "flood.origin.test", ca: sandboxCa.certPem });
    try {
      await new Promise((r) => client.once("secureConnect", r));
      client.write("GET /flood HTTP/1.1\r\nHost: flood.origin.test\r\n\r\n");
      client.pause(); // reads nothing more: the kernel's buffers fill, then the proxy's, then the origin waits
      // Wait until the origin has sent more than the buffers between could take without it
      // waiting and then stopped: the same count on three readings 100 ms apart.
      const readings: number[] = [];
      for (;;) {
        await new Promise((r) => setTimeout(r, 100));
        readings.push(flooded);
        const last = readings.slice(-3);
        if (flooded >= FLOOD_MAX || (flooded > (1 << 20) && last.length === 3 && last.every((n) => n === flooded))) break;
      }
      expect(flooded).toBeLessThan(FLOOD_MAX);
      const socket = terminated as tls.TLSSocket | undefined; // set by the proxy's callback, which the compiler does not see
      // One chunk past the mark at most: the write that crossed it.
      expect(socket!.writableLength).toBeLessThanOrEqual(socket!.writableHighWaterMark + (64 << 10));
    } finally {
      client.destroy();
    }
  });
});
