// drained(): a backpressure wait leaves no listener behind, whichever event ends it.
import { EventEmitter } from "node:events";
import { describe, expect, it } from "vitest";
import { drained } from "../../../src/util/drained.js";

describe("drained", () => {
  it("resolves on drain or on close, and a thousand waits leave no listener", async () => {
    const s = new EventEmitter();
    for (let i = 0; i < 1000; i++) {
      const w = drained(s);
      s.emit(i % 2 === 0 ? "drain" : "close");
      await w;
    }
    expect([s.listenerCount("drain"), s.listenerCount("close")]).toEqual([0, 0]);
  });

  it("waits until one of them comes", async () => {
    const s = new EventEmitter();
    let done = false;
    const w = drained(s).then(() => (done = true));
    await new Promise((r) => setImmediate(r));
    expect(done).toBe(false);
    s.emit("drain");
    await w;
    expect(done).toBe(true);
  });
});
