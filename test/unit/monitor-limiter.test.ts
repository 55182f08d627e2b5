import { describe, expect, it } from "vitest";
import { Limiter } from "../../src/util/limiter.js";

describe("Limiter", () => {
  it("runs at most N tasks at once, in order, and frees a slot when a task fails", async () => {
    const limiter = new Limiter(3);
    let active = 0;
    let peak = 0;
    const started: number[] = [];
    const results = await Promise.allSettled(
      Array.from({ length: 12 }, (_, i) =>
        limiter.run(async () => {
          started.push(i);
          active++;
          peak = Math.max(peak, active);
          await new Promise((r) => setTimeout(r, 5 + (i % 3)));
          active--;
          if (i % 4 === 0) throw new Error(`task ${i}`);
          return i;
        }),
      ),
    );
    expect(peak).toBe(3);
    expect(started).toEqual([...Array(12).keys()]);
    expect(results.filter((r) => r.status === "rejected")).toHaveLength(3);
    expect(results.filter((r) => r.status === "fulfilled").map((r) => r.value)).toEqual([1, 2, 3, 5, 6, 7, 9, 10, 11]);
  });
});
