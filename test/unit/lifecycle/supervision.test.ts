// The supervision of a generation through an outage, pure (src/lifecycle/supervision.ts).
// What two container verdicts mean for a sandbox: the supervisor (the boundary) first,
// then the workload, and a lost channel never ends a sandbox. Then the Recovering record:
// the two deadlines, the unbroken session that stands in for the exec probe, and a
// boundary loss that waits for an inspect before it is believed.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { Phase } from "../../../src/lifecycle/phases.js";
import { adopted, decide, entered, onVerdicts, overdue, recheckDue, unbrokenSession, type BoundaryPending, type Decision, type Recovery, type Verdict } from "../../../src/lifecycle/supervision.js";

const instance = { id: "c0ffee", startedAt: "2025-05-01T10:00:00Z" };
const FINISHED = "2025-05-01T10:05:00.5Z";

// Exited(0) and Exited(137) are separate columns: only a workload's 0 completes.
const V = {
  Exit0: { kind: "Exited", code: 0, finishedAt: FINISHED, instance },
  Exit137: { kind: "Exited", code: 137, finishedAt: FINISHED, instance },
  Changed: { kind: "InstanceChanged", detail: "started at a later time" },
  Gone: { kind: "Gone", detail: "container c0ffee no longer exists" },
  Lost: { kind: "ChannelLost", cause: "transport failure ECONNRESET" },
  Alive: { kind: "Alive" },
} satisfies Record<string, Verdict>;
type Col = keyof typeof V;
const COLS = Object.keys(V) as Col[];

// Written out by hand, not derived from the implementation.
// F:<code> fail, C complete, L lost, OK = verify in Recovering / none in Ready.
type Cell = `F:${string}` | "C" | "L" | "OK";
const TABLE: Record<Col, Record<Col, Cell>> = {
  //        workload →  Exit0                   Exit137                 Changed                   Gone                     Lost                    Alive
  Exit0:   { Exit0: "F:SupervisorExited", Exit137: "F:SupervisorExited", Changed: "F:SupervisorExited", Gone: "F:SupervisorExited", Lost: "F:SupervisorExited", Alive: "F:SupervisorExited" },
  Exit137: { Exit0: "F:SupervisorExited", Exit137: "F:SupervisorExited", Changed: "F:SupervisorExited", Gone: "F:SupervisorExited", Lost: "F:SupervisorExited", Alive: "F:SupervisorExited" },
  Changed: { Exit0: "F:SupervisorReplaced", Exit137: "F:SupervisorReplaced", Changed: "F:SupervisorReplaced", Gone: "F:SupervisorReplaced", Lost: "F:SupervisorReplaced", Alive: "F:SupervisorReplaced" },
  Gone:    { Exit0: "F:SupervisorMissing", Exit137: "F:SupervisorMissing", Changed: "F:SupervisorMissing", Gone: "F:SupervisorMissing", Lost: "F:SupervisorMissing", Alive: "F:SupervisorMissing" },
  Lost:    { Exit0: "C", Exit137: "F:WorkloadExited", Changed: "F:WorkloadReplaced", Gone: "F:WorkloadMissing", Lost: "L", Alive: "L" },
  Alive:   { Exit0: "C", Exit137: "F:WorkloadExited", Changed: "F:WorkloadReplaced", Gone: "F:WorkloadMissing", Lost: "L", Alive: "OK" },
};

const PHASES: Phase[] = ["Ready", "Recovering"];
const cases = PHASES.flatMap((phase) => COLS.flatMap((sup) => COLS.map((work) => [phase, sup, work] as const)));

describe("decide: every supervisor × workload × phase", () => {
  it.each(cases)("%s, supervisor %s, workload %s", (phase, sup, work) => {
    const d = decide(phase, { supervisor: V[sup], workload: V[work] });
    const cell = TABLE[sup][work];
    if (cell === "C") expect(d).toEqual({ action: "complete" });
    else if (cell === "L") expect(d.action).toBe("lost");
    else if (cell === "OK") expect(d).toEqual({ action: phase === "Recovering" ? "verify" : "none" });
    else {
      expect(d.action).toBe("fail");
      expect(d.action === "fail" && d.reason.code).toBe(cell.slice(2));
    }
  });
});

describe("decide: the reasons carry the evidence", () => {
  it("a supervisor exit carries its code, even 0", () => {
    expect(decide("Ready", { supervisor: V.Exit0, workload: V.Alive })).toEqual({
      action: "fail",
      reason: { code: "SupervisorExited", exitCode: 0, detail: `finished at ${FINISHED}` },
    });
    expect(decide("Recovering", { supervisor: V.Exit137, workload: V.Exit0 })).toMatchObject({ action: "fail", reason: { code: "SupervisorExited", exitCode: 137 } });
  });

  it("a workload exit carries its code", () => {
    const w: Verdict = { kind: "Exited", code: 143, finishedAt: FINISHED, instance };
    expect(decide("Ready", { supervisor: V.Alive, workload: w })).toEqual({
      action: "fail",
      reason: { code: "WorkloadExited", exitCode: 143, detail: `finished at ${FINISHED}` },
    });
  });

  it("an unknown workload exit code (-1) fails, it does not complete", () => {
    const w: Verdict = { kind: "Exited", code: -1, finishedAt: "", instance };
    expect(decide("Ready", { supervisor: V.Alive, workload: w })).toMatchObject({ action: "fail", reason: { code: "WorkloadExited", exitCode: -1 } });
  });

  it("Replaced and Missing carry the verdict's detail", () => {
    expect(decide("Ready", { supervisor: V.Changed, workload: V.Alive })).toEqual({ action: "fail", reason: { code: "SupervisorReplaced", detail: V.Changed.detail } });
    expect(decide("Ready", { supervisor: V.Gone, workload: V.Alive })).toEqual({ action: "fail", reason: { code: "SupervisorMissing", detail: V.Gone.detail } });
    expect(decide("Ready", { supervisor: V.Alive, workload: V.Changed })).toEqual({ action: "fail", reason: { code: "WorkloadReplaced", detail: V.Changed.detail } });
    expect(decide("Ready", { supervisor: V.Alive, workload: V.Gone })).toEqual({ action: "fail", reason: { code: "WorkloadMissing", detail: V.Gone.detail } });
  });

  it("lost names the channel that was lost, the supervisor's first", () => {
    const sup: Verdict = { kind: "ChannelLost", cause: "supervisor inspect timed out" };
    const work: Verdict = { kind: "ChannelLost", cause: "workload inspect reset" };
    expect(decide("Ready", { supervisor: sup, workload: work })).toEqual({ action: "lost", cause: sup.cause });
    expect(decide("Ready", { supervisor: V.Alive, workload: work })).toEqual({ action: "lost", cause: work.cause });
    expect(decide("Recovering", { supervisor: sup, workload: V.Alive })).toEqual({ action: "lost", cause: sup.cause });
  });
});

// ---- properties ------------------------------------------------------------------------

const verdictArb: fc.Arbitrary<Verdict> = fc.oneof(
  fc.record({ kind: fc.constant("Exited" as const), code: fc.integer({ min: -1, max: 255 }), finishedAt: fc.string(), instance: fc.constant(instance) }),
  fc.record({ kind: fc.constant("InstanceChanged" as const), detail: fc.string() }),
  fc.record({ kind: fc.constant("Gone" as const), detail: fc.string() }),
  fc.record({ kind: fc.constant("ChannelLost" as const), cause: fc.string() }),
  fc.constant({ kind: "Alive" as const }),
);
const lostArb = fc.string().map((cause): Verdict => ({ kind: "ChannelLost", cause }));
const phaseArb = fc.constantFrom<Phase>(...PHASES);
const terminal = (v: Verdict) => v.kind === "Exited" || v.kind === "InstanceChanged" || v.kind === "Gone";

describe("decide: properties", () => {
  it("ChannelLost on both never fails (and never completes)", () => {
    fc.assert(
      fc.property(phaseArb, lostArb, lostArb, (phase, s, w) => {
        const d = decide(phase, { supervisor: s, workload: w });
        expect(d.action).toBe("lost");
      }),
    );
  });

  it("fail or complete only on a terminal verdict; ChannelLost without one is lost", () => {
    fc.assert(
      fc.property(phaseArb, verdictArb, verdictArb, (phase, s, w) => {
        const d: Decision = decide(phase, { supervisor: s, workload: w });
        if (d.action === "fail" || d.action === "complete") expect(terminal(s) || terminal(w)).toBe(true);
        if (d.action === "complete") expect(w).toMatchObject({ kind: "Exited", code: 0 });
        if (terminal(s)) expect(d.action).toBe("fail");
        if (!terminal(s) && !terminal(w) && (s.kind === "ChannelLost" || w.kind === "ChannelLost")) expect(d.action).toBe("lost");
        if (d.action === "verify" || d.action === "none") expect([s.kind, w.kind]).toEqual(["Alive", "Alive"]);
      }),
      { numRuns: 2000 },
    );
  });
});

// ---- the Recovering record, the deadlines and the evidence ------------------------------

const D = { recoveryMs: 60_000, boundaryMs: 30_000 };

describe("entered and adopted: the Recovering record", () => {
  it("a runtime loss from Ready keeps the session that was up; a boundary loss never does", () => {
    expect(entered(1_000, "runtime", "stream cut", "s-1")).toEqual({ since: 1_000, cause: "runtime", problem: "stream cut", session: "s-1" });
    expect(entered(1_000, "runtime", "stream cut", null)).toEqual({ since: 1_000, cause: "runtime", problem: "stream cut" });
    expect(entered(1_000, "boundary", "heartbeat stale", "s-1")).toEqual({ since: 1_000, cause: "boundary", problem: "heartbeat stale" });
  });

  it("an adopted generation's deadline runs from when it entered Recovering (carried over a gateway restart), never with a session", () => {
    // Strict: a record without a problem has no problem key at all.
    expect(adopted(500, 9_000)).toStrictEqual({ since: 500, cause: "runtime" });
    expect(adopted(undefined, 9_000)).toStrictEqual({ since: 9_000, cause: "runtime" });
    expect(adopted(500, 9_000, "boundary", "no control session")).toEqual({ since: 500, cause: "boundary", problem: "no control session" });
  });
});

describe("overdue: which deadline, and the reason it names", () => {
  const runtime: Recovery = { since: 0, cause: "runtime", problem: "stream cut" };
  const boundary: Recovery = { since: 0, cause: "boundary", problem: "supervisor health: refused" };

  it("the runtime deadline: not at it, only past it; without Docker the reason is RuntimeUnavailable", () => {
    expect(overdue(runtime, false, 60_000, D)).toBeNull();
    expect(overdue(runtime, false, 60_001, D)).toEqual({ code: "RuntimeUnavailable", detail: "Docker unreachable for more than 60 s" });
  });

  it("past the runtime deadline with Docker answering: BoundaryUnhealthy naming the last problem", () => {
    expect(overdue(runtime, true, 60_001, D)).toEqual({ code: "BoundaryUnhealthy", detail: "boundary not re-verified within 60 s (stream cut)" });
    expect(overdue({ since: 0, cause: "runtime" }, true, 60_001, D)).toEqual({ code: "BoundaryUnhealthy", detail: "boundary not re-verified within 60 s" });
  });

  it("a boundary loss has the shorter deadline while Docker answers, the runtime one while it does not", () => {
    expect(overdue(boundary, true, 30_000, D)).toBeNull();
    expect(overdue(boundary, true, 30_001, D)).toEqual({ code: "BoundaryUnhealthy", detail: "boundary not re-verified within 30 s (supervisor health: refused)" });
    expect(overdue(boundary, false, 30_001, D)).toBeNull();
    expect(overdue(boundary, false, 60_001, D)).toMatchObject({ code: "RuntimeUnavailable" });
    // A runtime loss never gets the boundary's deadline.
    expect(overdue(runtime, true, 30_001, D)).toBeNull();
  });

  it("the deadline counts from when it entered Recovering, not from the epoch", () => {
    const later: Recovery = { since: 1_000_000, cause: "runtime" };
    expect(overdue(later, false, 1_060_000, D)).toBeNull();
    expect(overdue(later, false, 1_060_001, D)).toMatchObject({ code: "RuntimeUnavailable" });
  });

  it("seconds are rounded for the message", () => {
    expect(overdue(runtime, false, 2_000, { recoveryMs: 1_499, boundaryMs: 1 })).toMatchObject({ detail: "Docker unreachable for more than 1 s" });
    expect(overdue(runtime, false, 2_000, { recoveryMs: 1_500, boundaryMs: 1 })).toMatchObject({ detail: "Docker unreachable for more than 2 s" });
  });
});

describe("unbrokenSession: when a control session stands in for the exec probe", () => {
  it("only the very session that was up before the loss, still up now", () => {
    expect(unbrokenSession({ since: 0, cause: "runtime", session: "s-1" }, "s-1")).toBe("s-1");
    expect(unbrokenSession({ since: 0, cause: "runtime", session: "s-1" }, "s-2")).toBeNull();
    expect(unbrokenSession({ since: 0, cause: "runtime", session: "s-1" }, null)).toBeNull();
  });

  it("never without a session recorded (adopted, boundary loss, no record)", () => {
    expect(unbrokenSession({ since: 0, cause: "runtime" }, "s-1")).toBeNull();
    expect(unbrokenSession({ since: 0, cause: "boundary" }, "s-1")).toBeNull();
    expect(unbrokenSession(null, "s-1")).toBeNull();
  });
});

describe("recheckDue", () => {
  it("at the interval, not before", () => {
    expect(recheckDue(1_000, 1_999, 1_000)).toBe(false);
    expect(recheckDue(1_000, 2_000, 1_000)).toBe(true);
    expect(recheckDue(0, 5, 0)).toBe(true);
  });
});

describe("onVerdicts: the next step", () => {
  const both = (supervisor: Verdict, workload: Verdict) => ({ supervisor, workload });
  const reported: BoundaryPending = { problem: "heartbeat stale", stage: "reported" };

  it("maps the decision: fail, complete, lose (a runtime loss, naming its cause), verify", () => {
    expect(onVerdicts("Ready", both(V.Exit137, V.Alive), null)).toMatchObject({ do: "fail", reason: { code: "SupervisorExited", exitCode: 137 } });
    expect(onVerdicts("Ready", both(V.Alive, V.Exit0), null)).toEqual({ do: "complete" });
    expect(onVerdicts("Ready", both(V.Lost, V.Alive), null)).toEqual({ do: "lose", cause: "runtime", problem: V.Lost.cause });
    expect(onVerdicts("Recovering", both(V.Alive, V.Alive), null)).toEqual({ do: "verify" });
    expect(onVerdicts("Ready", both(V.Alive, V.Alive), null)).toEqual({ do: "nothing" });
  });

  it("a reported boundary loss is not believed at the first inspect: look again after the grace", () => {
    expect(onVerdicts("Ready", both(V.Alive, V.Alive), reported)).toEqual({ do: "recheck", boundary: { problem: "heartbeat stale", stage: "confirming" } });
  });

  it("the supervisor still alive at the second look: the boundary is lost (Recovering, its own cause)", () => {
    expect(onVerdicts("Ready", both(V.Alive, V.Alive), { problem: "heartbeat stale", stage: "confirming" })).toEqual({ do: "lose", cause: "boundary", problem: "boundary unhealthy: heartbeat stale" });
  });

  it("a proven exit wins over a pending boundary loss, at either look: Error straight from Ready", () => {
    for (const stage of ["reported", "confirming"] as const) {
      expect(onVerdicts("Ready", both(V.Exit137, V.Alive), { problem: "no control session", stage })).toMatchObject({ do: "fail", reason: { code: "SupervisorExited" } });
      expect(onVerdicts("Ready", both(V.Lost, V.Alive), { problem: "no control session", stage })).toMatchObject({ do: "lose", cause: "runtime" });
      expect(onVerdicts("Recovering", both(V.Alive, V.Alive), { problem: "no control session", stage })).toEqual({ do: "verify" });
    }
  });
});
