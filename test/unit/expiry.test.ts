// --ttl and --idle-stop: the pure verdict, and the one sweeper that owns their timing,
// on a real (in-memory) store with an injected clock: no test waits for real time.
import { pino } from "pino";
import { afterEach, describe, expect, it } from "vitest";
import { expiryVerdict } from "../../src/lifecycle/expiry.js";
import { transition } from "../../src/lifecycle/machine.js";
import type { StopReason } from "../../src/lifecycle/phases.js";
import { DEFAULT_RESOURCES, type SandboxSpec } from "../../src/lifecycle/spec.js";
import { expiryColumns } from "../../src/store/expiry-store.js";
import { Store } from "../../src/store/store.js";
import { ActivityTracker } from "../../src/gateway/sandboxes/activity.js";
import { ACTIVITY_FLUSH_MS, ExpirySweeper, type SweeperClock } from "../../src/gateway/sandboxes/expiry-sweeper.js";
import { parsePolicyInput } from "../../src/gateway/sandboxes/policy-input.js";

const T0 = Date.parse("2026-12-01T10:00:00.000Z");
const S = 1000;

describe("expiryVerdict", () => {
  const base = { ttlDeadlineMs: null, idleStopSeconds: null, lastActiveMs: T0, openSessions: 0 };

  it("without a TTL or an idle stop there is nothing to wait for", () => {
    expect(expiryVerdict(T0 + 1e12, base)).toEqual({ stop: null, nextMs: null });
  });

  it("a TTL stops at its deadline, not a millisecond before", () => {
    const i = { ...base, ttlDeadlineMs: T0 + 60 * S, ttlSeconds: 60 };
    expect(expiryVerdict(T0 + 60 * S - 1, i)).toEqual({ stop: null, nextMs: T0 + 60 * S });
    expect(expiryVerdict(T0 + 60 * S, i)).toEqual({ stop: { code: "TtlExpired", detail: "its TTL of 1m ran out at 2026-12-01T10:01:00.000Z" } });
  });

  it("idle counts from the last activity, and never while a session is open", () => {
    const i = { ...base, idleStopSeconds: 30, lastActiveMs: T0 + 10 * S };
    expect(expiryVerdict(T0 + 40 * S - 1, i)).toEqual({ stop: null, nextMs: T0 + 40 * S });
    expect(expiryVerdict(T0 + 40 * S, i)).toEqual({ stop: { code: "IdleTimeout", detail: "no exec, connect or egress for 30s (last activity 2026-12-01T10:00:10.000Z)" } });
    expect(expiryVerdict(T0 + 1e9, { ...i, openSessions: 1 })).toEqual({ stop: null, nextMs: null });
  });

  it("the earlier deadline is next; a TTL that is due wins over idleness", () => {
    const i = { ...base, ttlDeadlineMs: T0 + 100 * S, idleStopSeconds: 30, lastActiveMs: T0 };
    expect(expiryVerdict(T0, i)).toEqual({ stop: null, nextMs: T0 + 30 * S });
    expect(expiryVerdict(T0 + 100 * S, i)).toMatchObject({ stop: { code: "TtlExpired" } });
    expect(expiryVerdict(T0, { ...i, openSessions: 2 })).toEqual({ stop: null, nextMs: T0 + 100 * S });
  });
});

/** A clock whose timers run when the test moves time on. */
class FakeClock implements SweeperClock {
  t = T0;
  timers = new Map<number, { at: number; fn: () => void }>();
  #seq = 0;
  now = (): number => this.t;
  setTimeout = (fn: () => void, ms: number): unknown => {
    const id = ++this.#seq;
    this.timers.set(id, { at: this.t + ms, fn });
    return id;
  };
  clearTimeout = (h: unknown): void => void this.timers.delete(h as number);
  /** Move to `at`, running every timer due on the way, in order. */
  advanceTo(at: number): void {
    for (;;) {
      const due = [...this.timers.entries()].filter(([, x]) => x.at <= at).sort((a, b) => a[1].at - b[1].at)[0];
      if (!due) break;
      this.timers.delete(due[0]);
      this.t = Math.max(this.t, due[1].at);
      due[1].fn();
    }
    this.t = at;
  }
}

interface Rig {
  clock: FakeClock;
  store: Store;
  activity: ActivityTracker;
  sweeper: ExpirySweeper;
  stops: { id: string; generation: number; reason: StopReason; at: number }[];
  create(name: string, spec: Partial<SandboxSpec>): string;
  ready(id: string): void;
  restartGateway(): void;
}

const rigs: Rig[] = [];
afterEach(() => {
  for (const r of rigs.splice(0)) {
    r.sweeper.close();
    r.store.close();
  }
});

function rig(): Rig {
  const clock = new FakeClock();
  const store = Store.open(":memory:", { now: () => new Date(clock.t) });
  const stops: Rig["stops"] = [];
  let accept = true;
  const make = (activity: ActivityTracker): ExpirySweeper =>
    new ExpirySweeper({
      store,
      activity,
      log: pino({ level: "silent" }),
      clock,
      expire: (id, generation, reason) => {
        if (!accept) return false;
        const s = store.get(id)!;
        const t = transition(s, { type: "stop", reason }, generation);
        if (!t.ok) return false;
        stops.push({ id, generation, reason, at: clock.t });
        return store.transition(id, { expect: { phase: s.phase, generation }, next: t.next, message: "expired" }) !== null;
      },
    });
  let n = 0;
  const r: Rig & { refuse(v: boolean): void } = {
    clock,
    store,
    stops,
    activity: new ActivityTracker(() => clock.t),
    sweeper: undefined as unknown as ExpirySweeper,
    create(name, spec) {
      const id = `sbx_${(++n).toString(16).padStart(16, "0")}`;
      store.createSandbox({ id, name, spec: { env: {}, resources: DEFAULT_RESOURCES, ...spec }, policy: parsePolicyInput(undefined) });
      return id;
    },
    ready(id) {
      const s = store.get(id)!;
      store.transition(id, { expect: { phase: "Provisioning", generation: s.generation }, next: { phase: "Ready", generation: s.generation, reason: null } });
    },
    restartGateway() {
      this.sweeper.close();
      this.activity = new ActivityTracker(() => clock.t);
      this.sweeper = make(this.activity);
      this.sweeper.start();
    },
    refuse(v) {
      accept = !v;
    },
  };
  r.sweeper = make(r.activity);
  r.sweeper.start();
  rigs.push(r);
  return r;
}

describe("ExpirySweeper", () => {
  it("stops a sandbox at its TTL, counted from its launch, with the reason in the sandbox and its events", () => {
    const r = rig();
    const id = r.create("ttl", { ttlSeconds: 60 });
    expect(expiryColumns(r.store.db, id)?.ttlDeadline).toBe("2026-12-01T10:01:00.000Z");
    r.clock.advanceTo(T0 + 5 * S);
    r.ready(id);
    r.clock.advanceTo(T0 + 60 * S - 1);
    expect(r.stops).toEqual([]);
    r.clock.advanceTo(T0 + 60 * S);
    expect(r.stops).toEqual([{ id, generation: 1, reason: { code: "TtlExpired", detail: "its TTL of 1m ran out at 2026-12-01T10:01:00.000Z" }, at: T0 + 60 * S }]);
    const s = r.store.get(id)!;
    expect([s.phase, s.reason?.code]).toEqual(["Stopping", "TtlExpired"]);
    expect(r.store.events(id).at(-1)).toMatchObject({ newPhase: "Stopping", reason: { code: "TtlExpired" } });
  });

  it("a later start is a new generation with a new TTL", () => {
    const r = rig();
    const id = r.create("again", { ttlSeconds: 60 });
    r.ready(id);
    r.clock.advanceTo(T0 + 60 * S);
    r.store.transition(id, { expect: { phase: "Stopping", generation: 1 }, next: { phase: "Stopped", generation: 1, reason: r.store.get(id)!.reason } });
    r.clock.advanceTo(T0 + 500 * S);
    r.store.transition(id, { expect: { phase: "Stopped", generation: 1 }, next: { phase: "Provisioning", generation: 2, reason: null } });
    expect(expiryColumns(r.store.db, id)?.ttlDeadline).toBe(new Date(T0 + 560 * S).toISOString());
    r.ready(id);
    r.clock.advanceTo(T0 + 560 * S - 1);
    expect(r.stops.map((x) => x.generation)).toEqual([1]);
    r.clock.advanceTo(T0 + 560 * S);
    expect(r.stops.map((x) => [x.generation, x.at])).toEqual([[1, T0 + 60 * S], [2, T0 + 560 * S]]);
  });

  it("stops an idle sandbox: activity moves the deadline, an open session holds it, its end starts the clock again", () => {
    const r = rig();
    const id = r.create("idle", { idleStopSeconds: 30 });
    r.clock.advanceTo(T0 + 10 * S);
    r.ready(id); // the idle clock starts when the sandbox can be used
    r.clock.advanceTo(T0 + 30 * S);
    r.activity.touch(id); // egress
    r.clock.advanceTo(T0 + 59 * S);
    const end = r.activity.begin(id); // an exec
    r.clock.advanceTo(T0 + 500 * S);
    expect(r.stops).toEqual([]);
    end();
    r.clock.advanceTo(T0 + 530 * S - 1);
    expect(r.stops).toEqual([]);
    r.clock.advanceTo(T0 + 530 * S);
    expect(r.stops.map((x) => [x.reason.code, x.at])).toEqual([["IdleTimeout", T0 + 530 * S]]);
    expect(r.stops[0]!.reason.detail).toBe("no exec, connect or egress for 30s (last activity 2026-12-01T10:08:20.000Z)");
  });

  it("keeps one timer for all sandboxes, set for the earliest deadline", () => {
    const r = rig();
    // The earliest first: a later launch must not push the one timer past it.
    for (const [i, ttl] of [50, 300, 100, 200].entries()) r.create(`many-${i}`, { ttlSeconds: ttl });
    r.create("none", {});
    expect(r.sweeper.timers).toBe(1);
    expect(r.clock.timers.size).toBe(1);
    expect(r.sweeper.nextAt).toBe(T0 + 50 * S);
    r.clock.advanceTo(T0 + 1000 * S);
    expect(r.stops.map((x) => x.at)).toEqual([50, 100, 200, 300].map((t) => T0 + t * S));
    // Nothing left to wait for: no timer at all.
    expect(r.sweeper.timers).toBe(0);
  });

  it("writes activity in batches, at most every flush interval, never once per observation", () => {
    const r = rig();
    const id = r.create("flush", { idleStopSeconds: 3600 });
    r.clock.advanceTo(T0 + 1 * S);
    r.ready(id);
    const writes: string[] = [];
    const before = expiryColumns(r.store.db, id)?.lastActive;
    for (let i = 0; i < 1000; i++) {
      r.clock.t += 10;
      r.activity.touch(id);
      writes.push(expiryColumns(r.store.db, id)?.lastActive ?? "null");
    }
    expect(new Set(writes)).toEqual(new Set([before ?? "null"]));
    r.clock.advanceTo(r.clock.t + ACTIVITY_FLUSH_MS);
    expect(expiryColumns(r.store.db, id)?.lastActive).toBe(new Date(T0 + 1 * S + 10_000).toISOString());
  });

  it("a gateway restart keeps the TTL deadline and the last activity written", () => {
    const r = rig();
    const ttl = r.create("keep-ttl", { ttlSeconds: 120 });
    const idle = r.create("keep-idle", { idleStopSeconds: 60 });
    r.ready(ttl);
    r.ready(idle);
    r.clock.advanceTo(T0 + 50 * S);
    r.activity.touch(idle);
    r.restartGateway(); // close writes what it saw
    r.clock.advanceTo(T0 + 110 * S - 1);
    expect(r.stops).toEqual([]);
    r.clock.advanceTo(T0 + 120 * S);
    expect(r.stops.map((x) => [x.id, x.reason.code, x.at])).toEqual([
      [idle, "IdleTimeout", T0 + 110 * S],
      [ttl, "TtlExpired", T0 + 120 * S],
    ]);
  });

  it("a deadline that passed while the gateway was down stops the sandbox at its first sweep", () => {
    const r = rig();
    const id = r.create("late", { ttlSeconds: 10 });
    r.ready(id);
    r.sweeper.close();
    r.clock.t = T0 + 3600 * S;
    r.restartGateway();
    expect(r.stops.map((x) => [x.reason.code, x.at])).toEqual([["TtlExpired", T0 + 3600 * S]]);
  });

  it("a stop that lost a race is tried again later, and a sandbox no longer live is left alone", () => {
    const r = rig() as Rig & { refuse(v: boolean): void };
    const id = r.create("race", { ttlSeconds: 10 });
    r.ready(id);
    r.refuse(true);
    r.clock.advanceTo(T0 + 10 * S);
    expect(r.stops).toEqual([]);
    r.refuse(false);
    r.clock.advanceTo(T0 + 10 * S + ACTIVITY_FLUSH_MS);
    expect(r.stops.map((x) => x.at)).toEqual([T0 + 10 * S + ACTIVITY_FLUSH_MS]);
    // Stopping now: later sweeps do not touch it.
    r.clock.advanceTo(T0 + 10_000 * S);
    expect(r.stops).toHaveLength(1);
  });

  it("forgets a deleted sandbox's activity; close leaves no timer", () => {
    const r = rig();
    const id = r.create("gone", { idleStopSeconds: 30 });
    r.ready(id);
    r.activity.touch(id);
    r.store.transition(id, { expect: { phase: "Ready", generation: 1 }, next: { phase: "Deleting", generation: 1, reason: null } });
    r.store.deleteSandbox(id, { generation: 1 });
    expect(r.activity.lastActive(id)).toBeUndefined();
    r.sweeper.close();
    expect(r.sweeper.timers).toBe(0);
    expect(r.clock.timers.size).toBe(0);
  });
});

describe("ActivityTracker.takeDirty: the sandboxes touched since the last take", () => {
  it("returns exactly the touched ones, once, and not a forgotten one", () => {
    let t = 1_000;
    const a = new ActivityTracker(() => t);
    for (const id of ["a", "b", "c", "d"]) a.begin(id)();
    a.takeDirty();
    t += 10;
    a.touch("a");
    t += 5;
    a.touch("c");
    a.touch("gone");
    a.touch("c", t - 1); // earlier than known: not a change
    a.forget("gone");
    expect(a.dirty).toBe(2);
    expect(a.takeDirty().sort()).toEqual([
      ["a", 1_010],
      ["c", 1_015],
    ]);
    expect(a.dirty).toBe(0);
    expect(a.takeDirty()).toEqual([]);
    // Touched again after the take: dirty again; forgotten after its touch: gone.
    a.touch("b", 2_000);
    a.touch("d", 2_000);
    a.forget("d");
    expect(a.takeDirty()).toEqual([["b", 2_000]]);
  });
});
