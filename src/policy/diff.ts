// What a candidate policy changes against the active one, rule by rule. Pure.
import type { DenyEntry, Endpoint, NetworkRule, Policy } from "./schema.js";
import { canonicalJson } from "./canonical.js";

export interface PolicyChange {
  kind: "rule added" | "rule removed" | "rule changed" | "deny added" | "deny removed" | "enforcement changed" | "fixed section changed";
  /** The rule's or deny entry's name, or the section. */
  name: string;
  /** One line per endpoint (or field) added "+" or removed "-". */
  lines: string[];
}

/** One line for an endpoint: "https api.example.com:443", with its L7 rules and private ranges. */
export function describeEndpoint(e: Endpoint): string {
  const l7 = e.rules?.map((r) => `${r.methods?.join(",") ?? "*"} ${r.paths?.join(",") ?? "**"}`).join("; ");
  const priv = e.allowPrivate.length > 0 ? ` allowPrivate ${e.allowPrivate.join(",")}` : "";
  return `${e.protocol} ${e.host}:${e.ports.join(",")}${l7 ? ` [${l7}]` : ""}${priv}`;
}

const describeDeny = (d: DenyEntry): string => `${d.protocol ?? "any"} ${d.host}${d.ports ? `:${d.ports.join(",")}` : ""}${d.enforcement === "audit" ? " (audit)" : ""}`;
const mode = (e: "audit" | undefined): string => `enforcement: ${e ?? "enforce"}`;

function endpointLines(before: readonly Endpoint[], after: readonly Endpoint[]): string[] {
  const a = new Set(before.map(describeEndpoint));
  const b = new Set(after.map(describeEndpoint));
  return [...[...a].filter((x) => !b.has(x)).map((x) => `- ${x}`), ...[...b].filter((x) => !a.has(x)).map((x) => `+ ${x}`)];
}

export function diffPolicies(active: Policy, candidate: Policy): PolicyChange[] {
  const changes: PolicyChange[] = [];
  const byName = (rules: readonly NetworkRule[]): Map<string, NetworkRule> => new Map(rules.map((r) => [r.name, r]));
  const a = byName(active.network.rules);
  const b = byName(candidate.network.rules);
  for (const [name, rule] of a) {
    const next = b.get(name);
    if (!next) changes.push({ kind: "rule removed", name, lines: rule.endpoints.map((e) => `- ${describeEndpoint(e)}`) });
    else {
      const lines = endpointLines(rule.endpoints, next.endpoints);
      if (rule.enforcement !== next.enforcement) lines.push(`- ${mode(rule.enforcement)}`, `+ ${mode(next.enforcement)}`);
      if (lines.length > 0) changes.push({ kind: "rule changed", name, lines });
    }
  }
  for (const [name, rule] of b) if (!a.has(name)) changes.push({ kind: "rule added", name, lines: rule.endpoints.map((e) => `+ ${describeEndpoint(e)}`) });
  const denyKey = (d: DenyEntry, i: number): string => d.name ?? `deny[${i}]`;
  const da = new Map(active.network.deny.map((d, i) => [canonicalJson(d), { d, name: denyKey(d, i) }]));
  const db = new Map(candidate.network.deny.map((d, i) => [canonicalJson(d), { d, name: denyKey(d, i) }]));
  for (const [k, v] of da) if (!db.has(k)) changes.push({ kind: "deny removed", name: v.name, lines: [`- ${describeDeny(v.d)}`] });
  for (const [k, v] of db) if (!da.has(k)) changes.push({ kind: "deny added", name: v.name, lines: [`+ ${describeDeny(v.d)}`] });
  if (active.network.enforcement !== candidate.network.enforcement) {
    changes.push({ kind: "enforcement changed", name: "network", lines: [`- ${mode(active.network.enforcement)}`, `+ ${mode(candidate.network.enforcement)}`] });
  }
  for (const section of ["filesystem", "process"] as const) {
    if (canonicalJson(active[section]) !== canonicalJson(candidate[section])) {
      changes.push({ kind: "fixed section changed", name: section, lines: [`- ${canonicalJson(active[section])}`, `+ ${canonicalJson(candidate[section])}`] });
    }
  }
  return changes;
}
