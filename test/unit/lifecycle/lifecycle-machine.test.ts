import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { describeAllowed, policyChangeRefused, transition, type LifecycleState } from "../../../src/lifecycle/machine.js";
import { EVENT_TYPES, PHASES, type EventType, type LifecycleEvent, type Phase } from "../../../src/lifecycle/phases.js";

const sample: Record<EventType, LifecycleEvent> = {
  start: { type: "start" },
  stop: { type: "stop" },
  delete: { type: "delete" },
  ready: { type: "ready" },
  provisionFailed: { type: "provisionFailed", detail: "No such image: nope" },
  contactLost: { type: "contactLost", cause: "events stream: UND_ERR_SOCKET" },
  recovered: { type: "recovered" },
  failed: { type: "failed", reason: { code: "SupervisorExited", exitCode: 137 } },
  completed: { type: "completed" },
  stopped: { type: "stopped" },
  deleted: { type: "deleted" },
};

// The contract, written out by hand: the next phase for every phase × event, or
// "-" for refused. It is deliberately not derived from the implementation.
const P = "Provisioning", R = "Ready", V = "Recovering", S = "Stopping", T = "Stopped", C = "Completed", E = "Error", D = "Deleting", X = "-";
const EXPECTED: Record<Phase, Record<EventType, Phase | "-">> = {
  //            start stop delete ready provisionFailed contactLost recovered failed completed stopped deleted
  Provisioning: { start: X, stop: S, delete: D, ready: R, provisionFailed: E, contactLost: X, recovered: X, failed: E, completed: C, stopped: X, deleted: X },
  Ready:        { start: X, stop: S, delete: D, ready: X, provisionFailed: X, contactLost: V, recovered: X, failed: E, completed: C, stopped: X, deleted: X },
  Recovering:   { start: X, stop: S, delete: D, ready: X, provisionFailed: X, contactLost: V, recovered: R, failed: E, completed: C, stopped: X, deleted: X },
  Stopping:     { start: X, stop: X, delete: D, ready: X, provisionFailed: X, contactLost: X, recovered: X, failed: X, completed: X, stopped: T, deleted: X },
  Stopped:      { start: P, stop: X, delete: D, ready: X, provisionFailed: X, contactLost: X, recovered: X, failed: X, completed: X, stopped: X, deleted: X },
  Completed:    { start: P, stop: X, delete: D, ready: X, provisionFailed: X, contactLost: X, recovered: X, failed: X, completed: X, stopped: X, deleted: X },
  Error:        { start: P, stop: S, delete: D, ready: X, provisionFailed: X, contactLost: X, recovered: X, failed: X, completed: X, stopped: X, deleted: X },
  Deleting:     { start: X, stop: X, delete: D, ready: X, provisionFailed: X, contactLost: X, recovered: X, failed: X, completed: X, stopped: X, deleted: D },
};

// What each refusal says an event is allowed from, written out by hand (the EXPECTED columns above).
const ALLOWED_FROM_TEXT: Record<EventType, string> = {
  start: "Stopped, Completed or Error",
  stop: "Provisioning, Ready, Recovering or Error",
  delete: "Provisioning, Ready, Recovering, Stopping, Stopped, Completed, Error or Deleting",
  ready: "Provisioning",
  provisionFailed: "Provisioning",
  contactLost: "Ready or Recovering",
  recovered: "Recovering",
  failed: "Provisioning, Ready or Recovering",
  completed: "Provisioning, Ready or Recovering",
  stopped: "Stopping",
  deleted: "Deleting",
};

const at = (phase: Phase, generation = 3): LifecycleState => ({
  phase,
  generation,
  reason: phase === "Error" ? { code: "BoundaryUnhealthy", detail: "session lost" } : null,
});

describe("lifecycle state machine: every phase × every event", () => {
  const cases = PHASES.flatMap((phase) => EVENT_TYPES.map((event) => ({ phase, event, want: EXPECTED[phase][event] })));
  it("the table covers every phase and event", () => {
    expect(cases).toHaveLength(PHASES.length * EVENT_TYPES.length);
  });

  it.each(cases)("$phase + $event → $want", ({ phase, event, want }) => {
    const t = transition(at(phase), sample[event], 3, "demo");
    if (want === "-") {
      expect(t.ok).toBe(false);
      if (!t.ok) {
        expect(t.code).toBe("not_allowed");
        expect(t.message).toBe(`cannot ${event} sandbox "demo": it is ${phase}; ${event} is allowed from ${ALLOWED_FROM_TEXT[event]}`);
      }
      return;
    }
    expect(t.ok).toBe(true);
    if (!t.ok) return;
    expect(t.next.phase).toBe(want);
    // Only start opens a new generation.
    expect(t.next.generation).toBe(event === "start" ? 4 : 3);
    // Error always carries a reason, and no other phase does.
    if (want === "Error") expect(t.next.reason).not.toBeNull();
    else expect(t.next.reason).toBeNull();
    expect(t.terminal).toBe(event === "deleted");
  });
});

// Whether a sandbox's policy may change (policy set, policy approve) in each phase, by hand.
// Recovering: yes, the control session needs no Docker (docs/recovery.md).
const POLICY_CHANGE: Record<Phase, boolean> = {
  Provisioning: true,
  Ready: true,
  Recovering: true,
  Stopping: false,
  Stopped: true,
  Completed: true,
  Error: true,
  Deleting: false,
};

describe("policy changes: every phase", () => {
  it.each(PHASES.map((phase) => ({ phase, allowed: POLICY_CHANGE[phase] })))("$phase: allowed $allowed", ({ phase, allowed }) => {
    expect(policyChangeRefused(phase, "demo")).toBe(
      allowed ? null : `cannot change the policy of sandbox "demo": it is ${phase}; policy changes are allowed from Provisioning, Ready, Recovering, Stopped, Completed or Error`,
    );
  });
});

describe("generation fence", () => {
  it.each(PHASES.flatMap((phase) => EVENT_TYPES.map((event) => ({ phase, event }))))(
    "$phase + $event computed for an older or newer generation is rejected",
    ({ phase, event }) => {
      for (const g of [2, 4]) {
        const t = transition(at(phase, 3), sample[event], g, "demo");
        expect(t.ok).toBe(false);
        if (!t.ok) {
          expect(t.code).toBe("stale_generation");
          expect(t.message).toContain(`generation ${g}`);
        }
      }
    },
  );

  it("property: an event for any generation other than the current one never applies", () => {
    fc.assert(
      fc.property(
        fc.constantFrom(...PHASES),
        fc.constantFrom(...EVENT_TYPES),
        fc.integer({ min: 1, max: 1000 }),
        fc.integer({ min: 1, max: 1000 }),
        (phase, event, current, computedFor) => {
          fc.pre(current !== computedFor);
          return !transition(at(phase, current), sample[event], computedFor).ok;
        },
      ),
    );
  });
});

describe("messages and reasons", () => {
  it("the stale-generation refusal names both generations", () => {
    expect(transition(at("Ready", 5), { type: "stop" }, 4, "demo")).toEqual({
      ok: false,
      code: "stale_generation",
      message: 'stop for sandbox "demo" was computed for generation 4, but it is at generation 5',
    });
  });

  it("without a name, messages say \"sandbox\"", () => {
    expect(transition(at("Ready"), { type: "ready" }, 3)).toEqual({
      ok: false,
      code: "not_allowed",
      message: 'cannot ready sandbox "sandbox": it is Ready; ready is allowed from Provisioning',
    });
    expect(transition(at("Ready"), { type: "ready" }, 2)).toMatchObject({ message: 'ready for sandbox "sandbox" was computed for generation 2, but it is at generation 3' });
  });

  it("describeAllowed names the phases of every user intent", () => {
    for (const event of ["start", "stop", "delete"] as const) expect(describeAllowed(event)).toBe(ALLOWED_FROM_TEXT[event]);
  });

  it("names the phase and what is allowed", () => {
    const t = transition(at("Ready"), { type: "start" }, 3, "demo");
    expect(t).toEqual({
      ok: false,
      code: "not_allowed",
      message: 'cannot start sandbox "demo": it is Ready; start is allowed from Stopped, Completed or Error',
    });
    expect(describeAllowed("stop")).toBe("Provisioning, Ready, Recovering or Error");
  });

  it("provisionFailed records the Docker message as the reason", () => {
    const t = transition(at("Provisioning"), { type: "provisionFailed", detail: "No such image: x" }, 3);
    expect(t.ok && t.next.reason).toEqual({ code: "ProvisioningFailed", detail: "No such image: x" });
  });

  it("a failure reason keeps its exit code", () => {
    const t = transition(at("Recovering"), { type: "failed", reason: { code: "SupervisorExited", exitCode: 7 } }, 3);
    expect(t.ok && t.next.reason).toEqual({ code: "SupervisorExited", exitCode: 7 });
  });

  it("a stop the gateway made on its own carries its reason through Stopping into Stopped; start clears it", () => {
    const reason = { code: "TtlExpired", detail: "its TTL of 1h ran out at 2026-12-01T11:00:00.000Z" } as const;
    for (const from of ["Provisioning", "Ready", "Recovering"] as const) {
      const stopping = transition(at(from), { type: "stop", reason }, 3);
      expect(stopping.ok && stopping.next).toEqual({ phase: "Stopping", generation: 3, reason });
      if (!stopping.ok) return;
      const stopped = transition(stopping.next, { type: "stopped" }, 3);
      expect(stopped.ok && stopped.next).toEqual({ phase: "Stopped", generation: 3, reason });
      if (!stopped.ok) return;
      const started = transition(stopped.next, { type: "start" }, 3);
      expect(started.ok && started.next).toEqual({ phase: "Provisioning", generation: 4, reason: null });
    }
    // A user's stop carries none, and a stop of an Error sandbox drops the failure's reason.
    const user = transition(at("Error"), { type: "stop" }, 3);
    expect(user.ok && user.next).toEqual({ phase: "Stopping", generation: 3, reason: null });
    const idle = { code: "IdleTimeout", detail: "no exec, connect or egress for 30m" } as const;
    const deleting = transition({ phase: "Stopping", generation: 3, reason: idle }, { type: "delete" }, 3);
    expect(deleting.ok && deleting.next.reason).toBeNull();
  });

  it("start from Error clears the reason and keeps nothing of the old generation", () => {
    const t = transition(at("Error"), { type: "start" }, 3);
    expect(t.ok && t.next).toEqual({ phase: "Provisioning", generation: 4, reason: null });
  });

  it("property: no sequence of observations resurrects a sandbox once stop or delete is persisted", () => {
    const observations: EventType[] = ["ready", "provisionFailed", "contactLost", "recovered", "failed", "completed"];
    fc.assert(
      fc.property(fc.constantFrom<Phase>("Stopping", "Deleting"), fc.array(fc.constantFrom(...observations), { maxLength: 20 }), (start, seq) => {
        let s = at(start);
        for (const ev of seq) {
          const t = transition(s, sample[ev], s.generation);
          if (t.ok) s = t.next;
        }
        return s.phase === start;
      }),
    );
  });
});
