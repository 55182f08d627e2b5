// The gateway's side of "an unbroken control session" (src/gateway/sandboxes/boundary-evidence.ts,
// liveSession) on a real BoundaryRegistry: the evidence the monitor compares before and
// after a runtime outage to skip the workload exec probe (docs/recovery.md).
import { afterEach, describe, expect, it } from "vitest";
import { BoundaryRegistry, type SessionLink } from "../../../src/gateway/control/boundary.js";
import { liveSession } from "../../../src/gateway/sandboxes/boundary-evidence.js";

let seq = 0;
const link = (sandboxId: string, generation: number): SessionLink => ({ sessionId: `session-${++seq}`, sandboxId, generation, send: () => undefined, close: () => undefined });

let b: BoundaryRegistry;
afterEach(() => b.close());

describe("liveSession: the id of this generation's live control session", () => {
  it("is the admitted session's id while it stays up, and null once it is gone", () => {
    b = new BoundaryRegistry();
    const control = { boundary: b };
    expect(liveSession(control, "sb", 1)).toBeNull();
    const l = link("sb", 1);
    b.admit(l);
    expect(liveSession(control, "sb", 1)).toBe(l.sessionId);
    b.detach(l, "closed");
    expect(liveSession(control, "sb", 1)).toBeNull();
  });

  it("a session that dropped and came back is another session (a new id)", () => {
    b = new BoundaryRegistry();
    const control = { boundary: b };
    const first = link("sb", 1);
    b.admit(first);
    const before = liveSession(control, "sb", 1);
    b.detach(first, "transport closed");
    b.admit(link("sb", 1));
    expect(liveSession(control, "sb", 1)).not.toBeNull();
    expect(liveSession(control, "sb", 1)).not.toBe(before);
  });

  it("a session of another generation is no evidence for this one", () => {
    b = new BoundaryRegistry();
    b.admit(link("sb", 1));
    expect(liveSession({ boundary: b }, "sb", 2)).toBeNull();
    expect(liveSession({ boundary: b }, "other", 1)).toBeNull();
  });

  it("a runtime without supervisors has no session", () => {
    b = new BoundaryRegistry();
    expect(liveSession(null, "sb", 1)).toBeNull();
  });
});
