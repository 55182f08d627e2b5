import { describe, expect, it } from "vitest";
import { Limiter } from "../../../src/util/limiter.js";

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

  it("a finishing task hands its slot to the next in line: a caller arriving in between waits its turn, never makes N + 1", async () => {
    const limiter = new Limiter(1);
    let active = 0;
    let peak = 0;
    const releases: (() => void)[] = [];
    const task = (): Promise<void> =>
      limiter.run(async () => {
        active++;
        peak = Math.max(peak, active);
        await new Promise<void>((r) => releases.push(r));
        active--;
      });
    const first = task();
    const second = task();
    await Promise.resolve();
    releases.shift()!(); // the first ends; the second has its slot
    await first;
    const third = task(); // arrives before the second has started running
    await new Promise((r) => setImmediate(r));
    expect(limiter.load).toEqual({ active: 1, waiting: 1, max: 1 });
    releases.shift()!();
    await second;
    await new Promise((r) => setImmediate(r));
    releases.shift()!();
    await third;
    expect(peak).toBe(1);
    expect(limiter.load).toEqual({ active: 0, waiting: 0, max: 1 });
  });

  it("a waiter whose signal aborts leaves the line without running; the others keep their order", async () => {
    const limiter = new Limiter(1);
    let release!: () => void;
    const ran: string[] = [];
    const first = limiter.run(() => new Promise<void>((r) => (release = r)));
    const gone = new AbortController();
    const abandoned = limiter.runUnlessAborted(gone.signal, async () => void ran.push("abandoned"));
    const kept = limiter.runUnlessAborted(new AbortController().signal, async () => void ran.push("kept"));
    expect(limiter.load.waiting).toBe(2);
    gone.abort();
    expect(await abandoned).toBe("abandoned");
    expect(limiter.load.waiting).toBe(1);
    release();
    await first;
    await kept;
    expect(ran).toEqual(["kept"]);
    expect(limiter.load).toEqual({ active: 0, waiting: 0, max: 1 });
    // Aborted before it asks: never waits, never runs.
    expect(await limiter.runUnlessAborted(gone.signal, async () => void ran.push("late"))).toBe("abandoned");
  });
});
