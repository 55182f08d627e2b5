// The supervisor's resolver (dns-server.ts) with real clients: node's own resolver (c-ares,
// UDP) pointed at it, and raw TCP and UDP packets. Allowed names get their addresses, every
// other name NXDOMAIN without a lookup, other types nothing; hostile packets get FORMERR or
// nothing; lookups and TCP connections are bounded.
import dgram from "node:dgram";
import { Resolver } from "node:dns/promises";
import net from "node:net";
import packet from "dns-packet";
import { afterEach, describe, expect, it } from "vitest";
import { nameDecision, parsePolicyYaml, type NameDecision, type Policy } from "../../../src/policy/index.js";
import { createDnsServer, type DnsServer, type DnsServerOptions } from "../../../src/supervisor/dns-server.js";
import { eventually } from "../../support/gateway-fixture.js";

const policy = ((): Policy => {
  const r = parsePolicyYaml(`version: 1
network:
  rules:
    - name: api
      endpoints: [{ host: api.test, port: 443, protocol: https }, { host: "*.cdn.test", port: 443, protocol: https }]
`);
  if (!r.ok) throw new Error(r.errors.join());
  return r.policy;
})();

let server: DnsServer | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});

async function start(o: Partial<DnsServerOptions> = {}): Promise<{ port: number; lookups: string[]; decisions: [string, NameDecision, string][]; answers: [string, readonly string[]][] }> {
  const lookups: string[] = [];
  const decisions: [string, NameDecision, string][] = [];
  const answers: [string, readonly string[]][] = [];
  server = createDnsServer({
    decide: (name) => nameDecision(policy, name),
    resolve: async (name) => {
      lookups.push(name);
      if (name === "gone.cdn.test") throw Object.assign(new Error("not found"), { code: "ENOTFOUND" });
      return name === "api.test" ? ["192.0.2.10", "2001:db8::1", "192.0.2.11"] : ["192.0.2.20"];
    },
    onDecision: (n, d, t) => decisions.push([n, d, t]),
    onAnswer: (n, a) => answers.push([n, a]),
    ...o,
  });
  const { udp, tcp } = await server.listen(0, "127.0.0.1");
  expect(tcp).toBe(udp);
  return { port: udp, lookups, decisions, answers };
}

/** dns-packet decodes the rcode; its types do not say so. */
const rcodeOf = (p: packet.Packet): string | null => (p as { rcode?: string }).rcode ?? null;

const resolverAt = (port: number): Resolver => {
  const r = new Resolver({ timeout: 2000, tries: 1 });
  r.setServers([`127.0.0.1:${port}`]);
  return r;
};

function udpQuery(port: number, msg: Buffer): Promise<Buffer | null> {
  return new Promise((resolve) => {
    const s = dgram.createSocket("udp4");
    const timer = setTimeout(() => {
      s.close();
      resolve(null);
    }, 1000);
    s.on("message", (m) => {
      clearTimeout(timer);
      s.close();
      resolve(m);
    });
    s.send(msg, port, "127.0.0.1");
  });
}

describe("the supervisor's resolver", () => {
  it("answers an allowed name's IPv4 addresses and remembers them; a denied name is NXDOMAIN and never looked up", async () => {
    const s = await start();
    const r = resolverAt(s.port);
    expect((await r.resolve4("api.test")).sort()).toEqual(["192.0.2.10", "192.0.2.11"]);
    expect(await r.resolve4("x.CDN.test")).toEqual(["192.0.2.20"]);
    await expect(r.resolve4("evil.test")).rejects.toMatchObject({ code: "ENOTFOUND" });
    await expect(r.resolve4("cdn.test")).rejects.toMatchObject({ code: "ENOTFOUND" });
    // Other types of an allowed name: nothing (and no lookup); a name upstream does not know: NXDOMAIN.
    await expect(r.resolve6("api.test")).rejects.toMatchObject({ code: "ENODATA" });
    await expect(r.resolveTxt("api.test")).rejects.toMatchObject({ code: "ENODATA" });
    await expect(r.resolve4("gone.cdn.test")).rejects.toMatchObject({ code: "ENOTFOUND" });
    expect(s.lookups).toEqual(["api.test", "x.cdn.test", "gone.cdn.test"]);
    expect(s.answers).toEqual([["api.test", ["192.0.2.10", "192.0.2.11"]], ["x.cdn.test", ["192.0.2.20"]]]);
    expect(s.decisions.filter(([, d]) => !d.allow).map(([n, d, t]) => [n, d, t])).toEqual([
      ["evil.test", { allow: false, reason: "no_matching_rule" }, "A"],
      ["cdn.test", { allow: false, reason: "no_matching_rule" }, "A"],
    ]);
    expect(server!.stats()).toMatchObject({ queries: 7, nxdomain: 3, answered: 4, servfail: 0, formerr: 0 });
  });

  it("over TCP too (a length before each message), several on one connection", async () => {
    const s = await start();
    const sock = net.connect(s.port, "127.0.0.1");
    const q = (id: number, name: string): Buffer => {
      const m = packet.encode({ id, type: "query", flags: packet.RECURSION_DESIRED, questions: [{ type: "A", name }] });
      return Buffer.concat([Buffer.from([m.length >> 8, m.length & 255]), m]);
    };
    sock.write(Buffer.concat([q(1, "api.test"), q(2, "evil.test")]));
    let got = Buffer.alloc(0);
    sock.on("data", (b: Buffer) => (got = Buffer.concat([got, b])));
    const answers = await eventually(() => {
      const out: packet.Packet[] = [];
      let b = got;
      while (b.length >= 2 && b.length >= 2 + b.readUInt16BE(0)) {
        out.push(packet.decode(b.subarray(2, 2 + b.readUInt16BE(0))));
        b = b.subarray(2 + b.readUInt16BE(0));
      }
      return out.length === 2 ? out : undefined;
    }, 5000, "two answers");
    sock.destroy();
    expect(answers.map((a) => [a.id, rcodeOf(a), (a.answers ?? []).length]).sort()).toEqual([[1, "NOERROR", 2], [2, "NXDOMAIN", 0]]);
  });

  it("hostile packets: not DNS, a response, two questions, oversized: FORMERR when an id can be read, else nothing", async () => {
    const s = await start();
    const formerr = async (msg: Buffer): Promise<string | null> => {
      const a = await udpQuery(s.port, msg);
      return a === null ? null : rcodeOf(packet.decode(a));
    };
    expect(await formerr(Buffer.from("GET / HTTP/1.1\r\n\r\n"))).toBe("FORMERR");
    expect(await formerr(packet.encode({ id: 3, type: "response", questions: [{ type: "A", name: "api.test" }] }))).toBe("FORMERR");
    expect(await formerr(packet.encode({ id: 4, type: "query", questions: [{ type: "A", name: "api.test" }, { type: "A", name: "x.cdn.test" }] }))).toBe("FORMERR");
    expect(await formerr(Buffer.alloc(600, 1))).toBe("FORMERR");
    expect(await formerr(Buffer.from([7]))).toBeNull();
    expect(s.lookups).toEqual([]);
    // A TCP message longer than a query closes the connection.
    const sock = net.connect(s.port, "127.0.0.1");
    const closed = new Promise<void>((r) => sock.on("close", () => r()));
    sock.on("error", () => undefined);
    sock.write(Buffer.from([0x10, 0x00]));
    await closed;
  });

  it("no policy (lockdown): SERVFAIL for every name, no lookup; lookups past the bound: SERVFAIL", async () => {
    let locked = true;
    let release: () => void = () => undefined;
    const s = await start({
      decide: (name) => (locked ? null : nameDecision(policy, name)),
      resolve: (name) => new Promise((r) => (release = () => r(name === "api.test" ? ["192.0.2.10"] : []))),
      maxInflight: 1,
    });
    const r = resolverAt(s.port);
    await expect(r.resolve4("api.test")).rejects.toMatchObject({ code: "ESERVFAIL" });
    locked = false;
    const first = r.resolve4("api.test");
    await eventually(() => (server!.stats().queries === 2 ? true : undefined), 5000, "the first lookup in flight");
    await expect(resolverAt(s.port).resolve4("x.cdn.test")).rejects.toMatchObject({ code: "ESERVFAIL" });
    release();
    expect(await first).toEqual(["192.0.2.10"]);
    expect(server!.stats()).toMatchObject({ busy: 1, servfail: 2 });
  });
});
