// --ttl and --idle-stop: the pure verdict, and the one sweeper that owns their timing,
// on a real (in-memory) store with an injected clock: no test waits for real time.
import { pino } from "pino";
import { afterEach, describe, expect, it } from "vitest";
import { expiryVerdict } from "../../../src/lifecycle/expiry.js";
import { transition } from "../../../src/lifecycle/machine.js";
import type { StopReason } from "../../../src/lifecycle/phases.js";
import { DEFAULT_RESOURCES, type SandboxSpec } from "../../../src/lifecycle/spec.js";
import { expiryColumns } from "../../../src/store/expiry-store.js";
import { Store } from "../../../src/store/store.js";
import { ActivityTracker } from "../../../src/gateway/sandboxes/activity.js";
import { ACTIVITY_FLUSH_MS, ExpirySweeper, type SweeperClock } from "../../../src/gateway/sandboxes/expiry-sweeper.js";
import { parsePolicyInput } from "../../../src/gateway/sandboxes/policy-input.js";

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
  /**
   * Move to `at`, running every timer due on the way, in order; `settle` after each (the
   * work a timer starts is asynchronous, and may set the next timer).
   */
  async advanceTo(at: number, settle: () => Promise<void>): Promise<void> {
    for (;;) {
      const due = [...this.timers.entries()].filter(([, x]) => x.at <= at).sort((a, b) => a[1].at - b[1].at)[0];
      if (!due) break;
      this.timers.delete(due[0]);
      this.t = Math.max(this.t, due[1].at);
      due[1].fn();
      await settle();
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
  create(name: string, spec: Partial<SandboxSpec>): Promise<string>;
  ready(id: string): Promise<void>;
  restartGateway(): Promise<void>;
  /** The clock moves to `at`; resolves once what it set off (a sweep) is done. */
  advance(at: number): Promise<void>;
}

const rigs: Rig[] = [];
afterEach(async () => {
  for (const r of rigs.splice(0)) {
    await r.sweeper.close();
    r.store.close();
  }
});

async function rig(): Promise<Rig> {
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
      expire: async (id, generation, reason) => {
        if (!accept) return false;
        const s = (await store.get(id))!;
        const t = transition(s, { type: "stop", reason }, generation);
        if (!t.ok) return false;
        stops.push({ id, generation, reason, at: clock.t });
        return await store.transition(id, { expect: { phase: s.phase, generation }, next: t.next, message: "expired" }) !== null;
      },
    });
  let n = 0;
  const r: Rig & { refuse(v: boolean): void } = {
    clock,
    store,
    stops,
    activity: new ActivityTracker(() => clock.t),
    sweeper: undefined as unknown as ExpirySweeper,
    async create(name, spec) {
      const id = `sbx_${(++n).toString(16).padStart(16, "0")}`;
      await store.createSandbox({ host: "h1", id, name, spec: { env: {}, resources: DEFAULT_RESOURCES, ...spec }, policy: parsePolicyInput(undefined) });
      await this.sweeper.idle();
      return id;
    },
    async ready(id) {
      const s = (await store.get(id))!;
      await store.transition(id, { expect: { phase: "Provisioning", generation: s.generation }, next: { phase: "Ready", generation: s.generation, reason: null } });
      await this.sweeper.idle();
    },
    async advance(at) {
      await this.sweeper.idle();
      await clock.advanceTo(at, () => this.sweeper.idle());
    },
    async restartGateway() {
      await this.sweeper.close();
      this.activity = new ActivityTracker(() => clock.t);
      this.sweeper = make(this.activity);
      await this.sweeper.start();
    },
    refuse(v) {
      accept = !v;
    },
  };
  r.sweeper = make(r.activity);
  await r.sweeper.start();
  rigs.push(r);
  return r;
}

describe("ExpirySweeper", () => {
  it("stops a sandbox at its TTL, counted from its launch, with the reason in the sandbox and its events", async () => {
    const r = await rig();
    const id = await r.create("ttl", { ttlSeconds: 60 });
    expect(expiryColumns(r.store.db, id)?.ttlDeadline).toBe("2026-12-01T10:01:00.000Z");
    await r.advance(T0 + 5 * S);
    await r.ready(id);
    await r.advance(T0 + 60 * S - 1);
    expect(r.stops).toEqual([]);
    await r.advance(T0 + 60 * S);
    expect(r.stops).toEqual([{ id, generation: 1, reason: { code: "TtlExpired", detail: "its TTL of 1m ran out at 2026-12-01T10:01:00.000Z" }, at: T0 + 60 * S }]);
    const s = (await r.store.get(id))!;
    expect([s.phase, s.reason?.code]).toEqual(["Stopping", "TtlExpired"]);
    expect((await r.store.events(id)).at(-1)).toMatchObject({ newPhase: "Stopping", reason: { code: "TtlExpired" } });
  });

  it("a later start is a new generation with a new TTL", async () => {
    const r = await rig();
    const id = await r.create("again", { ttlSeconds: 60 });
    await r.ready(id);
    await r.advance(T0 + 60 * S);
    await r.store.transition(id, { expect: { phase: "Stopping", generation: 1 }, next: { phase: "Stopped", generation: 1, reason: (await r.store.get(id))!.reason } });
    await r.sweeper.idle();
    await r.advance(T0 + 500 * S);
    await r.store.transition(id, { expect: { phase: "Stopped", generation: 1 }, next: { phase: "Provisioning", generation: 2, reason: null } });
    await r.sweeper.idle();
    expect(expiryColumns(r.store.db, id)?.ttlDeadline).toBe(new Date(T0 + 560 * S).toISOString());
    await r.ready(id);
    await r.advance(T0 + 560 * S - 1);
    expect(r.stops.map((x) => x.generation)).toEqual([1]);
    await r.advance(T0 + 560 * S);
    expect(r.stops.map((x) => [x.generation, x.at])).toEqual([[1, T0 + 60 * S], [2, T0 + 560 * S]]);
  });

  it("stops an idle sandbox: activity moves the deadline, an open session holds it, its end starts the clock again", async () => {
    const r = await rig();
    const id = await r.create("idle", { idleStopSeconds: 30 });
    await r.advance(T0 + 10 * S);
    await r.ready(id); // the idle clock starts when the sandbox can be used
    await r.advance(T0 + 30 * S);
    r.activity.touch(id); // egress
    await r.advance(T0 + 59 * S);
    const end = r.activity.begin(id); // an exec
    await r.advance(T0 + 500 * S);
    expect(r.stops).toEqual([]);
    end();
    await r.advance(T0 + 530 * S - 1);
    expect(r.stops).toEqual([]);
    await r.advance(T0 + 530 * S);
    expect(r.stops.map((x) => [x.reason.code, x.at])).toEqual([["IdleTimeout", T0 + 530 * S]]);
    expect(r.stops[0]!.reason.detail).toBe("no exec, connect or egress for 30s (last activity 2026-12-01T10:08:20.000Z)");
  });

  it("keeps one timer for all sandboxes, set for the earliest deadline", async () => {
    const r = await rig();
    // The earliest first: a later launch must not push the one timer past it.
    for (const [i, ttl] of [50, 300, 100, 200].entries()) await r.create(`many-${i}`, { ttlSeconds: ttl });
    await r.create("none", {});
    expect(r.sweeper.timers).toBe(1);
    expect(r.clock.timers.size).toBe(1);
    expect(r.sweeper.nextAt).toBe(T0 + 50 * S);
    await r.advance(T0 + 1000 * S);
    expect(r.stops.map((x) => x.at)).toEqual([50, 100, 200, 300].map((t) => T0 + t * S));
    // Nothing left to wait for: no timer at all.
    expect(r.sweeper.timers).toBe(0);
  });

  it("writes activity in batches, at most every flush interval, never once per observation", async () => {
    const r = await rig();
    const id = await r.create("flush", { idleStopSeconds: 3600 });
    await r.advance(T0 + 1 * S);
    await r.ready(id);
    const writes: string[] = [];
    const before = expiryColumns(r.store.db, id)?.lastActive;
    for (let i = 0; i < 1000; i++) {
      r.clock.t += 10;
      r.activity.touch(id);
      writes.push(expiryColumns(r.store.db, id)?.lastActive ?? "null");
    }
    expect(new Set(writes)).toEqual(new Set([before ?? "null"]));
    await r.advance(r.clock.t + ACTIVITY_FLUSH_MS);
    expect(expiryColumns(r.store.db, id)?.lastActive).toBe(new Date(T0 + 1 * S + 10_000).toISOString());
  });

  it("a gateway restart keeps the TTL deadline and the last activity written", async () => {
    const r = await rig();
    const ttl = await r.create("keep-ttl", { ttlSeconds: 120 });
    const idle = await r.create("keep-idle", { idleStopSeconds: 60 });
    await r.ready(ttl);
    await r.ready(idle);
    await r.advance(T0 + 50 * S);
    r.activity.touch(idle);
    await r.restartGateway(); // close writes what it saw
    await r.advance(T0 + 110 * S - 1);
    expect(r.stops).toEqual([]);
    await r.advance(T0 + 120 * S);
    expect(r.stops.map((x) => [x.id, x.reason.code, x.at])).toEqual([
      [idle, "IdleTimeout", T0 + 110 * S],
      [ttl, "TtlExpired", T0 + 120 * S],
    ]);
  });

  it("a deadline that passed while the gateway was down stops the sandbox at its first sweep", async () => {
    const r = await rig();
    const id = await r.create("late", { ttlSeconds: 10 });
    await r.ready(id);
    await r.sweeper.close();
    r.clock.t = T0 + 3600 * S;
    await r.restartGateway();
    expect(r.stops.map((x) => [x.reason.code, x.at])).toEqual([["TtlExpired", T0 + 3600 * S]]);
  });

  it("a stop that lost a race is tried again later, and a sandbox no longer live is left alone", async () => {
    const r = await rig() as Rig & { refuse(v: boolean): void };
    const id = await r.create("race", { ttlSeconds: 10 });
    await r.ready(id);
    r.refuse(true);
    await r.advance(T0 + 10 * S);
    expect(r.stops).toEqual([]);
    r.refuse(false);
    await r.advance(T0 + 10 * S + ACTIVITY_FLUSH_MS);
    expect(r.stops.map((x) => x.at)).toEqual([T0 + 10 * S + ACTIVITY_FLUSH_MS]);
    // Stopping now: later sweeps do not touch it.
    await r.advance(T0 + 10_000 * S);
    expect(r.stops).toHaveLength(1);
  });

  it("forgets a deleted sandbox's activity; close leaves no timer", async () => {
    const r = await rig();
    const id = await r.create("gone", { idleStopSeconds: 30 });
    await r.ready(id);
    r.activity.touch(id);
    await r.store.transition(id, { expect: { phase: "Ready", generation: 1 }, next: { phase: "Deleting", generation: 1, reason: null } });
    await r.sweeper.idle();
    await r.store.deleteSandbox(id, { generation: 1 });
    expect(r.activity.lastActive(id)).toBeUndefined();
    await r.sweeper.close();
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
