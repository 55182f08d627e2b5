// What a candidate policy changes against the active one, rule by rule. Pure.
import { tlsMode, type DenyEntry, type Endpoint, type NetworkRule, type Policy } from "./schema.js";
import { isHeaderInjection, type Credential } from "./credentials.js";
import { canonicalJson } from "./canonical.js";

export interface PolicyChange {
  kind: "rule added" | "rule removed" | "rule changed" | "deny added" | "deny removed" | "enforcement changed" | "fixed section changed" | "section changed";
  /** The rule's or deny entry's name, or the section. */
  name: string;
  /** One line per endpoint (or field) added "+" or removed "-". */
  lines: string[];
}

// Path globs may hold "," (the list separator here): such a glob is quoted, so two
// different lists never print alike. Globs hold no space or '"'.
const globs = (paths: readonly string[]): string => paths.map((p) => (p.includes(",") ? JSON.stringify(p) : p)).join(",");

/**
 * A credential as the person approving it must see it: the secret it binds (with its paths
 * and body bound), or the header and its template. Templates hold secret names, never
 * values; quoted, so a template cannot pass for the next field.
 */
export function describeCredential(c: Credential): string {
  const on = c.paths ? ` on ${globs(c.paths)}` : "";
  if (isHeaderInjection(c)) return `header ${c.header}: ${JSON.stringify(c.value)}${on}`;
  return `secret ${c.secret}${on}${c.body ? ` body<=${String(c.body.maxBytes)}` : ""}`;
}

/**
 * One line for an endpoint: "https api.example.com:443", with its L7 rules, its TLS mode
 * when the supervisor terminates, its private ranges and its credentials. Two endpoints
 * the boundary treats differently never give the same line: the diff compares these lines.
 */
export function describeEndpoint(e: Endpoint): string {
  const l7 = e.rules?.map((r) => `${r.methods?.join(",") ?? "*"} ${r.paths ? globs(r.paths) : "**"}`).join("; ");
  // passthrough, the plain https default, goes unsaid; terminate (written, or implied by rules or credentials) is shown.
  const tls = tlsMode(e) === "terminate" ? " tls terminate" : "";
  const priv = e.allowPrivate.length > 0 ? ` allowPrivate ${e.allowPrivate.join(",")}` : "";
  const creds = e.credentials ? ` credentials [${e.credentials.map(describeCredential).join("; ")}]` : "";
  return `${e.protocol} ${e.host}:${e.ports.join(",")}${l7 ? ` [${l7}]` : ""}${tls}${priv}${creds}`;
}

const describeDeny = (d: DenyEntry): string => `${d.protocol ?? "any"} ${d.host}${d.ports ? `:${d.ports.join(",")}` : ""}${d.enforcement === "audit" ? " (audit)" : ""}`;
const mode = (e: "audit" | undefined): string => `enforcement: ${e ?? "enforce"}`;

function endpointLines(before: readonly Endpoint[], after: readonly Endpoint[]): string[] {
  const a = new Set(before.map(describeEndpoint));
  const b = new Set(after.map(describeEndpoint));
  return [...[...a].filter((x) => !b.has(x)).map((x) => `- ${x}`), ...[...b].filter((x) => !a.has(x)).map((x) => `+ ${x}`)];
}

/** The policy's sections as the backstop compares them: "network.rules", "network.deny", ..., "filesystem". */
function sections(p: Policy): Map<string, string> {
  const out = new Map<string, string>();
  for (const [key, value] of Object.entries(p)) {
    if (key === "network") for (const [k, v] of Object.entries(p.network)) out.set(`network.${k}`, canonicalJson(v));
    else out.set(key, canonicalJson(value));
  }
  return out;
}

/** The section a change reported above concerns. */
function sectionOf(c: PolicyChange): string {
  if (c.kind.startsWith("rule")) return "network.rules";
  if (c.kind.startsWith("deny")) return "network.deny";
  if (c.kind === "enforcement changed") return "network.enforcement";
  return c.name;
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
      // Backstop: a difference the lines above do not show (a field they do not know yet,
      // an endpoint repeated or moved) is shown as the rule's canonical text, never hidden.
      if (lines.length === 0 && canonicalJson(rule) !== canonicalJson(next)) lines.push(`- ${canonicalJson(rule)}`, `+ ${canonicalJson(next)}`);
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
  // Backstop for the rest: a section whose canonical form differs while no change above
  // concerns it (rule or deny order, a field this file does not know yet) is shown whole.
  const a2 = sections(active);
  const b2 = sections(candidate);
  const reported = new Set(changes.map(sectionOf));
  for (const section of [...new Set([...a2.keys(), ...b2.keys()])].sort()) {
    const before = a2.get(section) ?? "(absent)";
    const after = b2.get(section) ?? "(absent)";
    if (before !== after && !reported.has(section)) changes.push({ kind: "section changed", name: section, lines: [`- ${before}`, `+ ${after}`] });
  }
  return changes;
}
