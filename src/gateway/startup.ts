// Why a gateway cannot start, in one line that says what to do: a busy port
// (and, when /proc tells, which process holds it), a state.db that is not a
// database. The CLI prints a StartupError as it is, with exit code 2.

import { readFileSync, readdirSync, readlinkSync } from "node:fs";
import { createServer } from "node:net";

export class StartupError extends Error {
  override readonly name = "StartupError";
}

/** The process listening on a TCP port, from /proc (null when not found or not allowed to look). */
export function portHolder(port: number): { pid: number; command: string } | null {
  const hexPort = port.toString(16).toUpperCase().padStart(4, "0");
  const inodes = new Set<string>();
  for (const table of ["/proc/net/tcp", "/proc/net/tcp6"]) {
    let text: string;
    try {
      text = readFileSync(table, "utf8");
    } catch {
      continue;
    }
    for (const line of text.split("\n").slice(1)) {
      const f = line.trim().split(/\s+/);
      // local_address is HEXIP:HEXPORT; state 0A is LISTEN; the inode is field 9.
      if (f.length > 9 && f[1]!.endsWith(`:${hexPort}`) && f[3] === "0A" && f[9] !== "0") inodes.add(f[9]!);
    }
  }
  if (inodes.size === 0) return null;
  let pids: string[];
  try {
    pids = readdirSync("/proc").filter((d) => /^\d+$/.test(d));
  } catch {
    return null;
  }
  for (const pid of pids) {
    let fds: string[];
    try {
      fds = readdirSync(`/proc/${pid}/fd`);
    } catch {
      continue;
    }
    for (const fd of fds) {
      let target: string;
      try {
        target = readlinkSync(`/proc/${pid}/fd/${fd}`);
      } catch {
        continue;
      }
      const m = /^socket:\[(\d+)\]$/.exec(target);
      if (m && inodes.has(m[1]!)) return { pid: Number(pid), command: commandLine(Number(pid)) };
    }
  }
  return null;
}

/** A process's command line, as one string ("" when it cannot be read). */
export function commandLine(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").filter(Boolean).join(" ");
  } catch {
    return "";
  }
}

export function portInUse(what: string, host: string, port: number): StartupError {
  const holder = portHolder(port);
  const by = holder ? `; it is held by pid ${holder.pid}${holder.command ? ` (${holder.command.slice(0, 120)})` : ""}` : "";
  return new StartupError(`cannot listen on ${host}:${port} (${what}): the port is in use${by}; stop that process or choose another port`);
}

/** Fails at once with a StartupError when the port is taken (before the slow parts of start-up). */
export async function assertPortFree(what: string, host: string, port: number): Promise<void> {
  if (port === 0) return;
  await new Promise<void>((resolve, reject) => {
    const probe = createServer();
    probe.once("error", (err: NodeJS.ErrnoException) => reject(err.code === "EADDRINUSE" ? portInUse(what, host, port) : err));
    probe.listen({ host, port, exclusive: true }, () => probe.close(() => resolve()));
  });
}

export const isAddrInUse = (err: unknown): boolean => (err as NodeJS.ErrnoException | null)?.code === "EADDRINUSE";
