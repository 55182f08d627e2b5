// What two container verdicts mean for a sandbox. The order matters: the
// supervisor (the boundary) first, then the workload, and a lost channel never
// ends a sandbox.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { Phase } from "../../src/lifecycle/phases.js";
import type { Verdict } from "../../src/driver/docker/monitor/classify.js";
import { decide, type Decision } from "../../src/driver/docker/monitor/decide.js";

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
