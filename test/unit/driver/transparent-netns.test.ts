// The transparent path's kernel state, loaded and read back in real network namespaces made
// for the test (a "supervisor" and a "workload" one, each held by a sleeping process, joined
// by a veth pair, with no other interface but lo, so nothing leaves them): the ruleset and the route are what the
// checks accept, and each thing missing or wrong is named. The gateway's own namespace is
// never entered.
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { dropCounters, inNetns, ProcessGone, programSupervisor, programWorkload, transparentProblem } from "../../../src/driver/docker/netns.js";
import { rulesetProblem, routeProblem, supervisorRuleset } from "../../../src/driver/docker/transparent-rules.js";
import { eventually } from "../../support/gateway-fixture.js";

const tag = randomBytes(3).toString("hex");
const SUP = `sg-sup-${tag}`;
const WL = `sg-wl-${tag}`;
const t = { subnet: "198.18.5.16/28", supervisorIp: "198.18.5.18" };
const held: ChildProcess[] = [];
let supPid: number;
let wlPid: number;

const ip = (...args: string[]): void => {
  const r = spawnSync("ip", args, { encoding: "utf8" });
  if (r.status !== 0) throw new Error(`ip ${args.join(" ")}: ${r.stderr}`);
};
/** A process sleeping in the namespace: what a container's init is to the gateway. */
async function holder(ns: string): Promise<number> {
  const p = spawn("ip", ["netns", "exec", ns, "sleep", "3600"], { stdio: "ignore" });
  held.push(p);
  // `ip netns exec` execs sleep in place: the pid is the sleeper's once it is in the namespace.
  return eventually(() => (spawnSync("ip", ["netns", "identify", String(p.pid)], { encoding: "utf8" }).stdout.trim() === ns ? p.pid : undefined), 10_000, `a process in ${ns}`);
}

beforeAll(async () => {
  for (const ns of [SUP, WL]) {
    ip("netns", "add", ns);
    ip("-n", ns, "link", "set", "lo", "up");
  }
  // A veth pair between the two, as Docker's bridge joins a supervisor and its workload.
  ip("link", "add", `sgs${tag}`, "netns", SUP, "type", "veth", "peer", "name", `sgw${tag}`, "netns", WL);
  for (const [ns, dev, addr] of [[SUP, `sgs${tag}`, "198.18.5.18/28"], [WL, `sgw${tag}`, "198.18.5.19/28"]] as const) {
    ip("-n", ns, "addr", "add", addr, "dev", dev);
    ip("-n", ns, "link", "set", dev, "up");
  }
  spawnSync("ip", ["netns", "exec", SUP, "sysctl", "-qw", "net.ipv4.ip_forward=0"]);
  supPid = await holder(SUP);
  wlPid = await holder(WL);
});
afterAll(() => {
  for (const p of held) p.kill("SIGKILL");
  spawnSync("ip", ["netns", "del", SUP]);
  spawnSync("ip", ["netns", "del", WL]);
});

describe("the transparent path's namespaces", () => {
  it("before: each missing piece is named; after programming both: no problem; loading twice is the same", async () => {
    expect(await transparentProblem(supPid, wlPid, t)).toBe("the supervisor's namespace has no sandgate table (nft printed no JSON)");
    await programSupervisor(supPid, t);
    expect(await transparentProblem(supPid, wlPid, t)).toBe("the workload's default route is missing, not via its supervisor 198.18.5.18");
    await programWorkload(wlPid, t.supervisorIp);
    expect(await transparentProblem(supPid, wlPid, t)).toBeNull();
    await programSupervisor(supPid, t);
    await programWorkload(wlPid, t.supervisorIp);
    expect(await transparentProblem(supPid, wlPid, t)).toBeNull();
    expect(await dropCounters(supPid)).toEqual({ icmp_dropped: 0, other_dropped: 0, forward_dropped: 0 });
  });

  it("a namespace that forwards, a chain removed, another sandbox's rules: each named", async () => {
    await programSupervisor(supPid, t);
    await programWorkload(wlPid, t.supervisorIp);
    await inNetns(supPid, ["sysctl", "-qw", "net.ipv4.ip_forward=1"]);
    expect(await transparentProblem(supPid, wlPid, t)).toBe("the supervisor's namespace forwards packets (net.ipv4.ip_forward is not 0)");
    await inNetns(supPid, ["sysctl", "-qw", "net.ipv4.ip_forward=0"]);
    await inNetns(supPid, ["nft", "delete", "chain", "ip", "sandgate", "noforward"]);
    expect(await transparentProblem(supPid, wlPid, t)).toBe("the supervisor's namespace lacks the noforward chain of the transparent path");
    await programSupervisor(supPid, { subnet: "198.18.9.0/28", supervisorIp: "198.18.9.2" });
    expect(await transparentProblem(supPid, wlPid, t)).toBe("the transparent path's redirect names another sandbox network");
    await programSupervisor(supPid, t);
    expect(await transparentProblem(supPid, wlPid, t)).toBeNull();
  });

  it("never enters the gateway's own namespace", async () => {
    await expect(inNetns(process.pid, ["ip", "route"])).rejects.toThrow(`pid ${process.pid} is in the gateway's own network namespace, not a container's: nothing was changed`);
    await expect(inNetns(2 ** 22 + 1, ["ip", "route"])).rejects.toThrow(/cannot open the network namespace of pid 4194305 \(ENOENT\): the container is gone/);
  });

  it("a process that has ended is ProcessGone (a workload that exits during start-up, before the daemon says so), not another failure", async () => {
    const p = spawn("true", { stdio: "ignore" });
    await new Promise((resolve) => p.on("close", resolve));
    const err = await programWorkload(p.pid!, t.supervisorIp).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ProcessGone);
    expect(await inNetns(process.pid, ["true"]).catch((e: unknown) => e)).not.toBeInstanceOf(ProcessGone);
  });
});

describe("the checks, on what nft and ip print", () => {
  it("a ruleset without the redirect to one of the ports, and a forward chain that accepts, are problems", () => {
    const json = (ruleset: string): string => {
      const ns = `sg-rs-${randomBytes(3).toString("hex")}`;
      ip("netns", "add", ns);
      try {
        const load = spawnSync("ip", ["netns", "exec", ns, "nft", "-f", "-"], { input: ruleset, encoding: "utf8" });
        if (load.status !== 0) throw new Error(load.stderr);
        return spawnSync("ip", ["netns", "exec", ns, "nft", "-j", "list", "table", "ip", "sandgate"], { encoding: "utf8" }).stdout;
      } finally {
        spawnSync("ip", ["netns", "del", ns]);
      }
    };
    const full = supervisorRuleset(t);
    expect(rulesetProblem(json(full), t)).toBeNull();
    expect(rulesetProblem(json(full.replace("redirect to :15354", "drop")), t)).toBe("the transparent path's redirect to port 15354 is missing");
    expect(rulesetProblem(json(full.replace("policy drop;", "policy accept;")), t)).toBe("the supervisor's namespace would forward the workload's packets");
    expect(rulesetProblem("", t)).toBe("the supervisor's namespace has no sandgate table (nft printed no JSON)");
  });

  it("the workload's default route must be exactly one, via its supervisor", () => {
    expect(routeProblem('[{"dst":"default","gateway":"198.18.5.18","dev":"eth0"}]', "198.18.5.18")).toBeNull();
    expect(routeProblem('[{"dst":"default","gateway":"198.18.5.17","dev":"eth0"}]', "198.18.5.18")).toBe("the workload's default route is via 198.18.5.17, not via its supervisor 198.18.5.18");
    expect(routeProblem("[]", "198.18.5.18")).toBe("the workload's default route is missing, not via its supervisor 198.18.5.18");
    expect(routeProblem("not json", "198.18.5.18")).toBe("the workload's routes could not be read");
  });
});
