// The host's routing table, through iproute2's `ip route` (the gateway runs as root): reads
// the routes for exactly the sandbox range and installs the `unreachable` one that
// range-route.ts decides on. Left in place when the gateway stops: sandboxes keep running.

import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { decideRangeRoute, parseRoutes, type RangeRouteDecision } from "./range-route.js";

const run = promisify(execFile);

export interface RouteTable {
  /** What `ip route show exact RANGE` prints (the main table). */
  showExact(range: string): Promise<string>;
  /** `ip route add unreachable RANGE` (fails when a route for RANGE exists). */
  addUnreachable(range: string): Promise<void>;
}

/** How long one `ip` command may take. */
const IP_TIMEOUT_MS = 5_000;

export const ipRouteTable: RouteTable = {
  async showExact(range) {
    return (await run("ip", ["route", "show", "exact", range], { timeout: IP_TIMEOUT_MS })).stdout;
  },
  async addUnreachable(range) {
    await run("ip", ["route", "add", "unreachable", range], { timeout: IP_TIMEOUT_MS });
  },
};

/** An `ip` failure as one line: iproute2's own first line, or what kept it from running. */
async function ip<T>(what: string, call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (err) {
    const e = err as NodeJS.ErrnoException & { stderr?: string };
    const why = e.code === "ENOENT" ? "ip (iproute2) is not installed" : (e.stderr?.trim().split("\n")[0] ?? "") || e.message.split("\n")[0];
    throw new Error(`cannot ${what} (${why}); the gateway runs as root and needs iproute2`);
  }
}

const decide = async (range: string, table: RouteTable): Promise<RangeRouteDecision> =>
  decideRangeRoute(range, parseRoutes(await ip(`read the host's route for ${range}`, () => table.showExact(range))));

/** The sandbox range is unreachable from the host when this resolves; else it throws one line saying why. */
export async function ensureRangeUnreachable(range: string, table: RouteTable = ipRouteTable): Promise<"installed" | "present"> {
  const before = await decide(range, table);
  if (before.action === "refuse") throw new Error(before.error);
  if (before.action === "present") return "present";
  await ip(`install the host route "unreachable ${range}"`, () => table.addUnreachable(range));
  // Read back: a route someone else added meanwhile is named, never taken for ours.
  const after = await decide(range, table);
  if (after.action === "refuse") throw new Error(after.error);
  if (after.action === "install") throw new Error(`the host route "unreachable ${range}" was added but the host does not show it`);
  return "installed";
}
