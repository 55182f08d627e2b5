// BoundaryRegistry.forget (src/gateway/control/boundary.ts): a deleted sandbox leaves
// nothing behind. Its desired policy, live session and last reported health are one
// record, so a sandbox id used again starts from nothing.
import { afterEach, describe, expect, it } from "vitest";
import { BoundaryRegistry, type BoundaryHealth, type SessionLink } from "../../../src/gateway/control/boundary.js";
import { policyFromObject, type Policy } from "../../../src/policy/index.js";
import { ACCEPTS_HOST_ADDRESSES, type GatewayMessage } from "../../../src/protocol/wire.js";

function denyAll(): Policy {
  const r = policyFromObject({ version: 1, network: { rules: [] } });
  if (!r.ok) throw new Error(r.errors.join("; "));
  return r.policy;
}

let seq = 0;
function link(sandboxId: string, generation = 1): SessionLink & { sent: GatewayMessage["type"][]; closed: string[] } {
  const sent: GatewayMessage["type"][] = [];
  const closed: string[] = [];
  return { sessionId: `s-${++seq}`, sandboxId, generation, accepts: new Set([ACCEPTS_HOST_ADDRESSES]), sent, closed, send: (m) => sent.push(m.type), close: (_code, reason) => closed.push(reason) };
}

let b: BoundaryRegistry;
afterEach(() => b.close());

describe("BoundaryRegistry.forget: nothing of the sandbox is kept", () => {
  it("locks its session down, and its policy and session are gone", () => {
    b = new BoundaryRegistry();
    b.setDesired("a", 1, denyAll(), 1);
    b.setDesired("b", 1, denyAll(), 1);
    const l = link("a");
    b.admit(l);
    expect(b.sandboxes().sort()).toEqual(["a", "b"]);
    b.forget("a");
    expect(l.sent).toContain("lockdown");
    expect(l.closed).toEqual(["sandbox_deleted"]);
    expect(b.sandboxes()).toEqual(["b"]);
    expect(b.health("a")).toMatchObject({ session: "down", desiredRevision: null });
    // Its session is no longer among those sent to.
    b.setHostAddresses(["192.0.2.1"]);
    expect(l.sent).not.toContain("hostAddresses");
    // The same id admitted again: no policy of the old sandbox is pushed to it.
    const again = link("a");
    expect(b.admit(again)).toEqual({ ok: true });
    expect(again.sent).toEqual(["welcome", "hostAddresses"]);
  });

  it("its last reported health goes too: the same health is reported again for a sandbox of the same id", () => {
    b = new BoundaryRegistry();
    const seen: BoundaryHealth[] = [];
    b.onChange((h) => seen.push(h));
    b.setDesired("a", 1, denyAll(), 1);
    b.setDesired("a", 1, denyAll(), 1);
    expect(seen).toHaveLength(1);
    b.forget("a");
    b.setDesired("a", 1, denyAll(), 1);
    expect(seen).toHaveLength(2);
    expect(seen[1]).toEqual(seen[0]);
  });
});
