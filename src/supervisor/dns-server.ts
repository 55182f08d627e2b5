// The workload's resolver: UDP and TCP on the supervisor's sandbox-network address, where
// the namespace redirects every DNS packet the workload sends to any server. A name the
// policy allows (nameDecision) is looked up by the supervisor and its IPv4 addresses answered
// (each is remembered with the name: a raw TCP connection to one is decided by that name); any
// other name is NXDOMAIN, reported as a `dns_denied` decision, and nothing is asked upstream.
// Bounded: lookups in flight, TCP connections, their idle time and message size.
import dgram from "node:dgram";
import net from "node:net";
import type { NameDecision } from "../policy/core.js";
import { QUERY_MAX_BYTES, answer, formatError, parseQuery, type Query, type Rcode } from "./dns-answer.js";

export interface DnsServerOptions {
  /** The decision for a name under the policy in force; null when none is (lockdown): SERVFAIL. */
  decide: (name: string) => NameDecision | null;
  /** The supervisor's own lookup (cached, at the host's resolvers). */
  resolve: (name: string) => Promise<string[]>;
  /** Each answer's decision, for the audit trail (denied names above all). */
  onDecision?: (name: string, decision: NameDecision, type: string) => void;
  /** Told of every address answered for a name. */
  onAnswer?: (name: string, addresses: readonly string[]) => void;
  /** Lookups in flight at once; past it SERVFAIL. Default 64. */
  maxInflight?: number;
  /** TCP connections at once; past it a new one is closed. Default 16. */
  maxTcpConnections?: number;
  /** A TCP connection with no complete query for this long is closed. Default 10 s. */
  tcpIdleMs?: number;
}

export interface DnsServerStats {
  queries: number;
  answered: number;
  nxdomain: number;
  servfail: number;
  formerr: number;
  /** Lookups refused because `maxInflight` were running. */
  busy: number;
}

export interface DnsServer {
  listen(port: number, host: string): Promise<{ udp: number; tcp: number }>;
  stats(): DnsServerStats;
  close(): Promise<void>;
}

export function createDnsServer(o: DnsServerOptions): DnsServer {
  const maxInflight = o.maxInflight ?? 64;
  const maxTcp = o.maxTcpConnections ?? 16;
  const tcpIdleMs = o.tcpIdleMs ?? 10_000;
  const stats: DnsServerStats = { queries: 0, answered: 0, nxdomain: 0, servfail: 0, formerr: 0, busy: 0 };
  let inflight = 0;

  /** The answer to one query packet; null when nothing may be answered (no readable id). */
  const respond = async (buf: Buffer): Promise<Buffer | null> => {
    stats.queries++;
    const parsed = parseQuery(buf);
    if (!parsed.ok) {
      stats.formerr++;
      return formatError(parsed.id);
    }
    const q = parsed.query;
    const decision = o.decide(q.name);
    if (decision === null) return counted(q, "SERVFAIL");
    o.onDecision?.(q.name, decision, q.type);
    if (!decision.allow) return counted(q, "NXDOMAIN");
    if (q.type !== "A") return counted(q, "NOERROR");
    if (inflight >= maxInflight) {
      stats.busy++;
      return counted(q, "SERVFAIL");
    }
    inflight++;
    try {
      const addresses = (await o.resolve(q.name)).filter((a) => net.isIPv4(a));
      if (addresses.length > 0) o.onAnswer?.(q.name, addresses);
      return counted(q, addresses.length > 0 ? "NOERROR" : "NXDOMAIN", addresses);
    } catch (err) {
      // The name does not exist upstream, or the lookup failed.
      return counted(q, (err as NodeJS.ErrnoException).code === "ENOTFOUND" ? "NXDOMAIN" : "SERVFAIL");
    } finally {
      inflight--;
    }
  };
  const counted = (q: Query, rcode: Rcode, addresses: readonly string[] = []): Buffer => {
    if (rcode === "NXDOMAIN") stats.nxdomain++;
    else if (rcode === "SERVFAIL") stats.servfail++;
    else stats.answered++;
    return answer(q, rcode, addresses);
  };

  const udp = dgram.createSocket({ type: "udp4" });
  udp.on("message", (msg, rinfo) => {
    void respond(msg).then((out) => {
      if (out !== null) udp.send(out, rinfo.port, rinfo.address);
    });
  });
  udp.on("error", () => undefined);

  const open = new Set<net.Socket>();
  const tcp = net.createServer((s) => {
    if (open.size >= maxTcp) {
      s.destroy();
      return;
    }
    open.add(s);
    s.on("close", () => open.delete(s));
    s.on("error", () => undefined);
    s.setTimeout(tcpIdleMs, () => s.destroy());
    let buf = Buffer.alloc(0);
    s.on("data", (chunk: Buffer) => {
      buf = Buffer.concat([buf, chunk]);
      // Each message is prefixed by its length (RFC 1035 4.2.2).
      while (buf.length >= 2) {
        const len = buf.readUInt16BE(0);
        if (len > QUERY_MAX_BYTES) {
          s.destroy();
          return;
        }
        if (buf.length < 2 + len) return;
        const msg = buf.subarray(2, 2 + len);
        buf = buf.subarray(2 + len);
        void respond(Buffer.from(msg)).then((out) => {
          if (out === null || s.destroyed) return;
          const prefix = Buffer.alloc(2);
          prefix.writeUInt16BE(out.length);
          s.write(Buffer.concat([prefix, out]));
        });
      }
    });
  });

  return {
    async listen(port, host) {
      await new Promise<void>((resolve, reject) => {
        udp.once("error", reject);
        udp.bind(port, host, () => {
          udp.off("error", reject);
          resolve();
        });
      });
      // TCP on the port UDP got (port 0: a free one for both, as a resolver is one port).
      const bound = udp.address().port;
      await new Promise<void>((resolve, reject) => {
        tcp.once("error", reject);
        tcp.listen(bound, host, () => {
          tcp.off("error", reject);
          resolve();
        });
      });
      return { udp: udp.address().port, tcp: (tcp.address() as net.AddressInfo).port };
    },
    stats: () => ({ ...stats }),
    async close() {
      for (const s of open) s.destroy();
      await Promise.all([new Promise<void>((r) => udp.close(() => r())).catch(() => undefined), new Promise<void>((r) => (tcp.listening ? tcp.close(() => r()) : r()))]);
    },
  };
}
