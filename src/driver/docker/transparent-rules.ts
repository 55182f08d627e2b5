// The transparent egress path's kernel state, as pure text: the nftables ruleset the gateway
// loads into a supervisor's network namespace, the route it gives the workload, and the
// checks that read them back. The I/O (nsenter, nft, ip) is netns.ts.
//
// The workload's default route is its supervisor's address on the sandbox network, so every
// packet it sends off its /28 arrives at the supervisor, where:
//   - TCP to any address but the supervisor's own is redirected to the transparent listener
//     (the original destination stays in conntrack: SO_ORIGINAL_DST, src/supervisor/original-dst.ts);
//   - DNS (port 53, UDP or TCP, to any server) is redirected to the supervisor's resolver;
//   - any other UDP is redirected to a sink that counts and drops it (audited);
//   - ICMP and every other protocol are dropped and counted here (named counters);
//   - nothing is forwarded: ip_forward is 0 in the namespace (a container sysctl) and the
//     forward hook drops all, so a packet the redirect misses goes nowhere.
// TCP to the supervisor's own address reaches only what it listens on there (the proxy).
// The workload cannot change any of it: it holds no capability (no NET_ADMIN, no NET_RAW).

import { DNS_PORT, PROXY_PORT, TRANSPARENT_PORT, UDP_SINK_PORT } from "../../protocol/launch.js";

export const TABLE = "sandgate";
/** Named counters of what the supervisor's namespace drops for the workload. */
export const DROP_COUNTERS = ["icmp_dropped", "other_dropped", "forward_dropped"] as const;
export type DropCounter = (typeof DROP_COUNTERS)[number];

export interface TransparentTargets {
  /** The sandbox network's subnet (the workload's source addresses). */
  subnet: string;
  /** The supervisor's address on it (the workload's gateway). */
  supervisorIp: string;
}

/**
 * The ruleset, replacing any table of ours (an `nft -f` transaction: all or nothing). The
 * priorities: the guard (a filter at prerouting, -150) runs before the redirect (nat, -100).
 */
export function supervisorRuleset(t: TransparentTargets): string {
  const from = `ip saddr ${t.subnet}`;
  return [
    `add table ip ${TABLE}`,
    `delete table ip ${TABLE}`,
    `table ip ${TABLE} {`,
    ...DROP_COUNTERS.map((c) => `  counter ${c} { }`),
    `  chain guard {`,
    `    type filter hook prerouting priority -150; policy accept;`,
    `    ${from} meta l4proto { tcp, udp } accept`,
    `    ${from} meta l4proto icmp counter name icmp_dropped drop`,
    `    ${from} counter name other_dropped drop`,
    `  }`,
    `  chain intercept {`,
    `    type nat hook prerouting priority -100; policy accept;`,
    `    ${from} meta l4proto { tcp, udp } th dport 53 redirect to :${DNS_PORT}`,
    `    ${from} ip daddr != ${t.supervisorIp} meta l4proto tcp redirect to :${TRANSPARENT_PORT}`,
    `    ${from} meta l4proto udp redirect to :${UDP_SINK_PORT}`,
    `  }`,
    `  chain noforward {`,
    `    type filter hook forward priority 0; policy drop;`,
    `    counter name forward_dropped`,
    `  }`,
    `}`,
    "",
  ].join("\n");
}

/** The workload's default route: via its supervisor. */
export const workloadRouteArgs = (supervisorIp: string): string[] => ["route", "replace", "default", "via", supervisorIp];

/** What must be true in the namespaces, checked from what `nft -j list table` and `ip -j route` print. */
export function rulesetProblem(nftJson: string, t: TransparentTargets): string | null {
  let doc: { nftables?: Record<string, unknown>[] };
  try {
    doc = JSON.parse(nftJson) as { nftables?: Record<string, unknown>[] };
  } catch {
    return "the supervisor's namespace has no sandgate table (nft printed no JSON)";
  }
  const items = doc.nftables ?? [];
  const chains = new Set(items.map((i) => (i.chain as { name?: string } | undefined)?.name).filter((n): n is string => n !== undefined));
  for (const c of ["guard", "intercept", "noforward"]) if (!chains.has(c)) return `the supervisor's namespace lacks the ${c} chain of the transparent path`;
  const rules = items.map((i) => i.rule as { chain?: string; expr?: unknown[] } | undefined).filter((r) => r !== undefined);
  const text = (chain: string): string => JSON.stringify(rules.filter((r) => r.chain === chain).map((r) => r.expr));
  const redirect = text("intercept");
  for (const port of [TRANSPARENT_PORT, DNS_PORT, UDP_SINK_PORT]) {
    if (!redirect.includes(`"redirect":{"port":${port}}`)) return `the transparent path's redirect to port ${port} is missing`;
  }
  if (!redirect.includes(`"${t.supervisorIp}"`) || !redirect.includes(`"${t.subnet.split("/")[0]}"`)) return "the transparent path's redirect names another sandbox network";
  const forward = items.find((i) => (i.chain as { name?: string } | undefined)?.name === "noforward")?.chain as { policy?: string } | undefined;
  if (forward?.policy !== "drop") return "the supervisor's namespace would forward the workload's packets";
  return null;
}

/** The workload's default route must be via its supervisor (from `ip -j route show default`). */
export function routeProblem(ipJson: string, supervisorIp: string): string | null {
  let routes: { dst?: string; gateway?: string }[];
  try {
    routes = JSON.parse(ipJson) as { dst?: string; gateway?: string }[];
  } catch {
    return "the workload's routes could not be read";
  }
  const d = routes.filter((r) => r.dst === "default");
  if (d.length !== 1 || d[0]!.gateway !== supervisorIp) return `the workload's default route is ${d.map((r) => `via ${r.gateway ?? "?"}`).join(", ") || "missing"}, not via its supervisor ${supervisorIp}`;
  return null;
}

/** The explicit proxy's port is not redirected: a client that knows the proxy uses it. */
export const PROXY_PORT_KEPT = PROXY_PORT;
