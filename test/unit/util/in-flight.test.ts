import { describe, expect, it } from "vitest";
import { InFlight } from "../../../src/util/in-flight.js";

describe("InFlight", () => {
  it("keeps work until it settles; idle waits for work tracked while it waits; a rejection goes to onError and leaves", async () => {
    const w = new InFlight();
    const errors: unknown[] = [];
    let finishFirst = (): void => undefined;
    let finishSecond = (): void => undefined;
    w.track(new Promise<void>((r) => (finishFirst = r)), (e) => errors.push(e));
    expect(w.size).toBe(1);
    const order: string[] = [];
    const idle = w.idle().then(() => order.push("idle"));
    w.track(new Promise<void>((r) => (finishSecond = r)).then(() => void order.push("second")), (e) => errors.push(e));
    finishFirst();
    await new Promise((r) => setImmediate(r));
    expect(order).toEqual([]);
    finishSecond();
    await idle;
    expect(order).toEqual(["second", "idle"]);
    expect(w.size).toBe(0);
    w.track(Promise.reject(new Error("boom")), (e) => errors.push((e as Error).message));
    await w.idle();
    expect(errors).toEqual(["boom"]);
    expect(w.size).toBe(0);
  });
});
