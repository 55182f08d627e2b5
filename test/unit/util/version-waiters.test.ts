// VersionWaiters (src/util/version-waiters.ts): the table of waits behind
// BoundaryRegistry.waitForRevision and SecretsPusher.wait. Each wait resolves once:
// already reached, reached on advance(), missed at its timeout or on close().
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { VersionWaiters } from "../../../src/util/version-waiters.js";

/** A version per key, as the owner knows it; undefined: the key is gone. */
function table() {
  const at = new Map<string, number>();
  const w = new VersionWaiters<string>({
    reached: (key, version) => (at.get(key) ?? -1) >= version,
    answer: (key, version) => `${key} reached ${version} at ${at.get(key)}`,
    missed: (key) => `${key} missed at ${at.get(key) ?? "gone"}`,
  });
  return { at, w };
}

/** The promise's value if it settled by now, else "pending". */
async function now<T>(p: Promise<T>): Promise<T | "pending"> {
  return Promise.race([p, new Promise<"pending">((r) => setImmediate(() => r("pending")))]);
}

describe("VersionWaiters", () => {
  beforeEach(() => vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout"] }));
  afterEach(() => vi.useRealTimers());

  it("resolves at once when the version is already reached, with nothing left waiting", async () => {
    const { at, w } = table();
    at.set("a", 3);
    await expect(w.wait("a", 2, 1000)).resolves.toBe("a reached 2 at 3");
    expect(w.size).toBe(0);
    expect(vi.getTimerCount()).toBe(0);
  });

  it("resolves a wait when advance() finds it reached, and only those reached", async () => {
    const { at, w } = table();
    const two = w.wait("a", 2, 1000);
    const five = w.wait("a", 5, 1000);
    const other = w.wait("b", 1, 1000);
    at.set("a", 3);
    w.advance("a");
    expect(await now(two)).toBe("a reached 2 at 3");
    expect(await now(five)).toBe("pending");
    expect(await now(other)).toBe("pending");
    expect(w.size).toBe(2);
    at.set("a", 5);
    at.set("b", 1);
    w.advance("a");
    w.advance("b");
    expect(await now(five)).toBe("a reached 5 at 5");
    expect(await now(other)).toBe("b reached 1 at 1");
    expect(w.size).toBe(0);
    expect(vi.getTimerCount()).toBe(0);
  });

  it("resolves with missed at the timeout, answered then, and forgets the wait", async () => {
    const { at, w } = table();
    const p = w.wait("a", 2, 1000);
    at.set("a", 1);
    vi.advanceTimersByTime(999);
    expect(await now(p)).toBe("pending");
    vi.advanceTimersByTime(1);
    expect(await now(p)).toBe("a missed at 1");
    expect(w.size).toBe(0);
    // Reached later: the wait is over, nothing is left to resolve twice.
    at.set("a", 2);
    w.advance("a");
    expect(w.size).toBe(0);
  });

  it("a key that goes does not end its waits: they run to their timeout, or to the version if it comes back", async () => {
    const { at, w } = table();
    const late = w.wait("a", 1, 500);
    const back = w.wait("a", 1, 1000);
    at.delete("a");
    w.advance("a");
    expect(await now(late)).toBe("pending");
    vi.advanceTimersByTime(500);
    expect(await now(late)).toBe("a missed at gone");
    at.set("a", 1);
    w.advance("a");
    expect(await now(back)).toBe("a reached 1 at 1");
  });

  it("close() resolves every wait with missed and clears its timers", async () => {
    const { at, w } = table();
    at.set("a", 0);
    const a = w.wait("a", 1, 1000);
    const b = w.wait("b", 1, 1000);
    w.close();
    expect(await now(a)).toBe("a missed at 0");
    expect(await now(b)).toBe("b missed at gone");
    expect(w.size).toBe(0);
    expect(vi.getTimerCount()).toBe(0);
  });
});
