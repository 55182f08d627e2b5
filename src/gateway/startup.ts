// Why a gateway cannot start, in one line that says what to do: a busy port
// (and, when /proc tells, which process holds it), a state.db that is not a
// database. The CLI prints a StartupError as it is, with exit code 2.

import { readFileSync, readdirSync, readlinkSync } from "node:fs";
import { createServer } from "node:net";
import { tcpSockets } from "../util/proc-net.js";
import { HIDDEN_CHARS } from "../policy/proposals.js";
import { SandgateError } from "../util/errors.js";

/**
 * Another user's process chose its own command line: a line end or an escape sequence in it
 * must not reach the operator's terminal as such (shown as \u{…}).
 */
const UNSHOWABLE = new RegExp(`[\\u0000-\\u001f${HIDDEN_CHARS}]`, "gu");
export const printableCommand = (s: string): string => s.replace(UNSHOWABLE, (c) => `\\u{${c.codePointAt(0)!.toString(16)}}`);

export class StartupError extends SandgateError {
  override readonly name = "StartupError";
  constructor(message: string, options?: ErrorOptions) {
    super(message, "startup_failed", options);
  }
}

/** The process listening on a TCP port, from /proc (null when not found or not allowed to look). */
export function portHolder(port: number): { pid: number; command: string } | null {
  const inodes = new Set(tcpSockets().filter((t) => t.localPort === port && t.state === "0A" && t.inode !== "0").map((t) => t.inode));
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
  const by = holder ? `; it is held by pid ${holder.pid}${holder.command ? ` (${printableCommand(holder.command.slice(0, 120))})` : ""}` : "";
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
