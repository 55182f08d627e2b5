// The Docker monitor and the gateway's recovery path, assembled as in the gateway
// (createLifecycle: service, controller, generation handles, supervision), on a
// FAKE Docker daemon (test/support/fake-docker.ts) whose streams the test cuts,
// garbles and stalls, and whose containers it exits, replaces and holds. A real
// SQLite file holds the state. Assertions are on outcomes and their order.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pino } from "pino";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { LaunchControl, MonitorFact, MonitorSink, ReadinessCheck } from "../../../src/driver/contract.js";
import type { MonitorMetrics } from "../../../src/driver/docker/monitor/docker-monitor.js";
import { BoundaryRegistry, type SessionLink } from "../../../src/gateway/control/boundary.js";
import type { ControlPlane } from "../../../src/gateway/control/control-plane.js";
import { createLifecycle, type Lifecycle } from "../../../src/gateway/sandboxes/lifecycle.js";
import { PolicyProposals } from "../../../src/gateway/sandboxes/policy-proposals.js";
import { PolicyTools } from "../../../src/gateway/sandboxes/policy-tools.js";
import { controlEvidence } from "../../../src/gateway/sandboxes/boundary-evidence.js";
import type { GatewayMessage } from "../../../src/protocol/wire.js";
import { Store, type SandboxRecord } from "../../../src/store/store.js";
import { FakeDocker, FakeDockerDriver } from "../../support/fake-docker.js";
import { eventually } from "../../support/gateway-fixture.js";

const log = pino({ level: process.env.SANDGATE_TEST_LOG ?? "silent" });

interface Harness {
  fd: FakeDocker;
  driver: FakeDockerDriver;
  store: Store;
  lc: Lifecycle;
  /** The gateway's own boundary evidence, as supervision reads it; a test may fail it. */
  boundary: { check: ReadinessCheck | null };
  /**
   * The id of the sandbox's live control session as supervision reads it (the
   * harness has no control plane: none unless a test sets one). A new id is a
   * session that dropped and came back.
   */
  session: { id: string | null };
  /** Runs before a monitor's fact reaches the gateway. */
  beforeReport: { hook: ((fact: MonitorFact) => void) | null };
  /** Runs right after supervision read the boundary evidence of a sandbox (a test acts "between the checks and the commit"). */
  afterBoundaryRead: { hook: ((sandboxId: string) => void) | null };
  /** With `supervisors`: each sandbox's supervisor, on a real BoundaryRegistry (else empty). */
  supervisors: Map<string, FakeSupervisor>;
  close(): Promise<void>;
}

let sessions = 0;

/**
 * A supervisor's side of its control session, on the gateway's real BoundaryRegistry: it
 * acks every revision pushed to it (unless told to hold them) and reports its proxy
 * listening. Its session needs no Docker: it stays up while the fake daemon is down.
 */
class FakeSupervisor {
  readonly link: SessionLink;
  /** Revisions pushed to it, in order. */
  readonly pushed: number[] = [];
  readonly lockdowns: string[] = [];
  /** false: a pushed revision is held, not acked (a supervisor that has not applied it). */
  acks = true;

  constructor(
    private readonly b: BoundaryRegistry,
    sandboxId: string,
    generation: number,
  ) {
    this.link = { sessionId: `session-${++sessions}`, sandboxId, generation, send: (m) => this.#receive(m), close: () => undefined };
    b.admit(this.link);
  }

  #receive(m: GatewayMessage): void {
    if (m.type === "lockdown") this.lockdowns.push(m.reason);
    if (m.type !== "policy") return;
    this.pushed.push(m.revision);
    if (this.acks) queueMicrotask(() => this.ack(m.revision));
  }

  ack(revision: number): void {
    this.b.ack(this.link, { type: "ack", revision, applied: true, closed: 0 });
    this.b.heartbeat(this.link, { type: "heartbeat", enforcedRevision: revision, proxy: "listening", lockdown: false, auditDropped: 0 });
  }
}

/** The gateway's control plane as the lifecycle uses it: a real BoundaryRegistry; each launch connects a FakeSupervisor. */
function fakeControl(supervisors: Map<string, FakeSupervisor>): ControlPlane {
  // Heartbeats never go stale here: a test's supervisor beats only when it acks.
  const boundary = new BoundaryRegistry({ heartbeatStaleMs: 600_000, sessionIdleMs: 600_000 });
  const launchControl = async (l: { sandboxId: string; generation: number }): Promise<LaunchControl> => {
    supervisors.set(l.sandboxId, new FakeSupervisor(boundary, l.sandboxId, l.generation));
    return { url: "wss://127.0.0.1:9/fake", fingerprint: "fake", token: "fake", graceMs: 15_000 };
  };
  return { boundary, launchControl, launchNetwork: () => ({ hostAddresses: [], resolvers: null }) } as unknown as ControlPlane;
}

let dir: string;
let h: Harness;

async function harness(opts: { recoveryDeadlineMs?: number; boundaryDeadlineMs?: number; supervisors?: boolean } = {}): Promise<Harness> {
  const fd = await FakeDocker.start("gw-unit");
  const boundary: Harness["boundary"] = { check: null };
  const session: Harness["session"] = { id: null };
  const beforeReport: Harness["beforeReport"] = { hook: null };
  const wrap = (s: MonitorSink): MonitorSink => ({
    report: (f) => {
      beforeReport.hook?.(f);
      return s.report(f);
    },
  });
  const driver = new FakeDockerDriver(fd, {}, wrap);
  const store = Store.open(join(dir, "state.db"));
  const supervisors = new Map<string, FakeSupervisor>();
  const control = opts.supervisors ? fakeControl(supervisors) : null;
  const real = controlEvidence(control);
  const afterBoundaryRead: Harness["afterBoundaryRead"] = { hook: null };
  const read = (id: string, g: number): ReadinessCheck => {
    const r = boundary.check ?? real.boundary(id, g);
    afterBoundaryRead.hook?.(id);
    return r;
  };
  const evidence = { boundary: read, liveSession: (id: string, g: number) => session.id ?? real.liveSession(id, g) };
  const lc = createLifecycle({
    store,
    driver,
    control,
    log,
    evidence,
    options: { recoveryDeadlineMs: opts.recoveryDeadlineMs ?? 60_000, boundaryDeadlineMs: opts.boundaryDeadlineMs ?? 30_000, recoveryRetryMs: 50, readyTimeoutMs: 5_000 },
  });
  await lc.runtime.prepare();
  await lc.resume();
  // Sandboxes made Ready before the monitor's stream is open go Recovering at once
  // (nothing proves them yet): start the tests from a connected monitor.
  await eventually(() => ((lc.monitor!.metrics() as MonitorMetrics).dockerConnected ? true : undefined), 10_000, "monitor connected");
  return {
    fd,
    driver,
    store,
    lc,
    boundary,
    session,
    beforeReport,
    afterBoundaryRead,
    supervisors,
    async close() {
      await lc.close();
      const leaks = lc.pending();
      control?.boundary.close();
      store.close();
      await fd.close();
      expect(leaks).toEqual({ tasks: 0, checks: 0, timers: 0 });
    },
  };
}

beforeEach(async () => {
  dir = mkdtempSync(join(tmpdir(), "sg-monitor-"));
  h = await harness();
});
afterEach(async () => {
  await h.close();
  rmSync(dir, { recursive: true, force: true });
});

const phase = async (name: string): Promise<string | undefined> => (await h.store.get(name))?.phase;
const metrics = (): MonitorMetrics => h.lc.monitor!.metrics() as MonitorMetrics;
const waitPhase = async (name: string, p: string, ms = 10_000): Promise<SandboxRecord> =>
  eventually(async () => ((await h.store.get(name))?.phase === p ? (await h.store.get(name))! : undefined), ms, `${name} → ${p} (now ${await phase(name) ?? "gone"})`);
/**
 * Resolves once the sandbox entered `p` (a phase event to it exists): the fake
 * daemon is fast enough for Ready → Recovering → Ready to pass between two polls
 * of the current phase, so transient phases are waited for in the log.
 */
const entered = (name: string, p: string, ms = 10_000) =>
  eventually(async () => ((await h.store.events((await h.store.get(name))?.id ?? name, { limit: 10_000 })).some((e) => e.newPhase === p) ? true : undefined), ms, `${name} entered ${p}`);

/** Phase changes of a sandbox, in order, as "Old→New". */
const phaseLog = async (name: string): Promise<string[]> => {
  const id = (await h.store.get(name))?.id ?? name;
  return (await h.store
    .events(id, { limit: 10_000 }))
    .filter((e) => e.kind === "phase" || e.kind === "deleted")
    .map((e) => `${e.oldPhase ?? ""}→${e.newPhase ?? ""}`);
};
/** The message of the sandbox's last Recovering → Ready event: which evidence re-verified it. */
const recoveredBy = async (name: string): Promise<string | undefined> =>
  (await h.store
    .events((await h.store.get(name))!.id, { limit: 10_000 }))
    .filter((e) => e.oldPhase === "Recovering" && e.newPhase === "Ready")
    .at(-1)?.message ?? undefined;
const containersOf = (s: SandboxRecord) => ({ sup: h.fd.containers.get(s.runtime!.supervisor.id), wl: h.fd.containers.get(s.runtime!.workload.id) });

async function ready(name: string): Promise<SandboxRecord> {
  await h.lc.service.create({ name });
  const s = await waitPhase(name, "Ready");
  // Armed, and the events stream is open: the monitor is watching.
  await eventually(() => (metrics().monitors > 0 && metrics().dockerConnected && h.fd.openStreams > 0 ? true : undefined), 10_000, "monitor connected");
  return s;
}

/**
 * Ready, then `breakIt` and a cut events stream: reconnected and re-checked
 * several times and still Recovering; after `heal`, Ready.
 */
async function heldRecovering(name: string, breakIt: () => void, heal: () => void): Promise<void> {
  await ready(name);
  breakIt();
  h.fd.cutStreams();
  await entered(name, "Recovering");
  const checked = metrics().classifications.alive;
  await eventually(() => (metrics().dockerConnected && metrics().classifications.alive >= checked + 6 ? true : undefined), 10_000, `re-checks of ${name}`);
  expect(await phase(name)).toBe("Recovering");
  heal();
  await waitPhase(name, "Ready");
}

/** Ready, then the daemon goes away and `change` alters a container meanwhile: Recovering, then Error(code), never Ready. */
async function changedWhileDown(name: string, change: (c: ReturnType<typeof containersOf>) => void, code: string): Promise<void> {
  const s = await ready(name);
  h.fd.stop();
  await entered(name, "Recovering");
  change(containersOf(s));
  h.fd.resume();
  const failed = await waitPhase(name, "Error");
  expect(failed.reason?.code).toBe(code);
  expect((await phaseLog(name)).slice(2)).toEqual(["Ready→Recovering", "Recovering→Error"]);
}

describe("a lost channel is never an exit", () => {
  it("events stream cut, containers alive: Ready → Recovering → Ready, same instances, nothing removed", async () => {
    const s = await ready("cut");
    h.fd.cutStreams();
    await entered("cut", "Recovering");
    const back = await waitPhase("cut", "Ready");
    expect(await phaseLog("cut")).toEqual(["→Provisioning", "Provisioning→Ready", "Ready→Recovering", "Recovering→Ready"]);
    expect(back.runtime).toEqual(s.runtime);
    expect(containersOf(s).sup).toBeDefined();
    expect(containersOf(s).wl).toBeDefined();
    expect(h.driver.calls.filter((c) => c.startsWith("stop") || c.startsWith("remove"))).toEqual([]);
    expect(metrics().classifications.exited).toBe(0);
    expect(metrics().disconnects).toBeGreaterThan(0);
  });

  it("a non-JSON line on the events stream (a proxy's error page): the same as a cut", async () => {
    await ready("garbled");
    h.fd.garbleStreams();
    await entered("garbled", "Recovering");
    await waitPhase("garbled", "Ready");
    expect((await phaseLog("garbled")).slice(2)).toEqual(["Ready→Recovering", "Recovering→Ready"]);
    expect(metrics().classifications.exited).toBe(0);
  });

  it("a frozen daemon (accepts, answers nothing): Recovering while frozen, Ready after, nothing removed", async () => {
    const s = await ready("frozen");
    h.fd.freeze();
    await entered("frozen", "Recovering");
    h.fd.resume();
    await waitPhase("frozen", "Ready");
    expect((await phaseLog("frozen")).slice(2)).toEqual(["Ready→Recovering", "Recovering→Ready"]);
    expect(containersOf(s).wl).toBeDefined();
    expect(metrics().classifications.exited).toBe(0);
  });

  it("a daemon that is down (every connection cut) and comes back: reconnects with backoff, then Ready", async () => {
    await ready("down");
    h.fd.stop();
    await entered("down", "Recovering");
    await eventually(() => (metrics().reconnectAttempts >= 3 ? true : undefined), 10_000, "several reconnect attempts");
    expect(await phase("down")).toBe("Recovering");
    h.fd.resume();
    await waitPhase("down", "Ready");
    expect(metrics().dockerConnected).toBe(true);
  });
});

describe("proven failures fail closed", () => {
  it("the supervisor exits while the stream is up (die event): Error(SupervisorExited, 7), then its containers are removed", async () => {
    const s = await ready("sup-exit");
    const { sup } = containersOf(s);
    h.fd.exit(sup!.id, 7);
    h.fd.emit(sup!, "die");
    const failed = await waitPhase("sup-exit", "Error");
    expect(failed.reason).toMatchObject({ code: "SupervisorExited", exitCode: 7 });
    await eventually(async () => ((await h.store.get("sup-exit"))?.runtime === null ? true : undefined), 10_000, "runtime cleared after teardown");
    expect(containersOf(s).wl).toBeUndefined();
    expect(h.driver.calls).toContain(`stop ${s.id} g1`);
    expect((await phaseLog("sup-exit")).slice(2)).toEqual(["Ready→Error"]);
  });

  it("an exit while the stream is down (no event at all): found by re-reading state after reconnect", async () => {
    const s = await ready("gap-exit");
    h.fd.stop();
    await entered("gap-exit", "Recovering");
    h.fd.exit(containersOf(s).sup!.id, 137);
    h.fd.resume();
    const failed = await waitPhase("gap-exit", "Error");
    expect(failed.reason).toMatchObject({ code: "SupervisorExited", exitCode: 137 });
    expect((await phaseLog("gap-exit")).slice(2)).toEqual(["Ready→Recovering", "Recovering→Error"]);
  });

  it("the workload exits 0 on its own: Completed, and its supervisor is removed", async () => {
    const s = await ready("done");
    const { wl } = containersOf(s);
    h.fd.exit(wl!.id, 0);
    h.fd.emit(wl!, "die");
    await waitPhase("done", "Completed");
    await eventually(() => (containersOf(s).sup === undefined ? true : undefined), 10_000, "supervisor removed");
  });

  it("a container replaced under its recorded name: Error(SupervisorReplaced), never resumed", async () => {
    const s = await ready("replaced");
    const { sup } = containersOf(s);
    h.fd.containers.delete(sup!.id);
    const look = h.fd.add(s.id, 1, "supervisor", s.runtime!.nonce);
    look.name = sup!.name;
    h.fd.emit(look, "start");
    const failed = await waitPhase("replaced", "Error");
    expect(failed.reason?.code).toBe("SupervisorReplaced");
  });

  it("Docker away past the recovery deadline: Error(RuntimeUnavailable) while it is down; the teardown happens when it answers", async () => {
    await h.close();
    h = await harness({ recoveryDeadlineMs: 600 });
    const s = await ready("deadline");
    h.fd.stop();
    const failed = await waitPhase("deadline", "Error");
    expect(failed.reason?.code).toBe("RuntimeUnavailable");
    // Still owed: the containers are there, nothing could remove them.
    expect(containersOf(s).wl).toBeDefined();
    expect((await h.store.get("deadline"))?.runtime).not.toBeNull();
    h.fd.resume();
    await eventually(() => (containersOf(s).wl === undefined && containersOf(s).sup === undefined ? true : undefined), 10_000, "owed teardown done");
    await eventually(async () => ((await h.store.get("deadline"))?.runtime === null ? true : undefined), 10_000, "runtime cleared");
    expect(await phase("deadline")).toBe("Error");
  });
});

describe("re-verification gates the return to Ready", () => {
  it("both instances alive but the supervisor's health fails: stays Recovering until it answers", async () => {
    await heldRecovering("unhealthy", () => (h.fd.healthy = false), () => (h.fd.healthy = true));
  });

  it("both instances alive, health ok, but the gateway's boundary evidence fails: stays Recovering until it holds", async () => {
    await heldRecovering("no-session", () => (h.boundary.check = { name: "control session", ok: false, detail: "no control session" }), () => (h.boundary.check = null));
  });

  it("the workload exec probe fails: stays Recovering", async () => {
    // The control session drops while Docker is away and comes back as a new one:
    // no unbroken session, so the exec probe decides.
    h.session.id = "session-1";
    await ready("probe");
    h.fd.probeExitCode = 1;
    h.fd.stop();
    await entered("probe", "Recovering");
    h.session.id = "session-2";
    h.fd.resume();
    await eventually(() => (h.fd.execs >= 3 ? true : undefined), 10_000, "re-checks with a failing probe");
    expect(await phase("probe")).toBe("Recovering");
    h.fd.probeExitCode = 0;
    await waitPhase("probe", "Ready");
    expect(await recoveredBy("probe")).toMatch(/exec probe ok/);
  });
});

describe("an unbroken control session stands in for the exec probe", () => {
  it("the same session up throughout, both instances unchanged: Ready again without any exec", async () => {
    h.session.id = "session-1";
    const s = await ready("unbroken");
    h.fd.stop();
    await entered("unbroken", "Recovering");
    h.fd.resume();
    const back = await waitPhase("unbroken", "Ready");
    expect(back.runtime).toEqual(s.runtime);
    expect(h.fd.execs).toBe(0);
    expect(await recoveredBy("unbroken")).toMatch(/unbroken control session/);
    expect((await phaseLog("unbroken")).slice(2)).toEqual(["Ready→Recovering", "Recovering→Ready"]);
  });

  it("no control session before the outage: the exec probe runs, and a failing one keeps it Recovering", async () => {
    await ready("no-session-before");
    h.fd.probeExitCode = 1;
    h.fd.cutStreams();
    await entered("no-session-before", "Recovering");
    // One appears meanwhile: it did not hold through the outage, so it proves nothing.
    h.session.id = "session-late";
    await eventually(() => (h.fd.execs >= 3 ? true : undefined), 10_000, "exec probes run");
    expect(await phase("no-session-before")).toBe("Recovering");
    h.fd.probeExitCode = 0;
    await waitPhase("no-session-before", "Ready");
    expect(await recoveredBy("no-session-before")).toMatch(/exec probe ok/);
  });

  it("the same session, but the supervisor's health fails: stays Recovering until it answers, still without an exec", async () => {
    h.session.id = "session-1";
    await heldRecovering("unbroken-unhealthy", () => (h.fd.healthy = false), () => (h.fd.healthy = true));
    expect(h.fd.execs).toBe(0);
  });

  it("the same session id, but the gateway's session check fails: stays Recovering until it holds", async () => {
    h.session.id = "session-1";
    await heldRecovering("unbroken-stale", () => (h.boundary.check = { name: "control session", ok: false, detail: "heartbeat stale" }), () => (h.boundary.check = null));
  });

  it("the same session, but the workload is another instance (pid) after the outage: Error(WorkloadReplaced), never Ready", async () => {
    h.session.id = "session-1";
    await changedWhileDown("changed", (c) => (c.wl!.pid += 1), "WorkloadReplaced");
    expect(h.fd.execs).toBe(0);
  });

  it("the same session, but the supervisor restarted (another StartedAt): Error(SupervisorReplaced), never Ready", async () => {
    h.session.id = "session-1";
    await changedWhileDown("restarted", (c) => (c.sup!.startedAt = "2026-01-02T00:00:00.000000001Z"), "SupervisorReplaced");
  });

  it("a boundary-caused Recovering keeps the exec probe, even with the session still up", async () => {
    h.session.id = "session-1";
    const s = await ready("b-probe");
    h.fd.probeExitCode = 1;
    h.boundary.check = { name: "control session", ok: false, detail: "supervisor in lockdown" };
    h.lc.supervision.boundaryLost(s.id, 1, "supervisor in lockdown");
    await entered("b-probe", "Recovering");
    h.boundary.check = null;
    await eventually(() => (h.fd.execs >= 3 ? true : undefined), 10_000, "exec probes run");
    expect(await phase("b-probe")).toBe("Recovering");
    h.fd.probeExitCode = 0;
    await waitPhase("b-probe", "Ready");
    expect(await recoveredBy("b-probe")).toMatch(/exec probe ok/);
  });
});

describe("the boundary reported lost by the gateway", () => {
  it("Ready → Recovering with the reason; re-verified once the boundary holds again → Ready, nothing removed", async () => {
    const s = await ready("b-back");
    h.boundary.check = { name: "control session", ok: false, detail: "heartbeat stale" };
    h.lc.supervision.boundaryLost(s.id, 1, "heartbeat stale");
    await entered("b-back", "Recovering");
    expect((await h.store.events(s.id, { limit: 100 })).find((e) => e.newPhase === "Recovering")?.message).toBe("boundary unhealthy: heartbeat stale");
    h.boundary.check = null;
    await waitPhase("b-back", "Ready");
    expect(containersOf(s).wl).toBeDefined();
    expect((await phaseLog("b-back")).slice(2)).toEqual(["Ready→Recovering", "Recovering→Ready"]);
  });

  it("not restored within the boundary deadline (Docker answering): Error(BoundaryUnhealthy) naming the failing check, containers removed", async () => {
    await h.close();
    h = await harness({ boundaryDeadlineMs: 500 });
    const s = await ready("b-gone");
    h.boundary.check = { name: "control session", ok: false, detail: "no control session" };
    h.lc.supervision.boundaryLost(s.id, 1, "no control session");
    const failed = await waitPhase("b-gone", "Error");
    expect(failed.reason).toMatchObject({ code: "BoundaryUnhealthy" });
    expect(failed.reason?.code === "BoundaryUnhealthy" && failed.reason.detail).toMatch(/control session: no control session/);
    await eventually(() => (containersOf(s).wl === undefined ? true : undefined), 10_000, "workload removed");
  });

  it("the session dropped because the supervisor died (its die event not yet read): Error(SupervisorExited) straight from Ready", async () => {
    const s = await ready("b-died");
    h.fd.exit(containersOf(s).sup!.id, 137);
    h.lc.supervision.boundaryLost(s.id, 1, "no control session");
    const failed = await waitPhase("b-died", "Error");
    expect(failed.reason).toMatchObject({ code: "SupervisorExited", exitCode: 137 });
    expect((await phaseLog("b-died")).slice(2)).toEqual(["Ready→Error"]);
  });

  it("a report for another generation, or for a sandbox not Ready, changes nothing", async () => {
    const s = await ready("b-other");
    h.lc.supervision.boundaryLost(s.id, 2, "stale report");
    h.lc.supervision.boundaryLost("sbx_unknown", 1, "stale report");
    // A later, real trigger is handled, so the two above were seen and ignored.
    h.fd.cutStreams();
    await entered("b-other", "Recovering");
    await waitPhase("b-other", "Ready");
    expect((await h.store.events(s.id, { limit: 100 })).filter((e) => e.message?.startsWith("boundary unhealthy"))).toEqual([]);
  });
});

describe("late and stale observations", () => {
  it("a check in flight when stop is persisted: its exit verdict is dropped, the stop completes, no Error", async () => {
    const s = await ready("late-stop");
    const { sup } = containersOf(s);
    let release!: () => void;
    h.fd.holdInspect.set(sup!.id, new Promise<void>((r) => (release = r)));
    h.fd.exit(sup!.id, 9);
    h.fd.emit(sup!, "die");
    await eventually(() => (h.fd.engine.requestsTo(`/containers/${sup!.id}/json`).length > 0 ? true : undefined), 5_000, "the check is waiting on inspect");
    await h.lc.service.request("late-stop", "stop");
    h.fd.holdInspect.delete(sup!.id);
    release();
    await waitPhase("late-stop", "Stopped");
    expect((await phaseLog("late-stop")).slice(2)).toEqual(["Ready→Stopping", "Stopping→Stopped"]);
    expect((await h.store.get("late-stop"))?.reason).toBeNull();
  });

  it("a check in flight when delete is persisted: the delete wins, no Error is ever recorded", async () => {
    const s = await ready("late-del");
    const { wl } = containersOf(s);
    let release!: () => void;
    h.fd.holdInspect.set(wl!.id, new Promise<void>((r) => (release = r)));
    h.fd.exit(wl!.id, 3);
    h.fd.emit(wl!, "die");
    await eventually(() => (h.fd.engine.requestsTo(`/containers/${wl!.id}/json`).length > 0 ? true : undefined), 5_000, "the check is waiting on inspect");
    await h.lc.service.request("late-del", "delete");
    h.fd.holdInspect.delete(wl!.id);
    release();
    await eventually(async () => (await h.store.get("late-del") === null ? true : undefined), 10_000, "deleted");
    expect(await phaseLog(s.id)).toEqual(["→Provisioning", "Provisioning→Ready", "Ready→Deleting", "Deleting→"]);
  });

  it("an observation for a stopped generation is refused (no bypass): stale, nothing changes", async () => {
    const s = await ready("fenced");
    await h.lc.service.request("fenced", "stop");
    await waitPhase("fenced", "Stopped");
    // What a monitor that missed the stop would report, straight to the gateway.
    const sink = h.driver.sink!;
    const exited = (code: number) => ({ kind: "Exited" as const, code, finishedAt: "2026-01-01T00:00:00Z", instance: { id: "x", startedAt: "y" } });
    const alive = { kind: "Alive" as const };
    const late = (generation: number, verdicts: { supervisor: ReturnType<typeof exited> | typeof alive; workload: ReturnType<typeof exited> | typeof alive }) => sink.report({ kind: "verdicts", sandboxId: s.id, generation, verdicts });
    expect(await late(1, { supervisor: exited(1), workload: alive })).toEqual({ do: "stale" });
    expect(await phase("fenced")).toBe("Stopped");
    expect((await h.store.get("fenced"))?.reason).toBeNull();
    // Nor while Stopping (the window a late verdict usually lands in).
    await h.lc.service.request("fenced", "start");
    await waitPhase("fenced", "Ready");
    await h.lc.service.request("fenced", "stop");
    expect(await late(2, { supervisor: alive, workload: exited(1) })).toEqual({ do: "stale" });
    expect(await late(2, { supervisor: alive, workload: exited(0) })).toEqual({ do: "stale" });
    expect(await sink.report({ kind: "probed", sandboxId: s.id, generation: 2, checks: [], exec: true })).toEqual({ do: "stale" });
    await waitPhase("fenced", "Stopped");
    expect((await phaseLog("fenced")).filter((l) => l.includes("Error") || l.includes("Completed"))).toEqual([]);
  });

  it("events of an older generation are dropped and counted; the newer generation is unaffected", async () => {
    const s1 = await ready("gens");
    const old = containersOf(s1);
    await h.lc.service.request("gens", "stop");
    await waitPhase("gens", "Stopped");
    await h.lc.service.request("gens", "start");
    const s2 = await waitPhase("gens", "Ready");
    expect(s2.generation).toBe(2);
    await eventually(() => (metrics().monitors === 1 ? true : undefined), 5_000, "generation 2 armed");
    const dropped = metrics().classifications.stale_dropped;
    // A late event about generation 1's supervisor (its labels say generation 1).
    h.fd.emit(old.sup!, "die");
    await eventually(() => (metrics().classifications.stale_dropped > dropped ? true : undefined), 5_000, "stale event dropped");
    expect(await phase("gens")).toBe("Ready");
    expect((await h.store.get("gens"))?.generation).toBe(2);
    expect(containersOf(s2).sup).toBeDefined();
  });
});

describe("a policy set while Recovering (tightening a policy during an outage)", () => {
  /** Denies all egress: tighter than any policy. */
  const TIGHT = "version: 1\n";

  /** A sandbox with a supervisor on the real BoundaryRegistry, Ready, then Docker down: Recovering, its session still up. */
  async function recovering(name: string, opts: { recoveryDeadlineMs?: number } = {}): Promise<{ s: SandboxRecord; sup: FakeSupervisor }> {
    await h.close();
    h = await harness({ supervisors: true, ...opts });
    const s = await ready(name);
    const sup = h.supervisors.get(s.id)!;
    expect(sup.pushed).toEqual([1]);
    h.fd.stop();
    await entered(name, "Recovering");
    return { s, sup };
  }

  /** Docker answers again and the sandbox was re-checked several times (both instances alive each time), staying Recovering. */
  async function heldBack(name: string): Promise<void> {
    const checked = metrics().classifications.alive;
    await eventually(
      async () => {
        expect((await phaseLog(name)).slice(2)).toEqual(["Ready→Recovering"]);
        return metrics().dockerConnected && metrics().classifications.alive >= checked + 6 ? true : undefined;
      },
      10_000,
      `re-checks of ${name}`,
    );
  }

  it("is accepted: the revision is stored and pushed at once over the live session; Ready again only once the supervisor acks it", async () => {
    const { s, sup } = await recovering("tighten");
    sup.acks = false;
    expect(await h.lc.service.setPolicy("tighten", TIGHT)).toEqual({ revision: 2, pushed: true, phase: "Recovering" });
    expect((await h.store.policy(s.id))?.revision).toBe(2);
    // Pushed while Docker is still down: the control session does not need it.
    expect(sup.pushed).toEqual([1, 2]);
    h.fd.resume();
    // Same instances, health fine, session unbroken: only the missing ack holds it.
    await heldBack("tighten");
    expect(h.lc.read.boundaryOf(s.id)).toMatchObject({ enforcedRevision: 1, desiredRevision: 2, problem: "enforcing revision 1, want 2" });
    sup.ack(2);
    await waitPhase("tighten", "Ready");
    expect(h.lc.read.boundaryOf(s.id)).toMatchObject({ enforcedRevision: 2, desiredRevision: 2, healthy: true });
    expect((await phaseLog("tighten")).slice(2)).toEqual(["Ready→Recovering", "Recovering→Ready"]);
  });

  it("--wait reports it enforced once the supervisor acks, while Docker is still down; the sandbox stays Recovering until Docker re-verifies it", async () => {
    const { s, sup } = await recovering("tighten-wait");
    const { revision } = await h.lc.service.setPolicy("tighten-wait", TIGHT);
    expect(await h.lc.service.waitForPolicy(s.id, revision, 10_000)).toMatchObject({ enforced: true, connectionsClosed: 0 });
    expect(sup.pushed).toEqual([1, 2]);
    expect(metrics().dockerConnected).toBe(false);
    expect(await phase("tighten-wait")).toBe("Recovering");
    h.fd.resume();
    await waitPhase("tighten-wait", "Ready");
  });

  it("a supervisor that never acks the newest revision: the deadline still applies, Error(BoundaryUnhealthy) naming it, never Ready", async () => {
    const { s, sup } = await recovering("never-acks", { recoveryDeadlineMs: 3_000 });
    sup.acks = false;
    await h.lc.service.setPolicy("never-acks", TIGHT);
    h.fd.resume();
    const failed = await waitPhase("never-acks", "Error");
    expect(failed.reason).toMatchObject({ code: "BoundaryUnhealthy" });
    expect(failed.reason?.code === "BoundaryUnhealthy" && failed.reason.detail).toMatch(/control session: enforcing revision 1, want 2/);
    expect((await phaseLog("never-acks")).slice(2)).toEqual(["Ready→Recovering", "Recovering→Error"]);
    // Failed closed: the supervisor was locked down, the containers removed.
    expect(sup.lockdowns).toEqual(["sandbox_failed"]);
    await eventually(() => (containersOf(s).wl === undefined ? true : undefined), 10_000, "workload removed");
  });

  it("a revision accepted after the re-verification's checks passed, before Ready is committed: still Recovering until it is acked", async () => {
    const { s, sup } = await recovering("between");
    let accepted: number | null = null;
    // The probes are in and the boundary evidence holds as read: the revision is accepted
    // right after that read, before the commit in the sandbox's queue.
    h.beforeReport.hook = (f) => {
      if (f.kind !== "probed" || f.sandboxId !== s.id || accepted !== null) return;
      h.afterBoundaryRead.hook = (id) => {
        if (id !== s.id || accepted !== null) return;
        h.afterBoundaryRead.hook = null;
        sup.acks = false;
        // In the sandbox's queue ahead of the commit: accepted after the checks, before the commit.
        void h.lc.serial.run(
          s.id,
          async () => {
            accepted = (await h.lc.service.setPolicy("between", TIGHT)).revision;
          },
          (err) => {
            throw err;
          },
        );
      };
    };
    h.fd.resume();
    await eventually(() => (accepted !== null ? true : undefined), 10_000, "a revision accepted between the checks and the commit");
    await heldBack("between");
    sup.ack(accepted!);
    await waitPhase("between", "Ready");
    expect(h.lc.read.boundaryOf(s.id)).toMatchObject({ enforcedRevision: 2, desiredRevision: 2 });
  });

  it("policy approve while Recovering behaves as policy set: the proposal's revision is stored and pushed; Ready once acked", async () => {
    const { s, sup } = await recovering("approve");
    const proposals = new PolicyProposals({ store: h.store, read: h.lc.read, service: h.lc.service, tools: new PolicyTools(h.lc.read), log });
    const p = await proposals.propose("approve", TIGHT, { by: "agent", reason: "nothing out during the outage" });
    sup.acks = false;
    const r = await proposals.approve("approve", p.id, "operator");
    expect(r).toMatchObject({ revision: 2, pushed: true, phase: "Recovering", proposal: { state: "approved", revision: 2 } });
    expect(sup.pushed).toEqual([1, 2]);
    h.fd.resume();
    await heldBack("approve");
    sup.ack(2);
    await waitPhase("approve", "Ready");
    expect((await h.store.policy(s.id))?.revision).toBe(2);
  });
});
