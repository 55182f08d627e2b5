// Generations keeps the handles that hold a Recovering record in a set of their own, so
// the supervision clock's recovering() is O(recovering), not O(sandboxes). The set must
// follow the handles: entering and leaving Recovering, and every way a handle goes.
import { pino } from "pino";
import { describe, expect, it } from "vitest";
import { entered } from "../../../src/lifecycle/supervision.js";
import { Generations } from "../../../src/gateway/sandboxes/generations.js";

const sandbox = (id: string, generation = 1) => ({ id, name: `n-${id}`, generation });
const lost = () => entered(Date.now(), "runtime", "the Docker events stream is down", null);
const ids = (g: Generations) => g.recovering().map((h) => `${h.sandboxId}@${h.generation}`).sort();

describe("Generations.recovering(): the handles with a Recovering record", () => {
  it("lists a handle while it recovers, and no more once its record is cleared", () => {
    const g = new Generations(null, pino({ level: "silent" }));
    const a = g.open(sandbox("a"), "na");
    g.open(sandbox("b"), "nb");
    expect(ids(g)).toEqual([]);
    a.recover(lost());
    expect(ids(g)).toEqual(["a@1"]);
    a.clearRecovery();
    expect(ids(g)).toEqual([]);
    a.clearRecovery();
    expect(ids(g)).toEqual([]);
  });

  it("drops a handle that goes while recovering: deleted, superseded, ended, torn down, shut down", () => {
    const g = new Generations(null, pino({ level: "silent" }));
    for (const id of ["del", "sup", "end", "all"]) g.open(sandbox(id), id).recover(lost());
    expect(ids(g)).toEqual(["all@1", "del@1", "end@1", "sup@1"]);
    g.settle("del", 1, null);
    g.open(sandbox("sup", 2), "sup2");
    const owed = g.get("end")!;
    g.settle("end", 1, "Error");
    expect(ids(g)).toEqual(["all@1"]);
    // Owed a teardown: a late record is listed until the teardown disposes the handle.
    owed.recover(lost());
    expect(ids(g)).toEqual(["all@1", "end@1"]);
    g.tornDown("end", 1);
    expect(ids(g)).toEqual(["all@1"]);
    g.closeAll();
    expect(ids(g)).toEqual([]);
  });

  it("a disposed handle cannot enter Recovering again", () => {
    const g = new Generations(null, pino({ level: "silent" }));
    const h = g.open(sandbox("a"), "na");
    g.settle("a", 1, "Stopped");
    expect(h.state).toBe("disposed");
    h.recover(lost());
    expect(h.recovery).toBeNull();
    expect(ids(g)).toEqual([]);
  });
});
