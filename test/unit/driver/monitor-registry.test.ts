// One monitor per sandbox, always the newest generation: a duplicate or a stale
// monitor cannot exist, whatever order arm and disarm arrive in.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { RuntimeRecord } from "../../../src/driver/contract.js";
import type { Watched } from "../../../src/driver/contract.js";
import { MonitorRegistry, type ArmResult } from "../../../src/driver/docker/monitor/registry.js";

function watched(sandboxId: string, generation: number, tag = ""): Watched {
  const identity = (role: string) => ({ id: `${sandboxId}-${generation}-${role}${tag}`, name: `sg-${sandboxId}-${role}`, imageId: "sha256:1", startedAt: "2025-05-01T10:00:00Z", pid: 100 + generation });
  const record: RuntimeRecord = { generation, nonce: `nonce-${generation}${tag}`, workload: identity("workload"), supervisor: identity("supervisor"), proxyUrl: "http://10.0.0.2:3128" };
  return { sandboxId, name: `box-${sandboxId}`, generation, record };
}

describe("MonitorRegistry", () => {
  it("arm → armed", () => {
    const reg = new MonitorRegistry();
    const w = watched("a", 1);
    expect(reg.arm(w)).toBe("armed");
    expect(reg.size).toBe(1);
    expect(reg.get("a")).toBe(w);
    expect(reg.isCurrent("a", 1)).toBe(true);
    expect(reg.all()).toEqual([w]);
  });

  it("the same generation again → already-armed, no duplicate, the first record stays", () => {
    const reg = new MonitorRegistry();
    const first = watched("a", 2);
    reg.arm(first);
    expect(reg.arm(watched("a", 2, "-again"))).toBe("already-armed");
    expect(reg.size).toBe(1);
    expect(reg.all()).toHaveLength(1);
    expect(reg.get("a")).toBe(first);
  });

  it("an older generation → refused-older, the newer stays", () => {
    const reg = new MonitorRegistry();
    const newer = watched("a", 5);
    reg.arm(newer);
    expect(reg.arm(watched("a", 4))).toBe("refused-older");
    expect(reg.arm(watched("a", 1))).toBe("refused-older");
    expect(reg.get("a")).toBe(newer);
    expect(reg.isCurrent("a", 4)).toBe(false);
    expect(reg.size).toBe(1);
  });

  it("a newer generation → replaced-older", () => {
    const reg = new MonitorRegistry();
    reg.arm(watched("a", 1));
    const newer = watched("a", 2);
    expect(reg.arm(newer)).toBe("replaced-older");
    expect(reg.get("a")).toBe(newer);
    expect(reg.isCurrent("a", 1)).toBe(false);
    expect(reg.size).toBe(1);
  });

  it("sandboxes are independent", () => {
    const reg = new MonitorRegistry();
    expect(reg.arm(watched("a", 3))).toBe("armed");
    expect(reg.arm(watched("b", 1))).toBe("armed");
    expect(reg.size).toBe(2);
    expect(reg.disarm("a")).toBe(true);
    expect(reg.get("b")?.generation).toBe(1);
  });

  it("disarm with a wrong generation does nothing", () => {
    const reg = new MonitorRegistry();
    const w = watched("a", 3);
    reg.arm(w);
    expect(reg.disarm("a", 2)).toBe(false);
    expect(reg.disarm("a", 4)).toBe(false);
    expect(reg.get("a")).toBe(w);
    expect(reg.disarm("a", 3)).toBe(true);
    expect(reg.get("a")).toBeUndefined();
    expect(reg.size).toBe(0);
  });

  it("disarm of an unknown sandbox is false; disarm without a generation removes any", () => {
    const reg = new MonitorRegistry();
    expect(reg.disarm("nope")).toBe(false);
    reg.arm(watched("a", 7));
    expect(reg.disarm("a")).toBe(true);
    expect(reg.disarm("a")).toBe(false);
    expect(reg.arm(watched("a", 8))).toBe("armed");
  });
});

// ---- property: random arm/disarm sequences ------------------------------------------

type Op =
  | { op: "arm"; sandboxId: string; generation: number }
  | { op: "disarm"; sandboxId: string; generation?: number };

const idArb = fc.constantFrom("a", "b", "c");
const genArb = fc.integer({ min: 1, max: 6 });
const opArb: fc.Arbitrary<Op> = fc.oneof(
  { weight: 5, arbitrary: fc.record({ op: fc.constant("arm" as const), sandboxId: idArb, generation: genArb }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant("disarm" as const), sandboxId: idArb }) },
  { weight: 2, arbitrary: fc.record({ op: fc.constant("disarm" as const), sandboxId: idArb, generation: genArb }) },
);

describe("MonitorRegistry: property", () => {
  it("at most one entry per sandbox, always the highest generation armed since the last disarm", () => {
    fc.assert(
      fc.property(fc.array(opArb, { maxLength: 60 }), (ops) => {
        const reg = new MonitorRegistry();
        // Generations armed per sandbox since its monitor was last removed.
        const since = new Map<string, number[]>();
        const firstArmed = new Map<string, Watched>();
        for (const o of ops) {
          const gens = since.get(o.sandboxId) ?? [];
          const top = gens.length > 0 ? Math.max(...gens) : undefined;
          if (o.op === "arm") {
            const w = watched(o.sandboxId, o.generation, `#${gens.length}`);
            const r: ArmResult = reg.arm(w);
            const want: ArmResult = top === undefined ? "armed" : o.generation === top ? "already-armed" : o.generation < top ? "refused-older" : "replaced-older";
            expect(r).toBe(want);
            since.set(o.sandboxId, [...gens, o.generation]);
            if (r === "armed" || r === "replaced-older") firstArmed.set(o.sandboxId, w);
          } else {
            const removes = top !== undefined && (o.generation === undefined || o.generation === top);
            expect(reg.disarm(o.sandboxId, o.generation)).toBe(removes);
            if (removes) since.delete(o.sandboxId);
          }
          // The invariants, after every step.
          const all = reg.all();
          expect(new Set(all.map((w) => w.sandboxId)).size).toBe(all.length);
          expect(reg.size).toBe(since.size);
          for (const id of ["a", "b", "c"]) {
            const g = since.get(id);
            if (!g) {
              expect(reg.get(id)).toBeUndefined();
              continue;
            }
            const highest = Math.max(...g);
            expect(reg.get(id)?.generation).toBe(highest);
            expect(reg.isCurrent(id, highest)).toBe(true);
            // The entry is the one armed first at that generation, not a later duplicate.
            expect(reg.get(id)).toBe(firstArmed.get(id));
          }
        }
      }),
      { numRuns: 1000 },
    );
  });
});
