// pause (src/util/pause.ts) and the SDK's sleep on it: timers/promises with an AbortSignal,
// the abort answered the way the callers expect (false, or the SDK's rejection with the reason).
import { describe, expect, it } from "vitest";
import { sleep } from "../../../src/sdk/wait.js";
import { pause } from "../../../src/util/pause.js";

describe("pause", () => {
  it("resolves true once the time is up", async () => {
    const t0 = performance.now();
    expect(await pause(30)).toBe(true);
    expect(performance.now() - t0).toBeGreaterThanOrEqual(25);
  });

  it("resolves false at once when the signal aborts, never rejecting for it", async () => {
    const ac = new AbortController();
    const t0 = performance.now();
    const p = pause(10_000, ac.signal);
    setTimeout(() => ac.abort(new Error("stop")), 10);
    expect(await p).toBe(false);
    expect(performance.now() - t0).toBeLessThan(2_000);
  });

  it("resolves false for a signal already aborted", async () => {
    expect(await pause(10_000, AbortSignal.abort())).toBe(false);
  });
});

describe("the SDK's sleep", () => {
  it("rejects with the signal's own reason, as before timers/promises", async () => {
    const reason = new Error("caller gave up");
    const ac = new AbortController();
    const p = sleep(10_000, ac.signal);
    ac.abort(reason);
    await expect(p).rejects.toBe(reason);
    await expect(sleep(10, AbortSignal.abort(reason))).rejects.toBe(reason);
    await expect(sleep(5)).resolves.toBeUndefined();
  });
});
