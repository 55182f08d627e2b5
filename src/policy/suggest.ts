// A minimal set of rules that would allow what the audit trail shows was denied (or let
// through by audit mode as would-deny) for want of a rule, for a person to review. Pure. Explicit denies, private addresses
// and lockdowns are never suggested away.
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
  /** Denied requests the suggestion covers (repeats counted). */
  covers: number;
}

export function suggestRules(records: readonly RecordedDecision[], current: Policy): Suggestion {
  const groups = new Map<string, { host: string; port: number; protocol: RecordedDecision["protocol"]; methods: Set<string>; paths: Set<string>; count: number }>();
  for (const r of records) {
    // Denied, or let through by audit mode only: both are what a rule would have to allow.
    if (r.decision === "allow" || r.reason === undefined || !SUGGESTABLE.has(r.reason)) continue;
    // Already allowed by the current policy, enforcing (e.g. a denial before the last change).
    const req = { host: r.host, port: r.port, protocol: r.protocol, ...(r.protocol === "http" ? { method: r.method ?? "GET", path: r.path ?? "/" } : {}) };
    const now = evaluate(current, req);
    if (now.allow && now.wouldDeny === undefined) continue;
    const key = `${r.protocol} ${r.host}:${r.port}`;
    const g = groups.get(key) ?? { host: r.host, port: r.port, protocol: r.protocol, methods: new Set<string>(), paths: new Set<string>(), count: 0 };
    g.count += r.count;
    if (r.protocol === "http") {
      g.methods.add(r.method ?? "GET");
      g.paths.add(pathGlob(r.path ?? "/"));
    }
    groups.set(key, g);
  }
  const rules: NetworkRule[] = [];
  let covers = 0;
  for (const g of [...groups.values()].sort((a, b) => a.host.localeCompare(b.host) || a.port - b.port)) {
    covers += g.count;
    const methods = [...g.methods].filter((m): m is HttpMethod => (HTTP_METHODS as readonly string[]).includes(m)).sort();
    // Methods are gathered for http only: an https suggestion allows the tunnel.
    const l7 = methods.length > 0 ? { rules: [{ methods, paths: [...g.paths].sort() }] } : {};
    rules.push({ name: `suggested-${g.host.replace(/[^a-z0-9-]/g, "-")}-${g.port}`.slice(0, 63), endpoints: [{ host: g.host, ports: [g.port], protocol: g.protocol, allowPrivate: [], ...l7 }] });
  }
  return { rules, covers };
}
