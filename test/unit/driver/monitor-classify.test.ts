// What a Docker answer proves about one container instance. The rule under test:
// only a well-formed inspect of exactly the expected instance, not running, is an
// exit; a broken or odd channel is ChannelLost, never an exit.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { dockerError, ok, transport, TransportCode, type EngineResult } from "../../../src/driver/docker/engine/result.js";
import type { ContainerInspect } from "../../../src/driver/docker/engine/types.js";
import { LABEL } from "../../../src/driver/docker/objects.js";
import { NEVER_STARTED, type ExpectedInstance } from "../../../src/driver/docker/identity.js";
import { classifyInspect, type Verdict } from "../../../src/driver/docker/monitor/classify.js";
import { isTerminal } from "../../../src/lifecycle/supervision.js";

const ID = "3f1c9a7e5b2d4c6e8f0a1b3c5d7e9f1a2b4c6d8e0f1a3b5c7d9e1f2a4b6c8d0e";
const OTHER_ID = "9e8d7c6b5a4f3e2d1c0b9a8f7e6d5c4b3a2f1e0d9c8b7a6f5e4d3c2b1a0f9e8d";
const STARTED = "2025-05-01T10:00:00.123456789Z";
const FINISHED = "2025-05-01T10:05:00.987654321Z";
const PID = 4242;
const LABELS: Record<string, string> = {
  [LABEL.gateway]: "gw-1",
  [LABEL.sandbox]: "sbx-abc",
  [LABEL.generation]: "3",
  [LABEL.role]: "supervisor",
  [LABEL.nonce]: "n0nce-5f2e",
};
const EXPECTED: ExpectedInstance = { id: ID, startedAt: STARTED, pid: PID, labels: LABELS };

type StateOverrides = Partial<Record<keyof ContainerInspect["State"] | "RestartCount", unknown>>;

/** An inspect body shaped like dockerd 20.10's, for the expected running instance unless overridden. */
function body(o: { Id?: unknown; labels?: Record<string, string> | null; state?: StateOverrides } = {}): ContainerInspect {
  return {
    Id: o.Id ?? ID,
    Name: "/sg-sbx-abc-3-supervisor",
    Created: "2025-05-01T09:59:59.5Z",
    Image: "sha256:aa11",
    Config: { Image: "sandgate/supervisor:dev", Labels: o.labels === undefined ? { ...LABELS, "other.label": "x" } : o.labels },
    State: {
      Status: "running",
      Running: true,
      Paused: false,
      Restarting: false,
      Pid: PID,
      ExitCode: 0,
      StartedAt: STARTED,
      FinishedAt: NEVER_STARTED,
      Error: "",
      OOMKilled: false,
      ...o.state,
    },
    NetworkSettings: { Networks: null },
  } as ContainerInspect;
}

const exitedState = (code: number): StateOverrides => ({ Status: "exited", Running: false, Pid: 0, ExitCode: code, FinishedAt: FINISHED });
const inspectOk = (b: unknown): EngineResult<ContainerInspect> => ok(200, b as ContainerInspect);

const TRANSPORT_CODES = [
  "ECONNRESET",
  "EPIPE",
  "UND_ERR_SOCKET",
  "ECONNREFUSED",
  "ENOENT",
  "UND_ERR_HEADERS_TIMEOUT",
  "UND_ERR_BODY_TIMEOUT",
  "UND_ERR_CLOSED",
  TransportCode.TIMEOUT,
  TransportCode.BAD_BODY,
  TransportCode.EMPTY_BODY,
  TransportCode.ABORTED,
  TransportCode.HANDLER_ERROR,
  TransportCode.UNKNOWN,
];
const NON_404_DOCKER_STATUSES = [500, 502, 503, 409, 400, 401, 403, 304];

describe("classifyInspect: answers that prove nothing are ChannelLost", () => {
  it.each(TRANSPORT_CODES)("transport failure %s", (code) => {
    const v = classifyInspect(transport(code, `socket said ${code}`), EXPECTED);
    expect(v.kind).toBe("ChannelLost");
    expect(v.kind === "ChannelLost" && v.cause).toContain(code);
  });

  it.each(NON_404_DOCKER_STATUSES)("docker HTTP %i", (status) => {
    const v = classifyInspect(dockerError(status, "Internal Server Error\n  try later"), EXPECTED);
    expect(v.kind).toBe("ChannelLost");
    expect(v.kind === "ChannelLost" && v.cause).toContain(String(status));
  });

  it.each<[string, unknown]>([
    ["undefined", undefined],
    ["null", null],
    ["{}", {}],
    ["a string", "running"],
    ["a number", 0],
    ["an array", [body()]],
    ["no State", { Id: ID, Config: { Labels: LABELS } }],
    ["State null", { Id: ID, Config: { Labels: LABELS }, State: null }],
    ["State a string", { Id: ID, Config: { Labels: LABELS }, State: "exited" }],
    ["State {}", { Id: ID, Config: { Labels: LABELS }, State: {} }],
    ["State without Running", { Id: ID, Config: { Labels: LABELS }, State: { Status: "exited", StartedAt: STARTED, ExitCode: 1 } }],
    ["State without StartedAt", { Id: ID, Config: { Labels: LABELS }, State: { Status: "exited", Running: false, ExitCode: 1 } }],
    ["Running as a string", body({ state: { ...exitedState(1), Running: "false" } })],
    ["StartedAt as a number", body({ state: { ...exitedState(1), StartedAt: 0 } })],
    ["no Id", { Config: { Labels: LABELS }, State: { Running: false, StartedAt: STARTED, ExitCode: 1 } }],
    ["Id as a number", body({ Id: 42, state: exitedState(1) })],
  ])("ok with a malformed body: %s", (_name, b) => {
    expect(classifyInspect(inspectOk(b), EXPECTED).kind).toBe("ChannelLost");
  });
});

describe("classifyInspect: Gone", () => {
  it("docker 404 is Gone, naming the container", () => {
    const v = classifyInspect(dockerError(404, `No such container: ${ID}`), EXPECTED);
    expect(v.kind).toBe("Gone");
    expect(v.kind === "Gone" && v.detail).toContain(ID.slice(0, 12));
  });
});

describe("classifyInspect: InstanceChanged", () => {
  it("another container id", () => {
    expect(classifyInspect(inspectOk(body({ Id: OTHER_ID })), EXPECTED).kind).toBe("InstanceChanged");
    expect(classifyInspect(inspectOk(body({ Id: OTHER_ID, state: exitedState(0) })), EXPECTED).kind).toBe("InstanceChanged");
    // A prefix of the id is not the id.
    expect(classifyInspect(inspectOk(body({ Id: ID.slice(0, 12) })), EXPECTED).kind).toBe("InstanceChanged");
  });

  describe.each(Object.keys(LABELS))("label %s", (key) => {
    it.each<[string, StateOverrides]>([
      ["running", {}],
      ["exited", exitedState(0)],
    ])("mismatching while %s", (_n, state) => {
      const labels = { ...LABELS, [key]: `${LABELS[key]!}-other` };
      const v = classifyInspect(inspectOk(body({ labels, state })), EXPECTED);
      expect(v.kind).toBe("InstanceChanged");
      expect(v.kind === "InstanceChanged" && v.detail).toContain(key);
    });

    it("missing", () => {
      const labels = Object.fromEntries(Object.entries(LABELS).filter(([k]) => k !== key));
      expect(classifyInspect(inspectOk(body({ labels, state: exitedState(1) })), EXPECTED).kind).toBe("InstanceChanged");
    });
  });

  it("generation label compared as a string, not a number", () => {
    const labels = { ...LABELS, [LABEL.generation]: "03" };
    expect(classifyInspect(inspectOk(body({ labels })), EXPECTED).kind).toBe("InstanceChanged");
  });

  it("Labels null or Config missing when labels are expected", () => {
    expect(classifyInspect(inspectOk(body({ labels: null })), EXPECTED).kind).toBe("InstanceChanged");
    const noConfig: Partial<ContainerInspect> = body({ state: exitedState(1) });
    delete noConfig.Config;
    expect(classifyInspect(inspectOk(noConfig), EXPECTED).kind).toBe("InstanceChanged");
  });

  it("no expected labels: container labels are not consulted", () => {
    const noLabels: ExpectedInstance = { id: ID, startedAt: STARTED, pid: PID, labels: {} };
    expect(classifyInspect(inspectOk(body({ labels: null })), noLabels).kind).toBe("Alive");
  });

  it.each<[string, StateOverrides]>([
    ["running with a later StartedAt", { StartedAt: "2025-05-01T10:07:00.000000001Z" }],
    ["running with an earlier StartedAt", { StartedAt: "2025-05-01T09:00:00Z" }],
    ["exited with a later StartedAt", { ...exitedState(0), StartedAt: "2025-05-01T10:07:00.000000001Z" }],
    ["exited with an earlier StartedAt", { ...exitedState(137), StartedAt: "2025-04-30T10:00:00Z" }],
    // Equality only: the same instant written differently is not the recorded string.
    ["the same instant written with an offset", { StartedAt: "2025-05-01T10:00:00.123456789+00:00" }],
    ["the same instant with fewer digits", { ...exitedState(1), StartedAt: "2025-05-01T10:00:00.123456Z" }],
  ])("different StartedAt: %s", (_n, state) => {
    const v = classifyInspect(inspectOk(body({ state })), EXPECTED);
    expect(v.kind).toBe("InstanceChanged");
  });

  it("same StartedAt, running, another pid", () => {
    expect(classifyInspect(inspectOk(body({ state: { Pid: PID + 1 } })), EXPECTED).kind).toBe("InstanceChanged");
    expect(classifyInspect(inspectOk(body({ state: { Pid: 0 } })), EXPECTED).kind).toBe("InstanceChanged");
  });

  it("pid is not compared when none (or 0) was recorded", () => {
    const noPid: ExpectedInstance = { id: ID, startedAt: STARTED, labels: LABELS };
    expect(classifyInspect(inspectOk(body({ state: { Pid: 999 } })), noPid).kind).toBe("Alive");
    expect(classifyInspect(inspectOk(body({ state: { Pid: 999 } })), { ...EXPECTED, pid: 0 }).kind).toBe("Alive");
  });

  it.each<[string, StateOverrides]>([
    // dockerd's SetRestarting: Running and Restarting true, Pid 0, old StartedAt.
    ["as dockerd reports it", { Status: "restarting", Running: true, Restarting: true, Pid: 0, ExitCode: 1 }],
    ["Restarting with our pid", { Status: "restarting", Running: true, Restarting: true }],
    ["Status restarting, not running", { Status: "restarting", Running: false, Restarting: true, ExitCode: 1 }],
    ["Restarting flag, not running, no Status", { Status: undefined, Running: false, Restarting: true, ExitCode: 1 }],
  ])("Restarting: %s", (_n, state) => {
    expect(classifyInspect(inspectOk(body({ state })), EXPECTED).kind).toBe("InstanceChanged");
  });
});

describe("classifyInspect: created but never started is not an exit", () => {
  const created: StateOverrides = { Status: "created", Running: false, Pid: 0, ExitCode: 0, StartedAt: NEVER_STARTED, FinishedAt: NEVER_STARTED };

  it("expected instance was started: the container was re-created, InstanceChanged", () => {
    expect(classifyInspect(inspectOk(body({ state: created })), EXPECTED).kind).toBe("InstanceChanged");
  });

  it("expected instance was never started either: ChannelLost (nothing proven)", () => {
    for (const startedAt of [NEVER_STARTED, "", "0001-01-01T00:00:00.000000000Z"]) {
      const v = classifyInspect(inspectOk(body({ state: created })), { ...EXPECTED, startedAt });
      expect(v.kind).toBe("ChannelLost");
    }
  });

  it.each<[string, StateOverrides]>([
    ["zero StartedAt, Status exited", { ...created, Status: "exited" }],
    ["zero StartedAt with nanoseconds", { ...created, StartedAt: "0001-01-01T00:00:00.000000000Z" }],
    ["empty StartedAt", { ...created, StartedAt: "" }],
    ["Status created with our StartedAt", { ...created, StartedAt: STARTED }],
  ])("%s is never Exited", (_n, state) => {
    for (const startedAt of [STARTED, NEVER_STARTED]) {
      const v = classifyInspect(inspectOk(body({ state })), { ...EXPECTED, startedAt });
      expect(v.kind).not.toBe("Exited");
      expect(v.kind).not.toBe("Alive");
    }
  });
});

describe("classifyInspect: the expected instance", () => {
  it("running: Alive", () => {
    expect(classifyInspect(inspectOk(body()), EXPECTED)).toEqual({ kind: "Alive" });
  });

  it("paused is still the same, living instance", () => {
    expect(classifyInspect(inspectOk(body({ state: { Status: "paused", Paused: true } })), EXPECTED).kind).toBe("Alive");
  });

  it.each([0, 1, 7, 137, 143, 255])("exited with code %i: Exited with inspect's ExitCode and FinishedAt", (code) => {
    expect(classifyInspect(inspectOk(body({ state: exitedState(code) })), EXPECTED)).toEqual({
      kind: "Exited",
      code,
      finishedAt: FINISHED,
      instance: { id: ID, startedAt: STARTED },
    });
  });

  it("Status dead, not running: Exited", () => {
    const v = classifyInspect(inspectOk(body({ state: { ...exitedState(137), Status: "dead", OOMKilled: true } })), EXPECTED);
    expect(v).toMatchObject({ kind: "Exited", code: 137 });
  });

  it("an exit without an ExitCode is never reported as 0", () => {
    const v = classifyInspect(inspectOk(body({ state: { ...exitedState(0), ExitCode: undefined, FinishedAt: undefined } })), EXPECTED);
    expect(v).toEqual({ kind: "Exited", code: -1, finishedAt: "", instance: { id: ID, startedAt: STARTED } });
  });

  it("RestartCount is never consulted", () => {
    expect(classifyInspect(inspectOk(body({ state: { RestartCount: 5 } })), EXPECTED).kind).toBe("Alive");
    expect(classifyInspect(inspectOk({ ...body(), RestartCount: 5 }), EXPECTED).kind).toBe("Alive");
    expect(classifyInspect(inspectOk({ ...body({ state: exitedState(3) }), RestartCount: 9 }), EXPECTED)).toMatchObject({ kind: "Exited", code: 3 });
    // And an unchanged RestartCount does not hide a new instance.
    expect(classifyInspect(inspectOk({ ...body({ state: { StartedAt: "2025-05-01T11:00:00Z" } }), RestartCount: 0 }), EXPECTED).kind).toBe("InstanceChanged");
  });
});

describe("isTerminal", () => {
  it.each<[Verdict, boolean]>([
    [{ kind: "Exited", code: 0, finishedAt: FINISHED, instance: { id: ID, startedAt: STARTED } }, true],
    [{ kind: "InstanceChanged", detail: "x" }, true],
    [{ kind: "Gone", detail: "x" }, true],
    [{ kind: "ChannelLost", cause: "x" }, false],
    [{ kind: "Alive" }, false],
  ])("%j → %s", (v, terminal) => {
    expect(isTerminal(v)).toBe(terminal);
  });
});

// ---- properties over arbitrary Engine answers ---------------------------------------

const EXPECTEDS: ExpectedInstance[] = [
  EXPECTED,
  { id: ID, startedAt: STARTED, labels: {} },
  { id: ID, startedAt: STARTED, pid: PID, labels: {} },
  { id: ID, startedAt: NEVER_STARTED, labels: LABELS },
];

const labelValue = (v: string) => fc.oneof(fc.constant(v), fc.constant(`${v}x`), fc.constant(""), fc.string());
const labelsArb = fc.oneof(
  { weight: 4, arbitrary: fc.constant(LABELS) },
  { weight: 4, arbitrary: fc.record(Object.fromEntries(Object.entries(LABELS).map(([k, v]) => [k, labelValue(v)])), { requiredKeys: [] }) },
  { weight: 1, arbitrary: fc.constantFrom(null, undefined, "labels", 7) },
);
const stateArb = fc.record(
  {
    Status: fc.oneof(fc.constantFrom("created", "running", "paused", "restarting", "removing", "exited", "dead"), fc.string()),
    Running: fc.oneof({ weight: 6, arbitrary: fc.boolean() }, { weight: 1, arbitrary: fc.constantFrom("false", 0, 1, null) }),
    Restarting: fc.oneof(fc.boolean(), fc.constant(undefined)),
    Pid: fc.oneof(fc.constant(PID), fc.constant(0), fc.integer()),
    ExitCode: fc.oneof(fc.constantFrom(0, 1, 137, 143, 255, -1), fc.integer(), fc.double(), fc.constant("0")),
    StartedAt: fc.oneof(
      { weight: 6, arbitrary: fc.constant(STARTED) },
      { weight: 2, arbitrary: fc.constantFrom(NEVER_STARTED, "", "2025-05-01T10:00:00.123456789+00:00", `${STARTED} `, "2026-01-01T00:00:00Z") },
      { weight: 1, arbitrary: fc.jsonValue() },
    ),
    FinishedAt: fc.oneof(fc.constant(FINISHED), fc.string()),
    RestartCount: fc.nat(),
  },
  { requiredKeys: [] },
);
const inspectBodyArb = fc.oneof(
  // Real daemon answers about the expected instance, so the interesting verdicts are reached often.
  { weight: 3, arbitrary: fc.oneof(fc.constant(body()), fc.integer({ min: 0, max: 255 }).map((code) => body({ state: exitedState(code) }))) },
  {
    weight: 8,
    arbitrary: fc.record(
      {
        Id: fc.oneof({ weight: 6, arbitrary: fc.constant(ID) }, { weight: 1, arbitrary: fc.constantFrom(OTHER_ID, ID.slice(0, 12), ID.toUpperCase()) }, { weight: 1, arbitrary: fc.jsonValue() }),
        Config: fc.oneof({ weight: 6, arbitrary: fc.record({ Labels: labelsArb }) }, { weight: 1, arbitrary: fc.jsonValue() }),
        State: fc.oneof({ weight: 8, arbitrary: stateArb }, { weight: 1, arbitrary: fc.jsonValue() }),
      },
      { requiredKeys: [] },
    ),
  },
  { weight: 1, arbitrary: fc.jsonValue() },
  { weight: 1, arbitrary: fc.constant(undefined) },
);
const transportArb = fc.tuple(fc.oneof(fc.constantFrom(...TRANSPORT_CODES), fc.string()), fc.string()).map(([c, m]) => transport(c, m));
const dockerArb = fc.tuple(fc.integer({ min: 100, max: 599 }), fc.string()).map(([s, m]) => dockerError(s, m));
const inspectResultArb: fc.Arbitrary<EngineResult<ContainerInspect>> = fc.oneof(
  { weight: 8, arbitrary: inspectBodyArb.map(inspectOk) },
  { weight: 1, arbitrary: transportArb },
  { weight: 1, arbitrary: dockerArb },
);
const isRecord = (x: unknown): x is Record<string, unknown> => typeof x === "object" && x !== null;

/** The raw State of an answer that provesSameInstanceStopped() accepted. */
const stateOf = (r: EngineResult<ContainerInspect>): Record<string, unknown> => (r as { body: unknown } as { body: { State: Record<string, unknown> } }).body.State;

/** The facts an Exited verdict needs, read straight off the raw answer. */
function provesSameInstanceStopped(r: EngineResult<ContainerInspect>, e: ExpectedInstance): boolean {
  if (r.kind !== "ok") return false;
  const b: unknown = r.body;
  if (!isRecord(b) || Array.isArray(b) || b.Id !== e.id) return false;
  const s = b.State;
  if (!isRecord(s) || s.Running !== false || s.StartedAt !== e.startedAt) return false;
  const labels = isRecord(b.Config) ? b.Config.Labels : undefined;
  return Object.entries(e.labels).every(([k, v]) => isRecord(labels) && labels[k] === v);
}

describe("properties", () => {
  it("classifyInspect is Exited only for a well-formed answer about exactly the expected, stopped instance", () => {
    let exited = 0;
    fc.assert(
      fc.property(inspectResultArb, fc.constantFrom(...EXPECTEDS), (r, e) => {
        const v = classifyInspect(r, e);
        if (v.kind !== "Exited") return;
        exited++;
        expect(provesSameInstanceStopped(r, e)).toBe(true);
        const s = stateOf(r);
        expect(s.Restarting).not.toBe(true);
        expect(s.Status).not.toBe("created");
        expect(s.Status).not.toBe("restarting");
        expect(v.instance).toEqual({ id: e.id, startedAt: e.startedAt });
        expect(v.code).toBe(typeof s.ExitCode === "number" ? s.ExitCode : -1);
      }),
      { numRuns: 3000 },
    );
    // The generators must reach the interesting case, or the property proves nothing.
    expect(exited).toBeGreaterThan(50);
  });

  it("classifyInspect is Exited whenever those facts hold (and the container is not created/restarting)", () => {
    let checked = 0;
    fc.assert(
      fc.property(inspectResultArb, fc.constantFrom(...EXPECTEDS), (r, e) => {
        if (!provesSameInstanceStopped(r, e)) return;
        const s = stateOf(r);
        if (s.Status === "created" || s.Status === "restarting" || s.Restarting === true || e.startedAt === NEVER_STARTED) return;
        checked++;
        expect(classifyInspect(r, e).kind).toBe("Exited");
      }),
      { numRuns: 3000 },
    );
    expect(checked).toBeGreaterThan(50);
  });

  it("classifyInspect never throws and answers non-ok results without reading a body", () => {
    fc.assert(
      fc.property(inspectResultArb, fc.constantFrom(...EXPECTEDS), (r, e) => {
        const v = classifyInspect(r, e);
        if (r.kind === "transport") expect(v.kind).toBe("ChannelLost");
        if (r.kind === "docker") expect(v.kind).toBe(r.status === 404 ? "Gone" : "ChannelLost");
      }),
      { numRuns: 2000 },
    );
  });


});

// ---- the words: causes and details end up in events, logs and Error reasons --------------

describe("verdicts carry exact, readable evidence", () => {
  const short = ID.slice(0, 12);
  const otherShort = OTHER_ID.slice(0, 12);

  it("NEVER_STARTED is Docker's zero time", () => {
    expect(NEVER_STARTED).toBe("0001-01-01T00:00:00Z");
  });

  it.each<[string, EngineResult<ContainerInspect>, ExpectedInstance, Verdict]>([
    ["404", dockerError(404, "No such container"), EXPECTED, { kind: "Gone", detail: `container ${short} no longer exists` }],
    ["docker 500", dockerError(500, "boom\n  later"), EXPECTED, { kind: "ChannelLost", cause: "docker error HTTP 500: boom later" }],
    ["transport", transport("ECONNRESET", "socket\nhang up"), EXPECTED, { kind: "ChannelLost", cause: "transport failure ECONNRESET: socket hang up" }],
    ["malformed body", inspectOk({}), EXPECTED, { kind: "ChannelLost", cause: "inspect answered without a usable container state" }],
    ["another id", inspectOk(body({ Id: OTHER_ID })), EXPECTED, { kind: "InstanceChanged", detail: `container id is ${otherShort}, not ${short}` }],
    [
      "a label with another value",
      inspectOk(body({ labels: { ...LABELS, [LABEL.nonce]: "other" } })),
      EXPECTED,
      { kind: "InstanceChanged", detail: `label ${LABEL.nonce} is "other", not "n0nce-5f2e"` },
    ],
    [
      "a missing label",
      inspectOk(body({ labels: {} })),
      { id: ID, startedAt: STARTED, labels: { [LABEL.role]: "workload" } },
      { kind: "InstanceChanged", detail: `label ${LABEL.role} is null, not "workload"` },
    ],
    [
      "created, expected never started",
      inspectOk(body({ state: { Status: "created", Running: false, StartedAt: NEVER_STARTED } })),
      { ...EXPECTED, startedAt: NEVER_STARTED },
      { kind: "ChannelLost", cause: "container not started yet" },
    ],
    [
      "created, expected started",
      inspectOk(body({ state: { Status: "created", Running: false, StartedAt: NEVER_STARTED } })),
      EXPECTED,
      { kind: "InstanceChanged", detail: "container was re-created and never started" },
    ],
    [
      "another StartedAt",
      inspectOk(body({ state: { StartedAt: "2025-05-01T11:00:00Z" } })),
      EXPECTED,
      { kind: "InstanceChanged", detail: `started at 2025-05-01T11:00:00Z, not at the recorded ${STARTED}` },
    ],
    ["restarting", inspectOk(body({ state: { Restarting: true } })), EXPECTED, { kind: "InstanceChanged", detail: "container is restarting" }],
    ["another pid", inspectOk(body({ state: { Pid: 7 } })), EXPECTED, { kind: "InstanceChanged", detail: `pid is 7, not the recorded ${String(PID)}` }],
  ])("classifyInspect: %s", (_n, r, e, verdict) => {
    expect(classifyInspect(r, e)).toEqual(verdict);
  });
});
