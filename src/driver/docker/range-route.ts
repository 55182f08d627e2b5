// The host's route for the whole sandbox range (--sandbox-subnets): `unreachable`, so that
// nothing on the host (a local user's connect) and nothing it forwards (another container on
// the egress bridge) reaches a sandbox network: each fails at once with "no route to host"
// and no packet leaves the machine. Sandbox networks have no host address (inhibit_ipv4),
// so without this route their addresses follow the host's default route, out of the machine.
// Traffic inside a sandbox's own bridge (workload → its supervisor) is switched, not routed,
// and never looks at the host's routes. Pure: what `ip route show exact RANGE` printed, in;
// what to do, out (route-table.ts runs the commands).

/** One line of `ip route show`: its type (unicast when the line names none), its destination, the line. */
export interface ShownRoute {
  type: string;
  dst: string;
  line: string;
}

/** The route types `ip route` prints before the destination (unicast is never printed). */
const TYPES = new Set(["unicast", "local", "broadcast", "multicast", "throw", "unreachable", "prohibit", "blackhole", "nat", "anycast"]);

/** The routes of `ip route show` output, one a line; blank lines skipped. */
export function parseRoutes(text: string): ShownRoute[] {
  const out: ShownRoute[] = [];
  for (const raw of text.split("\n")) {
    const line = raw.trim();
    if (line === "") continue;
    const [first = "", second = ""] = line.split(/\s+/);
    out.push(TYPES.has(first) ? { type: first, dst: second, line } : { type: "unicast", dst: first, line });
  }
  return out;
}

export type RangeRouteDecision = { action: "install" } | { action: "present" } | { action: "refuse"; error: string };

/**
 * What to do about the range's route, given the routes the host has for exactly that range:
 * none → install ours; only `unreachable` ones → it is in place (ours, from an earlier start,
 * or one doing the same); any other → refuse, naming it: a real route is never replaced.
 */
export function decideRangeRoute(range: string, exact: readonly ShownRoute[]): RangeRouteDecision {
  const other = exact.find((r) => r.type !== "unreachable");
  if (other !== undefined) {
    return {
      action: "refuse",
      error: `the host already has a route for the sandbox range ${range} ("${other.line}"); the gateway installs "unreachable ${range}" there and never replaces a real route: choose a range the host does not route (gateway start --sandbox-subnets)`,
    };
  }
  return exact.length === 0 ? { action: "install" } : { action: "present" };
}
