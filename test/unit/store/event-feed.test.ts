// The EventFeed (src/store/postgres/event-feed.ts) alone, with a reader the test controls:
// events go out in sequence order, once each, whatever mix of local commits and
// notifications brings them; a failed read skips nothing.

import { describe, expect, it } from "vitest";
import type { EventRecord } from "../../../src/store/contract.js";
import { EventFeed } from "../../../src/store/postgres/event-feed.js";

const ev = (seq: number): EventRecord => ({ seq, sandboxId: "a", sandboxName: "a", generation: 1, kind: "info", oldPhase: null, newPhase: null, reason: null, message: `m${seq}`, data: null, time: "t" });

/** A log of committed events the feed reads from, and the reads it made. */
function log(seqs: number[]) {
  const committed = new Set(seqs);
  const reads: [number, number][] = [];
  let fail = 0;
  return {
    commit: (...s: number[]) => s.forEach((x) => committed.add(x)),
    failNext: (n = 1) => (fail = n),
    reads,
    read: async (after: number, limit: number): Promise<EventRecord[]> => {
      reads.push([after, limit]);
      await Promise.resolve();
      if (fail > 0) {
        fail--;
        throw new Error("database down");
      }
      return [...committed].filter((s) => s > after).sort((x, y) => x - y).slice(0, limit).map(ev);
    },
  };
}

function feed(l: ReturnType<typeof log>, start = 0) {
  const seen: number[] = [];
  const errors: string[] = [];
  const f = new EventFeed(l.read, start, (e) => errors.push((e as Error).message));
  f.subscribe((e) => seen.push(e.seq));
  return { f, seen, errors };
}

describe("EventFeed", () => {
  it("hands out this process's commit at once, with no read, when it is the next number", async () => {
    const l = log([]);
    const { f, seen } = feed(l, 4);
    l.commit(5, 6);
    await f.committed([ev(5), ev(6)]);
    expect(seen).toEqual([5, 6]);
    expect(l.reads).toEqual([]);
    expect(f.mark).toBe(6);
  });

  it("reads what committed in between when a commit is not the next number, and hands all out in order", async () => {
    const l = log([1, 2, 3]);
    const { f, seen } = feed(l);
    l.commit(4);
    await f.committed([ev(4)]);
    expect(seen).toEqual([1, 2, 3, 4]);
    expect(l.reads).toEqual([[0, 1000]]);
  });

  it("a notification at or below the mark reads nothing; above it, catches up", async () => {
    const l = log([1, 2]);
    const { f, seen } = feed(l, 2);
    await f.notified(2);
    expect(l.reads).toEqual([]);
    l.commit(3);
    await f.notified(3);
    expect(seen).toEqual([3]);
  });

  it("commits and notifications at once: every event once, in order", async () => {
    const l = log([]);
    const { f, seen } = feed(l);
    l.commit(1, 2, 3, 4, 5, 6);
    await Promise.all([f.notified(2), f.committed([ev(3)]), f.notified(6), f.committed([ev(1), ev(2)]), f.notified(), f.committed([ev(6)])]);
    expect(seen).toEqual([1, 2, 3, 4, 5, 6]);
  });

  it("a failed read leaves the mark: the next notification hands out everything from there", async () => {
    const l = log([1]);
    const { f, seen, errors } = feed(l);
    l.failNext();
    await f.notified(1);
    expect(seen).toEqual([]);
    expect(errors).toEqual(["database down"]);
    expect(f.mark).toBe(0);
    l.commit(2);
    await f.notified();
    expect(seen).toEqual([1, 2]);
  });

  it("reads page after page until a page is not full", async () => {
    const l = log(Array.from({ length: 2500 }, (_, i) => i + 1));
    const { f, seen } = feed(l);
    await f.notified();
    expect(seen).toHaveLength(2500);
    expect(l.reads.map(([after]) => after)).toEqual([0, 1000, 2000]);
  });

  it("a commit with a number missing between its own events reads, and hands out the missing one in its place", async () => {
    const l = log([1, 2, 3, 4, 5]);
    const { f, seen } = feed(l, 2);
    await f.committed([ev(3), ev(5)]);
    expect(seen).toEqual([3, 4, 5]);
    expect(l.reads).toHaveLength(1);
  });

  it("once cleared, no listener is told", async () => {
    const l = log([]);
    const { f, seen } = feed(l);
    f.clear();
    await f.committed([ev(1)]);
    expect(seen).toEqual([]);
  });

  it("a listener that throws is reported; the others still get the event and the mark moves on", async () => {
    const l = log([]);
    const { f, seen, errors } = feed(l);
    const other: number[] = [];
    f.subscribe(() => {
      throw new Error("listener failed");
    });
    f.subscribe((e) => other.push(e.seq));
    await f.committed([ev(1)]);
    expect(seen).toEqual([1]);
    expect(other).toEqual([1]);
    expect(errors).toEqual(["listener failed"]);
    expect(f.mark).toBe(1);
  });

  it("events already handed out (a notification read them first) are not handed out again", async () => {
    const l = log([1, 2]);
    const { f, seen } = feed(l);
    await f.notified(2);
    const reads = l.reads.length;
    await f.committed([ev(1), ev(2)]);
    await f.committed([ev(2)]);
    expect(seen).toEqual([1, 2]);
    expect(l.reads).toHaveLength(reads);
    const unsubscribed: number[] = [];
    const off = f.subscribe((e) => unsubscribed.push(e.seq));
    off();
    l.commit(3);
    await f.committed([ev(3)]);
    expect(unsubscribed).toEqual([]);
  });
});
