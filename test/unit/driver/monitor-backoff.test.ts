// Reconnect backoff: grows to a cap, jitter stays inside its band, and a reset
// (attempt 0 again after a connection held) gives the small delay again.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { backoffDelay, DEFAULT_BACKOFF, type BackoffPolicy } from "../../../src/util/backoff.js";

const P: BackoffPolicy = { initialMs: 200, factor: 1.6, maxMs: 5_000, jitter: 0.2 };
const ALMOST_ONE = 1 - Number.EPSILON;

describe("backoffDelay", () => {
  it("the default policy is 200 ms ×1.6 up to 2 s, ±20 %", () => {
    expect(DEFAULT_BACKOFF).toEqual({ ...P, maxMs: 2_000 });
  });

  it("without jitter (random 0.5): 200 ms ×1.6 per attempt, then the cap", () => {
    // By hand: 200·1.6^n, rounded; 200·1.6^7 ≈ 5369 is above the cap.
    const expected = [200, 320, 512, 819, 1311, 2097, 3355, 5000, 5000, 5000];
    expect(expected.map((_, attempt) => backoffDelay(attempt, 0.5, P))).toEqual(expected);
  });

  it.each<[number, number]>([
    [0, 160],
    [0.5, 200],
    [ALMOST_ONE, 240],
  ])("attempt 0 ≈ initialMs: random %d → %i", (random, ms) => {
    expect(backoffDelay(0, random, P)).toBe(ms);
  });

  it.each<[number, number]>([
    [0, 4_000],
    [0.5, 5_000],
    [ALMOST_ONE, 6_000],
  ])("at the cap: random %d → %i", (random, ms) => {
    expect(backoffDelay(50, random, P)).toBe(ms);
  });

  it("a huge attempt number stays at the cap (no Infinity, no NaN)", () => {
    for (const attempt of [1_000, 1e6, Number.MAX_SAFE_INTEGER]) {
      expect(backoffDelay(attempt, 0.5, P)).toBe(5_000);
    }
  });

  it("a negative attempt is treated as attempt 0", () => {
    expect(backoffDelay(-3, 0.5, P)).toBe(200);
  });

  it("initialMs 0 means no delay, even after so many attempts that factor^attempt overflows", () => {
    const none = { ...P, initialMs: 0 };
    for (const attempt of [0, 5, 2_000]) expect(backoffDelay(attempt, ALMOST_ONE, none)).toBe(0);
  });

  it("a NaN attempt is treated as attempt 0, never a NaN delay", () => {
    expect(backoffDelay(Number.NaN, 0.5, P)).toBe(200);
  });

  it("no jitter: the random value does not matter", () => {
    const flat = { ...P, jitter: 0 };
    for (const r of [0, 0.3, ALMOST_ONE]) expect(backoffDelay(3, r, flat)).toBe(819);
  });

  it("a reset gives the small delay again", () => {
    // The monitor's loop: attempts grow while the daemon stays away, restart at 0 after a held connection.
    const rnd = [0.1, 0.9, 0.4, 0.7, 0.2, 0.6, 0.3];
    const grown = rnd.map((r, attempt) => backoffDelay(attempt, r, P));
    expect(grown.at(-1)).toBeGreaterThan(2_000);
    const afterReset = backoffDelay(0, 0.9, P);
    expect(afterReset).toBeLessThanOrEqual(240);
    expect(afterReset).toBe(backoffDelay(0, 0.9, P));
  });
});

const policyArb: fc.Arbitrary<BackoffPolicy> = fc
  .record({
    initialMs: fc.integer({ min: 0, max: 10_000 }),
    factor: fc.double({ min: 1, max: 4, noNaN: true }),
    extra: fc.integer({ min: 0, max: 60_000 }),
    jitter: fc.double({ min: 0, max: 1, noNaN: true }),
  })
  .map(({ initialMs, factor, extra, jitter }) => ({ initialMs, factor, maxMs: initialMs + extra, jitter }));
const randomArb = fc.oneof(fc.constantFrom(0, 0.5, ALMOST_ONE), fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true }));
const attemptArb = fc.integer({ min: 0, max: 2_000 });

describe("backoffDelay: properties", () => {
  it("an integer, never negative, never above maxMs·(1+jitter)", () => {
    fc.assert(
      fc.property(attemptArb, randomArb, policyArb, (a, r, p) => {
        const d = backoffDelay(a, r, p);
        expect(Number.isInteger(d)).toBe(true);
        expect(d).toBeGreaterThanOrEqual(0);
        expect(d).toBeLessThanOrEqual(Math.ceil(p.maxMs * (1 + p.jitter)));
      }),
      { numRuns: 2000 },
    );
  });

  it("never negative even with jitter above 100 %", () => {
    fc.assert(
      fc.property(attemptArb, randomArb, policyArb, fc.double({ min: 1, max: 5, noNaN: true }), (a, r, p, jitter) => {
        expect(backoffDelay(a, r, { ...p, jitter })).toBeGreaterThanOrEqual(0);
      }),
    );
  });

  it("within ±jitter of the un-jittered delay min(maxMs, initialMs·factor^attempt)", () => {
    fc.assert(
      fc.property(attemptArb, randomArb, policyArb, (a, r, p) => {
        const base = p.initialMs === 0 ? 0 : Math.min(p.maxMs, p.initialMs * p.factor ** a);
        const d = backoffDelay(a, r, p);
        expect(d).toBeGreaterThanOrEqual(Math.floor(base * (1 - p.jitter)));
        expect(d).toBeLessThanOrEqual(Math.ceil(base * (1 + p.jitter)));
      }),
      { numRuns: 2000 },
    );
  });

  it("grows (never shrinks) with the attempt for the same random draw", () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 200 }), randomArb, policyArb, (a, r, p) => {
        expect(backoffDelay(a + 1, r, p)).toBeGreaterThanOrEqual(backoffDelay(a, r, p));
      }),
      { numRuns: 2000 },
    );
  });
});
