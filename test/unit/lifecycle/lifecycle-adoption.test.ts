// What a gateway does at start with each sandbox it finds, by phase (src/lifecycle/adoption.ts):
// every phase × runtime recorded or not × teardown owed or not × a runtime that is watched or
// not, against a table written out by hand. Nothing running is torn down because the gateway
// restarted; only proven intents and owed teardowns remove anything.
import { describe, expect, it } from "vitest";
import { adoptionOf, type Adoption } from "../../../src/lifecycle/adoption.js";
import { PHASES, type Phase } from "../../../src/lifecycle/phases.js";

// [runtime, teardownOwed, watched] → action; written by hand, not derived from the implementation.
type Row = Record<"rtw" | "rt-" | "r-w" | "r--" | "-tw" | "-t-" | "--w" | "---", Adoption>;
const all = (a: Adoption): Row => ({ rtw: a, "rt-": a, "r-w": a, "r--": a, "-tw": a, "-t-": a, "--w": a, "---": a });
const running = (ready: Adoption): Row => ({ rtw: ready, "rt-": "hold", "r-w": ready, "r--": "hold", "-tw": "nothing", "-t-": "nothing", "--w": "nothing", "---": "nothing" });
const ended: Row = { rtw: "teardown", "rt-": "teardown", "r-w": "nothing", "r--": "nothing", "-tw": "teardown", "-t-": "teardown", "--w": "nothing", "---": "nothing" };

const TABLE: Record<Phase, Row> = {
  Provisioning: all("fail"),
  Ready: running("reverify"),
  Recovering: running("watch"),
  Stopping: all("stop"),
  Stopped: all("nothing"),
  Completed: ended,
  Error: ended,
  Deleting: all("delete"),
};

const KEYS = Object.keys(TABLE.Ready) as (keyof Row)[];
const cases = PHASES.flatMap((phase) => KEYS.map((k) => [phase, k] as const));

describe("adoptionOf: every phase × runtime × teardown owed × watched", () => {
  it.each(cases)("%s, %s", (phase, k) => {
    const left = { phase, runtime: k[0] === "r", teardownOwed: k[1] === "t" };
    expect(adoptionOf(left, k[2] === "w")).toBe(TABLE[phase][k]);
  });

  it("covers every phase", () => {
    expect(Object.keys(TABLE).sort()).toEqual([...PHASES].sort());
  });
});
