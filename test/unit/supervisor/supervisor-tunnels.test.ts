// CONNECT tunnels that are not raw holes: a blind https tunnel opens only with a ClientHello
// for the CONNECT host; a tcp endpoint carries any bytes. Real sockets on loopback: node's
// TLS client, a TLS echo origin (certificate from a test CA), a TCP origin that records every
// byte it receives, and the real egress proxy in front. A second listener of the test's own
// (EgressProxy.entries, as the transparent path will use) gets what a CONNECT gets.
import net from "node:net";
import tls from "node:tls";
import type { AddressInfo } from "node:net";
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import { policyFromObject, type Policy } from "../../../src/policy/index.js";
import { PolicyHolder } from "../../../src/supervisor/policy-holder.js";
import { createEgressProxy, type AuditEvent, type EgressProxy, type Resolver, type TunnelAnswer } from "../../../src/supervisor/proxy/index.js";
import { silentLogger } from "../../../src/supervisor/logger.js";
import { LeafCertificates, issueSandboxCa, type CaMaterial } from "../../../src/supervisor/tls/leaf-certs.js";
import { connect, guarded, nextEvent, probe, sameDecision, secondListener } from "../../support/proxy-client.js";

const LOOPBACK = ["127.0.0.0/8"];
const cleanups: (() => Promise<void> | void)[] = [];
let originCa: CaMaterial;
let leafs: LeafCertificates;

beforeAll(async () => {
  originCa = await issueSandboxCa("tunnel origins");
  leafs = new LeafCertificates(originCa);
});

afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

function policyOf(rules: { name: string; endpoints: object[] }[], deny: object[] = []): Policy {
  const r = policyFromObject({ version: 1, network: { rules, deny } });
  if (!r.ok) throw new Error(`test policy invalid: ${r.errors.join("; ")}`);
  return r.policy;
}

/** Every *.test name is 127.0.0.1. */
const resolve: Resolver = (host) => Promise.resolve(host.endsWith(".test") ? ["127.0.0.1"] : []);

async function serve(server: net.Server, accepted: net.Socket[]): Promise<number> {
  server.on("connection", (s: net.Socket) => {
    accepted.push(s);
    s.on("error", () => undefined);
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  cleanups.push(() => new Promise<void>((r) => {
    for (const s of accepted) s.destroy();
    server.close(() => r());
  }));
  return (server.address() as AddressInfo).port;
}

/** A TCP origin that echoes and records every byte it received, per connection. */
async function startRecorder(): Promise<{ port: number; received: Buffer[]; accepted: net.Socket[]; allClosed: () => boolean }> {
  const received: Buffer[] = [];
  const accepted: net.Socket[] = [];
  const server = net.createServer((s) => {
    const i = received.push(Buffer.alloc(0)) - 1;
    s.on("data", (d: Buffer) => {
      received[i] = Buffer.concat([received[i]!, d]);
      s.write(d);
    });
  });
  const port = await serve(server, accepted);
  return { port, received, accepted, allClosed: () => accepted.every((s) => s.destroyed || s.readableEnded) };
}

/** A TLS echo origin presenting a leaf for each name asked (SNI), else for 127.0.0.1, signed by originCa. */
async function startTlsEcho(): Promise<{ port: number; accepted: net.Socket[] }> {
  const accepted: net.Socket[] = [];
  const ip = await leafs.issuePem("127.0.0.1");
  const server = tls.createServer({ cert: ip.certPem, key: ip.keyPem, SNICallback: (name, cb) => void leafs.context(name).then((c) => cb(null, c), cb) }, (s) => s.pipe(s));
  server.on("tlsClientError", () => undefined);
  const port = await serve(server, accepted);
  return { port, accepted };
}

async function startProxy(holder: PolicyHolder, opts: { helloTimeoutMs?: number } = {}): Promise<{ proxy: EgressProxy; port: number; audits: AuditEvent[] }> {
  const audits: AuditEvent[] = [];
  const proxy = createEgressProxy({ policy: holder, logger: silentLogger, onAudit: (e) => audits.push(e), resolve, ...opts });
  const { port } = await proxy.listen(0, "127.0.0.1");
  cleanups.push(() => proxy.close(0));
  return { proxy, port, audits };
}

const https = (host: string, port: number, extra: object = {}) => ({ host, port, protocol: "https", allowPrivate: LOOPBACK, ...extra });
const tcp = (host: string, port: number) => ({ host, port, protocol: "tcp", allowPrivate: LOOPBACK });

/** TLS over a CONNECT tunnel, trusting originCa; resolves once the handshake is done, or with the error/close. */
async function tlsOver(proxyPort: number, authority: string, opts: tls.ConnectionOptions): Promise<{ socket: tls.TLSSocket | null; outcome: string }> {
  const c = await connect(proxyPort, authority, cleanups);
  expect(c.status).toBe(200);
  const t = tls.connect({ socket: c.socket, ca: originCa.certPem, ...opts });
  cleanups.push(() => void t.destroy());
  return new Promise((r) => {
    t.once("secureConnect", () => r({ socket: t, outcome: "secure" }));
    t.once("error", (e: NodeJS.ErrnoException) => r({ socket: null, outcome: `error ${e.code ?? e.message}` }));
    t.once("close", () => r({ socket: null, outcome: "closed" }));
  });
}

describe("a blind https tunnel opens only with a ClientHello for the CONNECT host", () => {
  it("relays a ClientHello for the host (bytes unchanged: the origin's handshake completes) and audits one allow", async () => {
    const origin = await startTlsEcho();
    const holder = new PolicyHolder({ policy: policyOf([{ name: "blind", endpoints: [https("blind.test", origin.port)] }]), revision: 1 });
    const { port, audits } = await startProxy(holder);
    // The CONNECT authority in another case and with a trailing dot is the same host.
    const t = await tlsOver(port, `Blind.Test.:${origin.port}`, { servername: "blind.test" });
    expect(t.outcome).toBe("secure");
    expect(t.socket!.getPeerX509Certificate()!.subject).toContain("CN=blind.test");
    expect(await probe(t.socket!, "ping")).toBe("data:ping");
    expect(audits).toEqual([expect.objectContaining({ decision: "allow", protocol: "https", host: "blind.test", rule: "blind", address: "127.0.0.1" })]);
  });

  it("closes a tunnel whose SNI is another name (tls_sni_mismatch); the origin receives no byte", async () => {
    const origin = await startRecorder();
    const holder = new PolicyHolder({ policy: policyOf([{ name: "blind", endpoints: [https("blind.test", origin.port)] }]), revision: 1 });
    const { port, audits } = await startProxy(holder);
    const t = await tlsOver(port, `blind.test:${origin.port}`, { servername: "other.test" });
    expect(t.outcome).not.toBe("secure");
    await expect.poll(() => audits.length).toBe(1);
    expect(audits[0]).toMatchObject({ decision: "deny", protocol: "https", host: "blind.test", reason: "tls_sni_mismatch", rule: "blind", address: "127.0.0.1" });
    // The upstream connection was opened (an unreachable origin is a 502) but got nothing.
    await expect.poll(() => origin.accepted.length === 1 && origin.allClosed()).toBe(true);
    expect(origin.received[0]!.length).toBe(0);
  });

  it("closes a tunnel whose first bytes are not TLS (not_tls), and one whose ClientHello names no server (tls_sni_missing)", async () => {
    const origin = await startRecorder();
    const holder = new PolicyHolder({ policy: policyOf([{ name: "blind", endpoints: [https("blind.test", origin.port)] }]), revision: 1 });
    const { port, audits } = await startProxy(holder);
    const raw = await connect(port, `blind.test:${origin.port}`, cleanups);
    expect(raw.status).toBe(200);
    // An open raw tunnel would echo these bytes back.
    expect(await probe(raw.socket, "GET / HTTP/1.1\r\nHost: blind.test\r\n\r\n")).toBe("closed");
    await expect.poll(() => audits.length).toBe(1);
    expect(audits[0]).toMatchObject({ decision: "deny", reason: "not_tls", rule: "blind" });
    // node sends no SNI over a given socket unless told a name.
    const noName = await tlsOver(port, `blind.test:${origin.port}`, {});
    expect(noName.outcome).not.toBe("secure");
    await expect.poll(() => audits.length).toBe(2);
    expect(audits[1]).toMatchObject({ decision: "deny", reason: "tls_sni_missing" });
    await expect.poll(() => origin.accepted.length === 2 && origin.allClosed()).toBe(true);
    expect(origin.received.map((b) => b.length)).toEqual([0, 0]);
  });

  it("an IP literal CONNECT host: a ClientHello without SNI passes; one naming a server is refused", async () => {
    const origin = await startTlsEcho();
    const holder = new PolicyHolder({ policy: policyOf([{ name: "ip", endpoints: [https("127.0.0.1", origin.port)] }]), revision: 1 });
    const { port, audits } = await startProxy(holder);
    // No SNI: the origin presents its leaf for 127.0.0.1 (an IP SAN), verified for that address.
    const ok = await tlsOver(port, `127.0.0.1:${origin.port}`, { host: "127.0.0.1" });
    expect(ok.outcome).toBe("secure");
    expect(await probe(ok.socket!, "ip")).toBe("data:ip");
    expect(audits.at(-1)).toMatchObject({ decision: "allow", host: "127.0.0.1" });
    const fronted = await tlsOver(port, `127.0.0.1:${origin.port}`, { servername: "fronted.test" });
    expect(fronted.outcome).not.toBe("secure");
    await expect.poll(() => audits.at(-1)?.reason).toBe("tls_sni_mismatch");
  });

  it("a workload that sends nothing is closed after the hello timeout (tls_hello_timeout)", async () => {
    const origin = await startRecorder();
    const holder = new PolicyHolder({ policy: policyOf([{ name: "blind", endpoints: [https("blind.test", origin.port)] }]), revision: 1 });
    const { port, audits } = await startProxy(holder, { helloTimeoutMs: 200 });
    const c = await connect(port, `blind.test:${origin.port}`, cleanups);
    // One byte of a handshake record, then silence: still incomplete when the time is up.
    c.socket.write(Buffer.from([0x16]));
    expect(await nextEvent(c.socket)).toBe("closed");
    expect(audits).toEqual([expect.objectContaining({ decision: "deny", reason: "tls_hello_timeout" })]);
    await expect.poll(() => origin.allClosed()).toBe(true);
  });

  it("revocation closes a blind tunnel still waiting for its ClientHello, and its upstream connection; the CONNECT is audited allowed", async () => {
    const origin = await startRecorder();
    const holder = new PolicyHolder({ policy: policyOf([{ name: "blind", endpoints: [https("blind.test", origin.port)] }]), revision: 1 });
    const { proxy, port, audits } = await startProxy(holder);
    const c = await connect(port, `blind.test:${origin.port}`, cleanups);
    await expect.poll(() => origin.accepted.length).toBe(1);
    holder.replace(policyOf([]), 2);
    expect(proxy.revoke()).toEqual({ closed: 1, tunnels: 1, clients: 0, upstream: 0 });
    expect(await nextEvent(c.socket)).toBe("closed");
    await expect.poll(() => origin.allClosed()).toBe(true);
    await expect.poll(() => audits).toEqual([expect.objectContaining({ decision: "allow", host: "blind.test", rule: "blind" })]);
  });
});

describe("tcp endpoints carry any bytes", () => {
  it("a tcp endpoint's tunnel carries raw bytes (audited tcp); the same host:port under an https endpoint only is closed at them", async () => {
    const origin = await startRecorder();
    const holder = new PolicyHolder({ policy: policyOf([{ name: "raw", endpoints: [tcp("raw.test", origin.port)] }]), revision: 1 });
    const { port, audits } = await startProxy(holder);
    const raw = await connect(port, `raw.test:${origin.port}`, cleanups);
    expect(raw.status).toBe(200);
    expect(await probe(raw.socket, "SSH-2.0-test\r\n")).toBe("data:SSH-2.0-test\r\n");
    expect(audits).toEqual([expect.objectContaining({ decision: "allow", protocol: "tcp", host: "raw.test", rule: "raw" })]);

    holder.replace(policyOf([{ name: "tls", endpoints: [https("raw.test", origin.port)] }]), 2);
    const checked = await connect(port, `raw.test:${origin.port}`, cleanups);
    expect(await probe(checked.socket, "SSH-2.0-test\r\n")).toBe("closed");
    await expect.poll(() => audits.at(-1)?.reason).toBe("not_tls");
    expect(audits.at(-1)).toMatchObject({ protocol: "https" });
  });

  it("deny entries: one for tcp leaves the https endpoint to allow the tunnel, TLS-checked; one for https refuses the tcp endpoint too", async () => {
    const origin = await startTlsEcho();
    const both = [{ name: "raw", endpoints: [tcp("svc.test", origin.port)] }, { name: "tls", endpoints: [https("svc.test", origin.port)] }];
    const holder = new PolicyHolder({ policy: policyOf(both, [{ name: "no-raw", host: "svc.test", protocol: "tcp" }]), revision: 1 });
    const { port, audits } = await startProxy(holder);
    const c = await connect(port, `svc.test:${origin.port}`, cleanups);
    expect(await probe(c.socket, "not tls")).toBe("closed");
    await expect.poll(() => audits.at(-1)).toMatchObject({ decision: "deny", protocol: "https", reason: "not_tls", rule: "tls" });
    expect((await tlsOver(port, `svc.test:${origin.port}`, { servername: "svc.test" })).outcome).toBe("secure");

    holder.replace(policyOf(both.slice(0, 1), [{ name: "no-https", host: "svc.test", protocol: "https" }]), 2);
    expect((await connect(port, `svc.test:${origin.port}`, cleanups)).status).toBe(403);
    expect(audits.at(-1)).toMatchObject({ decision: "deny", reason: "explicit_deny", rule: "no-https" });
  });

  it("address checks apply: a tcp endpoint without allowPrivate never reaches loopback (403 private_address, audited tcp)", async () => {
    const origin = await startRecorder();
    const holder = new PolicyHolder({ policy: policyOf([{ name: "raw", endpoints: [{ host: "raw.test", port: origin.port, protocol: "tcp" }] }]), revision: 1 });
    const { port, audits } = await startProxy(holder);
    expect((await connect(port, `raw.test:${origin.port}`, cleanups)).status).toBe(403);
    expect(audits).toEqual([expect.objectContaining({ decision: "deny", protocol: "tcp", reason: "private_address", address: "127.0.0.1" })]);
    expect(origin.accepted).toHaveLength(0);
  });

  it("revocation: a raw tunnel closes when only an https endpoint still allows its host:port; a blind one when its endpoint now terminates", async () => {
    const raw = await startRecorder();
    const blind = await startTlsEcho();
    const rules = (rawEp: object, blindEp: object) => policyOf([{ name: "raw", endpoints: [rawEp] }, { name: "blind", endpoints: [blindEp] }]);
    const holder = new PolicyHolder({ policy: rules(tcp("raw.test", raw.port), https("blind.test", blind.port)), revision: 1 });
    const { proxy, port } = await startProxy(holder);
    const r = await connect(port, `raw.test:${raw.port}`, cleanups);
    expect(await probe(r.socket, "a")).toBe("data:a");
    const b = await tlsOver(port, `blind.test:${blind.port}`, { servername: "blind.test" });
    expect(await probe(b.socket!, "b")).toBe("data:b");

    // The same hosts and ports, still allowed as https: the blind tunnel stays, the raw one goes.
    holder.replace(rules(https("raw.test", raw.port), https("blind.test", blind.port)), 2);
    expect(proxy.revoke()).toMatchObject({ tunnels: 1 });
    expect(await probe(r.socket, "after")).toBe("closed");
    expect(await probe(b.socket!, "still")).toBe("data:still");

    // Now with L7 rules (terminated): a blind tunnel's requests cannot be seen, so it goes.
    holder.replace(rules(https("raw.test", raw.port), https("blind.test", blind.port, { rules: [{ methods: ["GET"] }] })), 3);
    expect(proxy.revoke()).toMatchObject({ tunnels: 1 });
    expect(await probe(b.socket!, "after")).toBe("closed");
  });
});

/** TEST answer of a socket that never asked for a tunnel: nothing said; a refusal closes it. */
const SILENT: TunnelAnswer = { established: () => undefined, refuse: (socket) => void socket.destroy() };

async function dial(port: number): Promise<net.Socket> {
  const s = net.connect(port, "127.0.0.1");
  s.on("error", () => undefined);
  cleanups.push(() => void s.destroy());
  await new Promise((r) => s.once("connect", r));
  return s;
}

describe("a second listener's socket, its target known otherwise, is carried as after a CONNECT to it", () => {
  it("tcp: the same allow record as the CONNECT's, bytes relayed both ways, and revocation closes it", async () => {
    const origin = await startRecorder();
    const holder = new PolicyHolder({ policy: policyOf([{ name: "raw", endpoints: [tcp("raw.test", origin.port)] }]), revision: 1 });
    const { proxy, port, audits } = await startProxy(holder);
    const second = await secondListener((s) => proxy.entries.tunnel(s, { host: "Raw.Test.", port: origin.port }, { head: Buffer.alloc(0), answer: SILENT }), cleanups);

    const viaConnect = await connect(port, `raw.test:${origin.port}`, cleanups);
    expect(viaConnect.status).toBe(200);
    expect(await probe(viaConnect.socket, "a")).toBe("data:a");
    const joined = await dial(second);
    expect(await probe(joined, "b")).toBe("data:b");
    expect(audits).toHaveLength(2);
    expect(sameDecision(audits[1]!)).toEqual(sameDecision(audits[0]!));
    expect(audits[0]).toMatchObject({ decision: "allow", protocol: "tcp", host: "raw.test", port: origin.port, rule: "raw", address: "127.0.0.1", revision: 1 });

    holder.replace(policyOf([]), 2);
    expect(proxy.revoke()).toMatchObject({ tunnels: 2 });
    expect(await probe(joined, "c")).toBe("closed");
  });

  it("a denied target: the same deny record as the CONNECT's, and the socket closed with nothing relayed", async () => {
    const origin = await startRecorder();
    const holder = new PolicyHolder({ policy: policyOf([]), revision: 3 });
    const { proxy, port, audits } = await startProxy(holder);
    const second = await secondListener((s) => proxy.entries.tunnel(s, { host: "raw.test", port: origin.port }, { head: Buffer.alloc(0), answer: SILENT }), cleanups);

    expect((await connect(port, `raw.test:${origin.port}`, cleanups)).status).toBe(403);
    expect(await probe(await dial(second), "x")).toBe("closed");
    expect(audits).toHaveLength(2);
    expect(sameDecision(audits[1]!)).toEqual(sameDecision(audits[0]!));
    expect(audits[0]).toMatchObject({ decision: "deny", host: "raw.test", revision: 3 });
    expect(origin.accepted).toHaveLength(0);
  });

  it("blind https: the ClientHello already read (head) passes the hello gate and reaches the origin first", async () => {
    const origin = await startTlsEcho();
    const holder = new PolicyHolder({ policy: policyOf([{ name: "blind", endpoints: [https("blind.test", origin.port)] }]), revision: 1 });
    const { proxy, audits } = await startProxy(holder);
    // As the transparent path will: the first bytes are read before the target is known.
    const second = await secondListener(
      (s) =>
        s.once("data", (head: Buffer) => {
          s.pause();
          guarded(s, () => proxy.entries.tunnel(s, { host: "blind.test", port: origin.port }, { head, answer: SILENT }));
        }),
      cleanups,
    );
    const t = tls.connect({ host: "127.0.0.1", port: second, servername: "blind.test", ca: originCa.certPem });
    t.on("error", () => undefined);
    cleanups.push(() => void t.destroy());
    const handshake = await new Promise((r) => {
      t.once("secureConnect", () => r("secure"));
      t.once("close", () => r("closed"));
    });
    expect(handshake).toBe("secure");
    expect(t.getPeerX509Certificate()!.subject).toContain("CN=blind.test");
    expect(await probe(t, "over tls")).toBe("data:over tls");
    expect(audits).toEqual([expect.objectContaining({ decision: "allow", protocol: "https", host: "blind.test", rule: "blind", address: "127.0.0.1" })]);
  });
});
