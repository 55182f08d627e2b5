// The transparent path, started as one piece: the listener every redirected TCP connection of
// the workload reaches, the workload's resolver, and the UDP sink, on the supervisor's
// sandbox-network address (ports in src/protocol/launch.ts). The namespace's redirects that
// send the workload here are the gateway's (src/driver/docker/transparent-rules.ts).
import { DNS_PORT, TRANSPARENT_PORT, UDP_SINK_PORT } from "../../protocol/launch.js";
import { nameDecision, type NameDecision, type Policy } from "../../policy/core.js";
import type { EgressEntries, Resolver } from "../proxy/index.js";
import type { AuditEvent } from "../proxy/types.js";
import { loadOriginalDst } from "../original-dst.js";
import { createDnsServer, type DnsServerStats } from "../dns-server.js";
import { NameMemory } from "./name-memory.js";
import { createTransparentListener } from "./listener.js";
import { createUdpSink } from "./udp-sink.js";

export interface TransparentPathOptions {
  host: string;
  entries: EgressEntries;
  /** The policy in force; undefined under lockdown (the resolver then answers nothing). */
  policy: () => Policy | undefined;
  resolve: Resolver;
  onAudit: (event: AuditEvent) => void;
  /** The Node-API addon's path (beside the bundle in the image). */
  addonPath: string;
  maxConnections: number;
  /** Ports: the protocol's unless a test needs free ones. */
  ports?: { transparent: number; dns: number; udpSink: number };
}

export interface TransparentPath {
  readonly ports: { transparent: number; dns: number; udpSink: number };
  isListening(): boolean;
  stats(): { open: number; dns: DnsServerStats; udpDropped: number; names: number };
  close(): Promise<void>;
}

/** A denied name is a `dns_denied` decision in the audit trail (the aggregator folds repeats). */
function dnsRecord(name: string, d: NameDecision): AuditEvent | null {
  const base = { type: "egress" as const, time: new Date().toISOString(), host: name, port: 53, protocol: "dns" as const, via: "transparent" as const };
  if (!d.allow) return { ...base, decision: "deny", reason: "dns_denied", ...(d.rule === undefined ? {} : { rule: d.rule }) };
  if (d.wouldDeny !== undefined) return { ...base, decision: "would_deny", reason: "dns_denied", ...(d.wouldDeny.rule === undefined ? {} : { rule: d.wouldDeny.rule }) };
  return null;
}

export async function startTransparentPath(o: TransparentPathOptions): Promise<TransparentPath> {
  const ports = o.ports ?? { transparent: TRANSPARENT_PORT, dns: DNS_PORT, udpSink: UDP_SINK_PORT };
  // Loaded first: without it nothing of the path can work, and the supervisor must not start.
  const originalDst = loadOriginalDst(o.addonPath);
  const names = new NameMemory();
  const dns = createDnsServer({
    decide: (name) => {
      const p = o.policy();
      return p === undefined ? null : nameDecision(p, name);
    },
    resolve: o.resolve,
    onDecision: (name, d) => {
      const r = dnsRecord(name, d);
      if (r !== null) o.onAudit(r);
    },
    onAnswer: (name, addresses) => names.remember(name, addresses),
  });
  const listener = createTransparentListener({ entries: o.entries, originalDst, names, policy: o.policy, onAudit: o.onAudit, maxConnections: o.maxConnections });
  const sink = createUdpSink(o.onAudit);
  try {
    const t = await listener.listen(ports.transparent, o.host);
    const d = await dns.listen(ports.dns, o.host);
    const u = await sink.listen(ports.udpSink, o.host);
    const bound = { transparent: t.port, dns: d.udp, udpSink: u };
    return {
      ports: bound,
      isListening: () => listener.isListening(),
      stats: () => ({ open: listener.open, dns: dns.stats(), udpDropped: sink.dropped, names: names.size }),
      close: async () => {
        await Promise.all([listener.close(), dns.close(), sink.close()]);
      },
    };
  } catch (err) {
    await Promise.all([listener.close(), dns.close(), sink.close()]);
    throw err;
  }
}
