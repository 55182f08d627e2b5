// Signals for an exec. The Engine API has no call to signal an exec (only a container's
// pid 1), so the gateway signals the exec's process group itself, from the host: it runs
// as root in the Docker daemon's pid namespace, where `GET /exec/{id}/json` names the pid.
// runc starts every exec as the leader of its own session and process group, so the
// group is exactly what a terminal's Ctrl-C reaches: the command and the children it did
// not move elsewhere (`sh -c 'a; b'` included), nothing of the workload's other processes.
//
// A pid is not an identity: the process may have ended and its number been reused. So a
// pid is trusted only while it is the same process that was identified (same start time
// since boot), still the leader of its group, and in the workload container's pid
// namespace; that is checked again right before every kill(-pgid). The one window left,
// between that check and the kill, would need the number to be freed, reused by the
// kernel's cyclic allocator and made a group leader within microseconds.
//
// Another way was rejected: a second exec running `kill` inside the container needs a
// `kill` in the image, and arbitrary images (distroless, scratch) have none.

import { readFileSync, readlinkSync } from "node:fs";
import type { ExecSignal } from "../contract.js";

/** The fields of /proc/PID/stat this module needs. */
export interface ProcStat {
  ppid: number;
  pgrp: number;
  session: number;
  /** Clock ticks since boot at which the process started (field 22): with the pid, an identity. */
  startTime: string;
}

/** Parses /proc/PID/stat; the command name (field 2) may hold spaces and parentheses. Null when malformed. */
export function parseProcStat(text: string): ProcStat | null {
  const close = text.lastIndexOf(")");
  if (close < 0) return null;
  const f = text.slice(close + 2).trim().split(" ");
  // f[0] is the state (field 3); the start time is field 22.
  if (f.length < 20 || !/^\d+$/.test(f[19]!)) return null;
  const [ppid, pgrp, session] = [f[1], f[2], f[3]].map(Number);
  if (!Number.isSafeInteger(ppid) || !Number.isSafeInteger(pgrp) || !Number.isSafeInteger(session)) return null;
  return { ppid: ppid!, pgrp: pgrp!, session: session!, startTime: f[19]! };
}

/** What the gateway reads of the host's processes (a test gives its own). */
export interface ProcReader {
  stat(pid: number): ProcStat | null;
  /** The pid namespace, e.g. "pid:[4026532262]", or null when the process cannot be read. */
  pidNamespace(pid: number): string | null;
}

export const hostProc: ProcReader = {
  stat(pid) {
    try {
      return parseProcStat(readFileSync(`/proc/${pid}/stat`, "utf8"));
    } catch {
      return null;
    }
  },
  pidNamespace(pid) {
    try {
      return readlinkSync(`/proc/${pid}/ns/pid`);
    } catch {
      return null;
    }
  },
};

/** An exec's process as identified once. */
export interface ExecProcess {
  pid: number;
  startTime: string;
  pidNs: string;
  /** The process leads its own group: the group is signalled, else the process alone. */
  leader: boolean;
}

export type Identified = { ok: true; process: ExecProcess } | { ok: false; gone: boolean; why: string };

/** Identifies `pid` (Docker's answer for a running exec) as a process of the workload container whose init is `workloadPid`. */
export function identifyExecProcess(pid: number, workloadPid: number, proc: ProcReader): Identified {
  const workloadNs = proc.pidNamespace(workloadPid);
  if (workloadNs === null) {
    return { ok: false, gone: false, why: `the gateway cannot see the workload's processes (pid ${workloadPid}); it must run as root in the Docker daemon's pid namespace` };
  }
  const stat = proc.stat(pid);
  const ns = proc.pidNamespace(pid);
  if (stat === null || ns === null) return { ok: false, gone: true, why: `process ${pid} has ended` };
  if (ns !== workloadNs) return { ok: false, gone: false, why: `process ${pid} is not in the workload's pid namespace` };
  return { ok: true, process: { pid, startTime: stat.startTime, pidNs: ns, leader: stat.pgrp === pid } };
}

/** Still the process identified (same start time, group leadership and namespace)? */
export function stillSameProcess(p: ExecProcess, proc: ProcReader): boolean {
  const stat = proc.stat(p.pid);
  if (stat === null || stat.startTime !== p.startTime || (stat.pgrp === p.pid) !== p.leader) return false;
  return proc.pidNamespace(p.pid) === p.pidNs;
}

/** Signals an identified process (its group when it leads one): "gone" when it no longer is that process. */
export function signalExecProcess(p: ExecProcess, sig: ExecSignal, proc: ProcReader, kill: (pid: number, sig: NodeJS.Signals) => void = (pid, sig) => process.kill(pid, sig)): "sent" | "gone" {
  if (!stillSameProcess(p, proc)) return "gone";
  try {
    kill(p.leader ? -p.pid : p.pid, `SIG${sig}`);
    return "sent";
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ESRCH") return "gone";
    throw err;
  }
}
