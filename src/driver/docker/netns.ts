// The gateway (root on the host) programs a sandbox's network namespaces from the host: the
// supervisor's ruleset and the workload's route of the transparent path
// (transparent-rules.ts), and reads them back. Neither container holds a capability to
// change them. A namespace is entered by a file descriptor opened once on /proc/PID/ns/net
// (nsenter --net=/proc/self/fd/3), after checking that it is not the gateway's own namespace,
// so a pid that ended and was reused can never make the gateway program the host.

import { spawn } from "node:child_process";
import { closeSync, fstatSync, openSync, statSync } from "node:fs";
import { rulesetProblem, routeProblem, supervisorRuleset, workloadRouteArgs, DROP_COUNTERS, TABLE, type DropCounter, type TransparentTargets } from "./transparent-rules.js";
import { SandgateError } from "../../util/errors.js";

const RUN_TIMEOUT_MS = 10_000;

/** The process has ended (no /proc/PID/ns/net): its namespace can be neither programmed nor read. */
export class ProcessGone extends SandgateError {
  override readonly name = "ProcessGone";
  constructor(message: string, options?: ErrorOptions) {
    super(message, "process_gone", options);
  }
}

/** Runs `argv` in the network namespace of `pid`; resolves with stdout, rejects with one line. */
export async function inNetns(pid: number, argv: string[], input?: string): Promise<string> {
  let fd: number;
  try {
    fd = openSync(`/proc/${pid}/ns/net`, "r");
  } catch (err) {
    throw new (["ENOENT", "ESRCH"].includes((err as NodeJS.ErrnoException).code ?? "") ? ProcessGone : Error)(`cannot open the network namespace of pid ${pid} (${(err as NodeJS.ErrnoException).code ?? (err as Error).message}): the container is gone`);
  }
  try {
    if (fstatSync(fd).ino === statSync("/proc/self/ns/net").ino) throw new Error(`pid ${pid} is in the gateway's own network namespace, not a container's: nothing was changed`);
    return await new Promise<string>((resolve, reject) => {
      const p = spawn("nsenter", ["--net=/proc/self/fd/3", ...argv], { stdio: ["pipe", "pipe", "pipe", fd] });
      let out = "";
      let err = "";
      const timer = setTimeout(() => p.kill("SIGKILL"), RUN_TIMEOUT_MS);
      p.stdout!.on("data", (b: Buffer) => (out += b.toString()));
      p.stderr!.on("data", (b: Buffer) => (err += b.toString()));
      p.on("error", (e) => {
        clearTimeout(timer);
        reject(new Error(`${argv[0]}: ${e.message}${(e as NodeJS.ErrnoException).code === "ENOENT" ? " (install nsenter, nft and ip: Debian's util-linux, nftables, iproute2)" : ""}`));
      });
      p.on("close", (code, signal) => {
        clearTimeout(timer);
        if (code === 0) resolve(out);
        else reject(new Error(`${argv.join(" ").slice(0, 60)} in the namespace of pid ${pid} failed (${signal ?? `exit ${code}`}): ${err.trim().split("\n")[0] ?? ""}`));
      });
      p.stdin!.on("error", () => undefined);
      p.stdin!.end(input ?? "");
    });
  } finally {
    closeSync(fd);
  }
}

/** Loads the supervisor's ruleset (atomically, replacing an older one of ours). */
export async function programSupervisor(pid: number, t: TransparentTargets): Promise<void> {
  await inNetns(pid, ["nft", "-f", "-"], supervisorRuleset(t));
}

/** Points the workload's default route at its supervisor. */
export async function programWorkload(pid: number, supervisorIp: string): Promise<void> {
  await inNetns(pid, ["ip", ...workloadRouteArgs(supervisorIp)]);
}

/** Reads both namespaces back: null when the transparent path is in place, else what is wrong. */
export async function transparentProblem(supervisorPid: number, workloadPid: number, t: TransparentTargets): Promise<string | null> {
  try {
    const [nft, forwarding, route] = await Promise.all([
      inNetns(supervisorPid, ["nft", "-j", "list", "table", "ip", TABLE]).catch(() => ""),
      inNetns(supervisorPid, ["cat", "/proc/sys/net/ipv4/ip_forward"]),
      inNetns(workloadPid, ["ip", "-j", "route", "show", "default"]),
    ]);
    if (forwarding.trim() !== "0") return "the supervisor's namespace forwards packets (net.ipv4.ip_forward is not 0)";
    return rulesetProblem(nft, t) ?? routeProblem(route, t.supervisorIp);
  } catch (err) {
    return (err as Error).message;
  }
}

/** The packets the supervisor's namespace dropped for the workload, by counter. */
export async function dropCounters(supervisorPid: number): Promise<Record<DropCounter, number>> {
  const out = await inNetns(supervisorPid, ["nft", "-j", "list", "counters", "table", "ip", TABLE]);
  const counts = Object.fromEntries(DROP_COUNTERS.map((c) => [c, 0])) as Record<DropCounter, number>;
  const items = (JSON.parse(out) as { nftables?: { counter?: { name: string; packets: number } }[] }).nftables ?? [];
  for (const i of items) if (i.counter && (DROP_COUNTERS as readonly string[]).includes(i.counter.name)) counts[i.counter.name as DropCounter] = i.counter.packets;
  return counts;
}
