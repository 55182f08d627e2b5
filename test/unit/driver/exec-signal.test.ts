// Signals for an exec's process group from the host: /proc/PID/stat read right, a pid
// trusted only while it is the process identified (pid reuse), only in the workload's
// pid namespace, and a real process group ended by one signal.
import { spawn } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { hostProc, identifyExecProcess, parseProcStat, signalExecProcess, stillSameProcess, type ProcReader, type ProcStat } from "../../../src/driver/docker/exec-signal.js";
import { eventually } from "../../support/gateway-fixture.js";

// Fields 3-22 of a real /proc/PID/stat line after the command name.
const rest = (ppid: number, pgrp: number, session: number, start: number): string =>
  `S ${ppid} ${pgrp} ${session} 0 -1 4194560 100 0 0 0 0 0 0 0 20 0 1 0 ${start} 2002944 300 18446744073709551615`;

describe("parseProcStat", () => {
  it("reads ppid, process group, session and start time", () => {
    expect(parseProcStat(`4352 (sleep) ${rest(4219, 4352, 4352, 2905547)}`)).toEqual({ ppid: 4219, pgrp: 4352, session: 4352, startTime: "2905547" });
  });

  it("is not fooled by a command name with spaces and parentheses (the workload names its processes)", () => {
    expect(parseProcStat(`77 (a) 1 1 1 (evil) ${rest(5, 77, 77, 42)}`)).toEqual({ ppid: 5, pgrp: 77, session: 77, startTime: "42" });
  });

  it("is null for what is not a stat line", () => {
    for (const t of ["", "garbage", "1 (x) S 1 2", `1 (x) ${rest(1, 1, 1, 1).replace(/ 1 0 \d+ /, " 1 0 x ")}`]) expect(parseProcStat(t)).toBeNull();
  });
});

/** A scripted /proc: pid → stat and namespace. */
function fakeProc(entries: Record<number, { stat: ProcStat; ns: string }>): ProcReader & { entries: typeof entries } {
  return { entries, stat: (pid) => entries[pid]?.stat ?? null, pidNamespace: (pid) => entries[pid]?.ns ?? null };
}
const st = (pgrp: number, start: string): ProcStat => ({ ppid: 1, pgrp, session: pgrp, startTime: start });

describe("identify, re-check, signal", () => {
  const WL = 100;
  const NS = "pid:[4026532262]";

  it("identifies a group leader in the workload's namespace and signals its whole group", () => {
    const proc = fakeProc({ [WL]: { stat: st(WL, "10"), ns: NS }, 200: { stat: st(200, "50"), ns: NS } });
    const id = identifyExecProcess(200, WL, proc);
    expect(id).toEqual({ ok: true, process: { pid: 200, startTime: "50", pidNs: NS, leader: true } });
    const kills: [number, string][] = [];
    expect(id.ok && signalExecProcess(id.process, "INT", proc, (pid, sig) => void kills.push([pid, sig]))).toBe("sent");
    expect(kills).toEqual([[-200, "SIGINT"]]);
  });

  it("a process that does not lead its group is signalled alone", () => {
    const proc = fakeProc({ [WL]: { stat: st(WL, "10"), ns: NS }, 201: { stat: st(5, "51"), ns: NS } });
    const id = identifyExecProcess(201, WL, proc);
    const kills: number[] = [];
    expect(id.ok && signalExecProcess(id.process, "TERM", proc, (pid) => void kills.push(pid))).toBe("sent");
    expect(kills).toEqual([201]);
  });

  it("pid reuse: a pid whose start time, leadership or namespace changed is not signalled", () => {
    const proc = fakeProc({ [WL]: { stat: st(WL, "10"), ns: NS }, 200: { stat: st(200, "50"), ns: NS } });
    const id = identifyExecProcess(200, WL, proc);
    if (!id.ok) throw new Error("not identified");
    const kills: number[] = [];
    const kill = (pid: number): void => void kills.push(pid);
    for (const later of [
      { stat: st(200, "999"), ns: NS }, // the number reused by a later process
      { stat: st(7, "50"), ns: NS }, // no longer the leader
      { stat: st(200, "50"), ns: "pid:[4026531836]" }, // another namespace (the host's)
    ]) {
      proc.entries[200] = later;
      expect(stillSameProcess(id.process, proc)).toBe(false);
      expect(signalExecProcess(id.process, "KILL", proc, kill)).toBe("gone");
    }
    delete proc.entries[200];
    expect(signalExecProcess(id.process, "KILL", proc, kill)).toBe("gone");
    expect(kills).toEqual([]);
  });

  it("refuses a pid outside the workload's namespace, and says when the gateway cannot see the workload at all", () => {
    const proc = fakeProc({ [WL]: { stat: st(WL, "10"), ns: NS }, 300: { stat: st(300, "60"), ns: "pid:[4026531836]" } });
    expect(identifyExecProcess(300, WL, proc)).toEqual({ ok: false, gone: false, why: "process 300 is not in the workload's pid namespace" });
    expect(identifyExecProcess(301, WL, proc)).toEqual({ ok: false, gone: true, why: "process 301 has ended" });
    expect(identifyExecProcess(300, 999, proc)).toMatchObject({ ok: false, gone: false, why: expect.stringMatching(/^the gateway cannot see the workload's processes \(pid 999\)/) });
  });

  it("a kill that finds no process is 'gone'; another error is thrown", () => {
    const proc = fakeProc({ [WL]: { stat: st(WL, "10"), ns: NS }, 200: { stat: st(200, "50"), ns: NS } });
    const id = identifyExecProcess(200, WL, proc);
    if (!id.ok) throw new Error("not identified");
    const fail = (code: string) => () => {
      throw Object.assign(new Error(code), { code });
    };
    expect(signalExecProcess(id.process, "INT", proc, fail("ESRCH"))).toBe("gone");
    expect(() => signalExecProcess(id.process, "INT", proc, fail("EPERM"))).toThrow("EPERM");
  });
});

describe("a real process group on this host", () => {
  it("one SIGINT to the group ends the shell and the foreground child it waits for (sh -c 'sleep; echo'), as Ctrl-C in a terminal", async () => {
    // A session of its own, as runc starts an exec: the shell leads it, sleep is in it.
    const child = spawn("/bin/sh", ["-c", "sleep 1000; echo after"], { detached: true, stdio: ["ignore", "pipe", "ignore"] });
    let out = "";
    child.stdout.on("data", (b: Buffer) => (out += b.toString()));
    try {
      // The child counts once it is sleep: between fork and exec it is still the shell, and
      // a Ctrl-C in that window (dash forks with vfork) is a different race than the one tested.
      const sleepPid = await eventually(() => {
        try {
          const kids = readFileSync(`/proc/${child.pid}/task/${child.pid}/children`, "utf8").trim();
          const kid = kids ? Number(kids.split(" ")[0]) : undefined;
          return kid !== undefined && readFileSync(`/proc/${kid}/comm`, "utf8").trim() === "sleep" ? kid : undefined;
        } catch {
          return undefined;
        }
      }, 10_000, "the shell's child to be sleep");
      const id = identifyExecProcess(child.pid!, process.pid, hostProc);
      expect(id).toMatchObject({ ok: true, process: { pid: child.pid, leader: true } });
      if (!id.ok) return;
      expect(signalExecProcess(id.process, "INT", hostProc)).toBe("sent");
      expect(await eventually(() => (child.exitCode !== null || child.signalCode !== null ? [child.exitCode, child.signalCode] : undefined), 10_000, "the shell to end")).toEqual([null, "SIGINT"]);
      await eventually(() => (existsSync(`/proc/${sleepPid}`) ? undefined : true), 10_000, "the child sleep to end with its group");
      expect(out).toBe("");
      // The leader is gone (and reaped): its pid is never signalled again.
      expect(signalExecProcess(id.process, "KILL", hostProc)).toBe("gone");
    } finally {
      // Whatever failed above, no shell or sleep outlives the test.
      try {
        process.kill(-child.pid!, "SIGKILL");
      } catch {
        /* already gone */
      }
    }
  });
});
