// A minimal set of rules that would allow what the audit trail shows was denied (or let
// through by audit mode as would-deny) for want of a rule, for a person to review. Pure. Explicit denies, private-address denials
// and lockdowns are never suggested away. Names the workload's resolver refused (dns_denied)
// are suggested too, as https on 443 (a lookup says which name, not which port: marked so).
// A suggested rule whose host the trail saw at a private address (audit mode records where a
// request went) allows exactly that address, or it would allow nothing; rule names are unique
// within the policy it joins.
import { checkResolvedAddress, NO_HOST_ADDRESSES } from "./address.js";
import { nameDecision } from "./dns.js";
import { evaluate } from "./evaluate.js";
import type { RecordedDecision } from "./replay.js";
import type { HttpMethod, NetworkRule, Policy } from "./schema.js";
import { HTTP_METHODS } from "./schema.js";

const SUGGESTABLE = new Set(["no_matching_rule", "method_not_allowed", "path_not_allowed"]);

/** "/repos/a/b" → "/repos/**": the first path segment, which is what most APIs version and group by. */
function pathGlob(path: string): string {
  const seg = path.split("?")[0]!.split("/").filter((s) => s !== "")[0];
  return seg === undefined ? "/" : `/${seg}/**`;
}

export interface Suggestion {
  rules: NetworkRule[];
  /** Denied requests the suggestion covers (repeats counted), lookups included. */
  covers: number;
  /** Names whose rule comes from a refused lookup alone: its protocol and port are a guess (https, 443). */
  fromLookups: string[];
  /** Hosts whose rule allows the private address the trail saw them at (allowPrivate), to review. */
  privateHosts: string[];
}

/** A name the workload's resolver refused (a dns_denied record; repeats counted). */
export interface DeniedLookup {
  name: string;
  count: number;
}

/** The port and protocol suggested for a name that was only looked up: what most lookups are for. */
const LOOKUP_GUESS = { port: 443, protocol: "https" as const };

const MAX_NAME = 63;
const ruleName = (host: string, port: number): string => `suggested-${host.replace(/[^a-z0-9-]/g, "-")}-${port}`.slice(0, MAX_NAME);

/** `base`, or with its protocol, or numbered, whichever is not yet taken (the policy's names and earlier suggestions). */
function uniqueName(base: string, protocol: string, taken: Set<string>): string {
  let name = taken.has(base) ? `${base.slice(0, MAX_NAME - protocol.length - 1)}-${protocol}` : base;
  // Numbered from 2, the first number free.
  for (let n = 2; taken.has(name); n++) name = `${base.slice(0, MAX_NAME - String(n).length - 1)}-${n}`;
  taken.add(name);
  return name;
}

/** `address` as the one-address range allowPrivate takes, when it is private (never a malformed one). */
function privateRange(address: string): string | undefined {
  const c = checkResolvedAddress(address, [], NO_HOST_ADDRESSES);
  if (c.ok || c.reason !== "private_address") return undefined;
  return address.includes(":") ? `${address}/128` : `${address}/32`;
}

export function suggestRules(records: readonly RecordedDecision[], current: Policy, lookups: readonly DeniedLookup[] = []): Suggestion {
  const groups = new Map<string, { host: string; port: number; protocol: RecordedDecision["protocol"]; methods: Set<string>; paths: Set<string>; count: number; privateRanges: Set<string> }>();
  for (const r of records) {
    // Denied, or let through by audit mode only: both are what a rule would have to allow.
    if (r.decision === "allow" || r.reason === undefined || !SUGGESTABLE.has(r.reason)) continue;
    // Already allowed by the current policy, enforcing (e.g. a denial before the last change).
    const req = { host: r.host, port: r.port, protocol: r.protocol, ...(r.protocol === "http" ? { method: r.method ?? "GET", path: r.path ?? "/" } : {}) };
    const now = evaluate(current, req);
    if (now.allow && now.wouldDeny === undefined) continue;
    const key = `${r.protocol} ${r.host}:${r.port}`;
    const g = groups.get(key) ?? { host: r.host, port: r.port, protocol: r.protocol, methods: new Set<string>(), paths: new Set<string>(), count: 0, privateRanges: new Set<string>() };
    g.count += r.count;
    const range = r.address === undefined ? undefined : privateRange(r.address);
    if (range !== undefined) g.privateRanges.add(range);
    if (r.protocol === "http") {
      g.methods.add(r.method ?? "GET");
      g.paths.add(pathGlob(r.path ?? "/"));
    }
    groups.set(key, g);
  }
  // A refused name with no request of its own: the request never happened because the name did
  // not resolve. Not where the current policy already resolves it, nor where an enforcing deny
  // refuses it (never suggested away), nor where a request's rule above will make it resolve.
  const requested = new Set([...groups.values()].map((g) => g.host));
  const fromLookups = new Map<string, number>();
  for (const l of lookups) {
    const d = nameDecision(current, l.name);
    // Only a name refused for want of a rule (enforcing, or let through by audit mode).
    const refusal = d.allow ? d.wouldDeny?.reason : d.reason;
    if (refusal !== "no_matching_rule") continue;
    const host = l.name.toLowerCase().replace(/\.$/, "");
    if (requested.has(host)) continue;
    // The guessed endpoint itself: a deny entry that refuses it would keep the name refused.
    const guess = evaluate(current, { host, ...LOOKUP_GUESS });
    if (!SUGGESTABLE.has((guess.allow ? guess.wouldDeny?.reason : guess.reason) ?? "")) continue;
    fromLookups.set(host, (fromLookups.get(host) ?? 0) + l.count);
  }
  for (const [host, count] of fromLookups) groups.set(`lookup ${host}`, { host, port: LOOKUP_GUESS.port, protocol: LOOKUP_GUESS.protocol, methods: new Set(), paths: new Set(), count, privateRanges: new Set() });

  const rules: NetworkRule[] = [];
  const taken = new Set(current.network.rules.map((r) => r.name));
  const privateHosts = new Set<string>();
  let covers = 0;
  for (const g of [...groups.values()].sort((a, b) => a.host.localeCompare(b.host) || a.port - b.port)) {
    covers += g.count;
    const methods = [...g.methods].filter((m): m is HttpMethod => (HTTP_METHODS as readonly string[]).includes(m)).sort();
    // Methods are gathered for http only: an https suggestion allows the tunnel.
    const l7 = methods.length > 0 ? { rules: [{ methods, paths: [...g.paths].sort() }] } : {};
    const allowPrivate = [...g.privateRanges].sort();
    if (allowPrivate.length > 0) privateHosts.add(g.host);
    rules.push({ name: uniqueName(ruleName(g.host, g.port), g.protocol, taken), endpoints: [{ host: g.host, ports: [g.port], protocol: g.protocol, allowPrivate, ...l7 }] });
  }
  return { rules, covers, fromLookups: [...fromLookups.keys()].sort(), privateHosts: [...privateHosts].sort() };
}
