// The host's `unreachable` route for the sandbox range: what `ip route show exact RANGE`
// prints, read (range-route.ts), and what the gateway does about it (route-table.ts), on a
// table the test holds: install when the host has none, leave one that is in place, and
// refuse (never replace) any other route for exactly that range, naming it.
import { describe, expect, it } from "vitest";
import { decideRangeRoute, parseRoutes } from "../../../src/driver/docker/range-route.js";
import { ensureRangeUnreachable, type RouteTable } from "../../../src/driver/docker/route-table.js";

const RANGE = "198.18.0.0/15";
const REFUSAL = /^the host already has a route for the sandbox range 198\.18\.0\.0\/15 \(".*"\); the gateway installs "unreachable 198\.18\.0\.0\/15" there and never replaces a real route: choose a range the host does not route \(gateway start --sandbox-subnets\)$/;

describe("parseRoutes", () => {
  it("reads the type (unicast when none is printed) and the destination of each line", () => {
    const text = ["unreachable 198.18.0.0/15 ", "198.18.0.0/15 via 10.0.0.1 dev eth0 proto static", "", "  blackhole 198.18.0.0/15 metric 5", "198.18.0.0/15 dev br0 proto kernel scope link src 198.18.0.1"].join("\n");
    expect(parseRoutes(text)).toEqual([
      { type: "unreachable", dst: RANGE, line: "unreachable 198.18.0.0/15" },
      { type: "unicast", dst: RANGE, line: "198.18.0.0/15 via 10.0.0.1 dev eth0 proto static" },
      { type: "blackhole", dst: RANGE, line: "blackhole 198.18.0.0/15 metric 5" },
      { type: "unicast", dst: RANGE, line: "198.18.0.0/15 dev br0 proto kernel scope link src 198.18.0.1" },
    ]);
    expect(parseRoutes("")).toEqual([]);
    expect(parseRoutes("\n \n")).toEqual([]);
    // Any run of blanks between fields; a line of one word has no destination.
    expect(parseRoutes("unreachable \t 198.18.0.0/15\nunreachable")).toEqual([
      { type: "unreachable", dst: RANGE, line: "unreachable \t 198.18.0.0/15" },
      { type: "unreachable", dst: "", line: "unreachable" },
    ]);
  });
});

describe("decideRangeRoute", () => {
  it("no route for the range: install ours", () => {
    expect(decideRangeRoute(RANGE, [])).toEqual({ action: "install" });
  });

  it("an unreachable route for it (ours from an earlier start, or one doing the same): in place", () => {
    expect(decideRangeRoute(RANGE, parseRoutes("unreachable 198.18.0.0/15\n"))).toEqual({ action: "present" });
    expect(decideRangeRoute(RANGE, parseRoutes("unreachable 198.18.0.0/15 proto static metric 7\n"))).toEqual({ action: "present" });
  });

  it("any other route for exactly the range is refused in one line naming it, even beside an unreachable one", () => {
    for (const line of ["198.18.0.0/15 via 10.0.0.1 dev eth0", "198.18.0.0/15 dev wg0 scope link", "blackhole 198.18.0.0/15", "prohibit 198.18.0.0/15", "throw 198.18.0.0/15"]) {
      for (const shown of [line, `unreachable 198.18.0.0/15 metric 9\n${line}`]) {
        const d = decideRangeRoute(RANGE, parseRoutes(shown));
        expect(d.action, shown).toBe("refuse");
        const error = d.action === "refuse" ? d.error : "";
        expect(error).toMatch(REFUSAL);
        expect(error).toContain(`("${line}")`);
        expect(error).not.toContain("\n");
      }
    }
  });
});

/** A routing table in memory: the lines it shows for a range, and the calls made to it. */
function table(initial: string[], opts: { onAdd?: (lines: string[]) => void; addFails?: Error; showFails?: Error } = {}): RouteTable & { lines: string[]; calls: string[] } {
  const t = {
    lines: [...initial],
    calls: [] as string[],
    async showExact(range: string) {
      t.calls.push(`show ${range}`);
      if (opts.showFails) throw opts.showFails;
      return t.lines.map((l) => `${l} \n`).join("");
    },
    async addUnreachable(range: string) {
      t.calls.push(`add unreachable ${range}`);
      if (opts.addFails) throw opts.addFails;
      if (t.lines.length > 0) throw Object.assign(new Error("Command failed: ip route add"), { stderr: "RTNETLINK answers: File exists\n" });
      t.lines.push(`unreachable ${range}`);
      opts.onAdd?.(t.lines);
    },
  };
  return t;
}

describe("ensureRangeUnreachable", () => {
  it("installs the route when the host has none, and reads it back", async () => {
    const t = table([]);
    expect(await ensureRangeUnreachable(RANGE, t)).toBe("installed");
    expect(t.calls).toEqual([`show ${RANGE}`, `add unreachable ${RANGE}`, `show ${RANGE}`]);
    expect(t.lines).toEqual([`unreachable ${RANGE}`]);
  });

  it("is idempotent: a route already in place is left as it is", async () => {
    const t = table([`unreachable ${RANGE}`]);
    expect(await ensureRangeUnreachable(RANGE, t)).toBe("present");
    expect(await ensureRangeUnreachable(RANGE, t)).toBe("present");
    expect(t.calls).toEqual([`show ${RANGE}`, `show ${RANGE}`]);
  });

  it("never replaces a real route: refuses naming it and changes nothing", async () => {
    const t = table([`${RANGE} via 10.9.0.1 dev tun0`]);
    await expect(ensureRangeUnreachable(RANGE, t)).rejects.toThrow(REFUSAL);
    expect(t.calls).toEqual([`show ${RANGE}`]);
    expect(t.lines).toEqual([`${RANGE} via 10.9.0.1 dev tun0`]);
  });

  it("a route someone adds beside ours between the check and the add is named, not taken for ours", async () => {
    const t = table([], { onAdd: (lines) => lines.push(`${RANGE} dev eth9`) });
    await expect(ensureRangeUnreachable(RANGE, t)).rejects.toThrow(REFUSAL);
  });

  it("an add that reports success but leaves no route is not trusted", async () => {
    const t = table([], { onAdd: (lines) => lines.splice(0) });
    await expect(ensureRangeUnreachable(RANGE, t)).rejects.toThrow(`the host route "unreachable ${RANGE}" was added but the host does not show it`);
  });

  it("an ip that cannot run or is refused is one line: what it could not do and iproute2's own words", async () => {
    const eperm = Object.assign(new Error("Command failed: ip route add unreachable 198.18.0.0/15\nRTNETLINK answers: Operation not permitted\n"), { stderr: "RTNETLINK answers: Operation not permitted\n" });
    await expect(ensureRangeUnreachable(RANGE, table([], { addFails: eperm }))).rejects.toThrow(
      /^cannot install the host route "unreachable 198\.18\.0\.0\/15" \(RTNETLINK answers: Operation not permitted\); the gateway runs as root and needs iproute2$/,
    );
    const missing = Object.assign(new Error("spawn ip ENOENT"), { code: "ENOENT" });
    await expect(ensureRangeUnreachable(RANGE, table([], { showFails: missing }))).rejects.toThrow(
      /^cannot read the host's route for 198\.18\.0\.0\/15 \(ip \(iproute2\) is not installed\); the gateway runs as root and needs iproute2$/,
    );
  });
});
