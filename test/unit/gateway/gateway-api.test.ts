// The gateway's API and lifecycle service over real HTTP and a real SQLite file,
// on the in-memory driver test double (no Docker needed here).

import { statSync } from "node:fs";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { MemoryDriver } from "../../support/memory-driver.js";
import { eventually, startTestGateway, type TestGateway } from "../../support/gateway-fixture.js";

let driver: MemoryDriver;
let t: TestGateway;

beforeEach(async () => {
  driver = new MemoryDriver();
  t = await startTestGateway(driver);
});
afterEach(async () => {
  await t.close();
});

const phaseOf = async (name: string): Promise<string | undefined> => {
  const r = await t.api("GET", `/v1/sandboxes/${name}`);
  return r.status === 404 ? "gone" : (r.body.phase as string);
};
const until = (name: string, phase: string) =>
  eventually(async () => ((await phaseOf(name)) === phase ? phase : undefined), 30_000, `${name} → ${phase}`);

/** Everything the store holds, to show a refused request changed nothing. */
const snapshot = async () => ({ sandboxes: await t.gw.store.list(), events: t.gw.sqlite!.db.prepare("SELECT count(*) n FROM events").get() });

describe("auth", () => {
  it("creates the token with mode 0600 and refuses requests without it or with a wrong one", async () => {
    expect(statSync(t.home.token).mode & 0o777).toBe(0o600);
    const before = await snapshot();
    const none = await t.fetch(`/v1/sandboxes`, { method: "POST", body: JSON.stringify({ name: "x" }), headers: { "content-type": "application/json" } });
    expect(none.status).toBe(401);
    const wrong = await t.api("POST", "/v1/sandboxes", { name: "x" }, "not-the-token");
    expect(wrong.status).toBe(401);
    expect(wrong.body.error.code).toBe("unauthorized");
    expect(await snapshot()).toEqual(before);
  });
});

describe("sandbox lifecycle through the API", () => {
  it("create → Ready → stop → Stopped → start (generation 2) → Ready → delete → gone", async () => {
    const created = await t.api("POST", "/v1/sandboxes", { name: "demo", resources: { memoryMb: 256 } });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({ name: "demo", phase: "Provisioning", generation: 1 });
    expect(created.body.spec.resources).toEqual({ memoryMb: 256, cpus: 1, pids: 256 });
    await until("demo", "Ready");
    const ready = await t.api("GET", "/v1/sandboxes/demo");
    expect(ready.body.runtime.workload.id).toMatch(/^c\d+$/);

    const list = await t.api("GET", "/v1/sandboxes");
    expect(list.body.sandboxes.map((s: { name: string }) => s.name)).toEqual(["demo"]);

    expect((await t.api("POST", "/v1/sandboxes/demo/stop")).status).toBe(202);
    await until("demo", "Stopped");
    expect((await t.api("GET", "/v1/sandboxes/demo")).body.runtime).toBeNull();
    expect(driver.workspaces.has(created.body.id)).toBe(true); // the workspace survives stop

    const started = await t.api("POST", "/v1/sandboxes/demo/start");
    expect(started.body).toMatchObject({ phase: "Provisioning", generation: 2 });
    await until("demo", "Ready");
    expect((await t.api("GET", "/v1/sandboxes/demo")).body).toMatchObject({ id: created.body.id, generation: 2 });

    expect((await t.api("DELETE", "/v1/sandboxes/demo")).status).toBe(202);
    await until("demo", "gone");
    expect(driver.containers.size).toBe(0);
    expect(driver.workspaces.size).toBe(0);

    const phases = (await t.gw.store.events(created.body.id)).filter((e) => e.kind !== "info").map((e) => e.newPhase ?? "deleted");
    expect(phases).toEqual(["Provisioning", "Ready", "Stopping", "Stopped", "Provisioning", "Ready", "Deleting", "deleted"]);
  });

  it("refuses an intent the phase does not allow, names both, and changes nothing", async () => {
    await t.api("POST", "/v1/sandboxes", { name: "demo" });
    await until("demo", "Ready");
    const before = await snapshot();
    const r = await t.api("POST", "/v1/sandboxes/demo/start");
    expect(r.status).toBe(409);
    expect(r.body.error).toEqual({
      code: "not_allowed",
      message: 'cannot start sandbox "demo": it is Ready; start is allowed from Stopped, Completed or Error',
    });
    expect(await snapshot()).toEqual(before);
  });

  it("unknown image → Error(ProvisioningFailed) with the runtime's message and no containers left", async () => {
    await t.api("POST", "/v1/sandboxes", { name: "bad", image: "does-not-exist:latest" });
    await until("bad", "Error");
    const s = (await t.api("GET", "/v1/sandboxes/bad")).body;
    expect(s.reason).toEqual({ code: "ProvisioningFailed", detail: "No such image: does-not-exist:latest" });
    expect(s.reasonText).toContain("No such image");
    expect(driver.containers.size).toBe(0);
    // Error is recoverable by start (new generation) or cleaned by stop.
    expect((await t.api("POST", "/v1/sandboxes/bad/stop")).status).toBe(202);
    await until("bad", "Stopped");
  });

  it("not ready in time → Error(ProvisioningFailed), containers removed", async () => {
    await t.close();
    driver = new MemoryDriver();
    driver.ready = false;
    t = await startTestGateway(driver, { service: { readyTimeoutMs: 300 } });
    await t.api("POST", "/v1/sandboxes", { name: "slow" });
    await until("slow", "Error");
    expect((await t.api("GET", "/v1/sandboxes/slow")).body.reasonText).toMatch(/not ready after 300 ms/);
    expect(driver.containers.size).toBe(0);
  });

  it("stop while Provisioning wins: ends Stopped, never Ready, nothing left running", async () => {
    let provision!: () => void;
    driver.gate = new Promise((r) => (provision = r)); // the launch stays in Provisioning until the stop is in
    const c = await t.api("POST", "/v1/sandboxes", { name: "racy" });
    expect((await t.api("POST", "/v1/sandboxes/racy/stop")).status).toBe(202);
    provision();
    await until("racy", "Stopped");
    await t.gw.idle();
    expect(await phaseOf("racy")).toBe("Stopped");
    expect((await t.gw.store.events(c.body.id)).some((e) => e.newPhase === "Ready")).toBe(false);
    expect(driver.containers.size).toBe(0);
  });

  it("delete while Provisioning wins: nothing left", async () => {
    let provision!: () => void;
    driver.gate = new Promise((r) => (provision = r)); // the launch stays in Provisioning until the delete is in
    await t.api("POST", "/v1/sandboxes", { name: "racy" });
    expect((await t.api("DELETE", "/v1/sandboxes/racy")).status).toBe(202);
    provision();
    await until("racy", "gone");
    await t.gw.idle();
    expect(driver.containers.size).toBe(0);
    expect(driver.workspaces.size).toBe(0);
  });

  it("two concurrent stops: exactly one is accepted", async () => {
    await t.api("POST", "/v1/sandboxes", { name: "demo" });
    await until("demo", "Ready");
    driver.delayMs = 100;
    const [a, b] = await Promise.all([t.api("POST", "/v1/sandboxes/demo/stop"), t.api("POST", "/v1/sandboxes/demo/stop")]);
    expect([a.status, b.status].sort()).toEqual([202, 409]);
    await until("demo", "Stopped");
  });
});

describe("input validation", () => {
  const cases: [string, unknown, RegExp][] = [
    ["uppercase name", { name: "Demo" }, /invalid sandbox name "Demo": 1-63 characters/],
    ["empty name", { name: "" }, /invalid sandbox name ""/],
    ["64-char name", { name: "a".repeat(64) }, /invalid sandbox name/],
    ["leading dash", { name: "-demo" }, /invalid sandbox name/],
    ["missing name", {}, /^name: /],
    ["unknown field", { name: "ok", colour: "red" }, /colour/],
    ["memory too small", { name: "ok", resources: { memoryMb: 1 } }, /^resources\.memoryMb: /],
    ["pids not an integer", { name: "ok", resources: { pids: 1.5 } }, /^resources\.pids: /],
    ["bad env name", { name: "ok", env: { "A-B": "x" } }, /^env\.A-B: /],
    ["empty command", { name: "ok", command: [] }, /^command: /],
  ];
  it.each(cases)("%s → 400 with a clear message and no change", async (_label, body, pattern) => {
    const before = await snapshot();
    const r = await t.api("POST", "/v1/sandboxes", body);
    expect(r.status).toBe(400);
    expect(r.body.error.code).toBe("invalid_request");
    expect(r.body.error.message).toMatch(pattern);
    expect(await snapshot()).toEqual(before);
  });

  it("malformed JSON → 400, duplicate name → 409, unknown sandbox → 404", async () => {
    const bad = await t.fetch(`/v1/sandboxes`, {
      method: "POST",
      headers: { authorization: `Bearer ${t.token}`, "content-type": "application/json" },
      body: "{not json",
    });
    expect(bad.status).toBe(400);
    await t.api("POST", "/v1/sandboxes", { name: "demo" });
    const before = await snapshot();
    const dup = await t.api("POST", "/v1/sandboxes", { name: "demo" });
    expect(dup.status).toBe(409);
    expect(dup.body.error).toEqual({ code: "already_exists", message: 'a sandbox named "demo" already exists' });
    expect(await snapshot()).toEqual(before);
    const missing = await t.api("POST", "/v1/sandboxes/nope/stop");
    expect(missing.status).toBe(404);
    expect(missing.body.error.message).toBe('no sandbox named "nope"');
  });
});

describe("policy: fixed sections at creation, revisions after", () => {
  it("process limits from the policy set the resources unless given explicitly; bad fixed sections are refused", async () => {
    const policy = "version: 1\nprocess:\n  user: \"1234:1234\"\n  limits: { memoryMb: 300, pids: 64 }\n";
    const r = await t.api("POST", "/v1/sandboxes", { name: "lim", policy, resources: { pids: 99 } });
    expect(r.status).toBe(201);
    expect(r.body.spec.resources).toEqual({ memoryMb: 300, cpus: 1, pids: 99 });
    const before = await snapshot();
    const inside = await t.api("POST", "/v1/sandboxes", { name: "ro", policy: "version: 1\nfilesystem:\n  readOnly: [/sandbox/ref]\n" });
    expect(inside.status).toBe(400);
    expect(inside.body.error.message).toBe('invalid policy: filesystem.readOnly[0]: "/sandbox/ref" is inside the writable /sandbox');
    const root = await t.api("POST", "/v1/sandboxes", { name: "root", policy: 'version: 1\nprocess:\n  user: "0"\n' });
    expect(root.status).toBe(400);
    expect(root.body.error.message).toMatch(/process\.user: the workload never runs as root/);
    expect(await snapshot()).toEqual(before);
  });

  it("policy set: a new numbered revision; invalid or fixed-section changes are refused and change nothing", async () => {
    await t.api("POST", "/v1/sandboxes", { name: "rev" });
    await until("rev", "Ready");
    expect((await t.api("GET", "/v1/sandboxes/rev/policy")).body.revision).toBe(1);
    const ok = await t.api("PUT", "/v1/sandboxes/rev/policy", { policy: "version: 1\nnetwork:\n  rules:\n    - name: a\n      endpoints:\n        - { host: a.example.com, port: 443, protocol: https }\n" });
    expect(ok.status).toBe(200);
    expect(ok.body.revision).toBe(2);
    const before = await snapshot();
    const bad = await t.api("PUT", "/v1/sandboxes/rev/policy", { policy: "version: 1\nnetwork:\n  rules:\n    - name: a\n      endpoints:\n        - { host: '*.com', port: 443, protocol: https }\n" });
    expect(bad.status).toBe(400);
    expect(bad.body.error.message).toMatch(/network\.rules\[0\]\.endpoints\[0\]\.host: "\*\.com"/);
    const fixed = await t.api("PUT", "/v1/sandboxes/rev/policy", { policy: "version: 1\nprocess:\n  limits: { pids: 20 }\n" });
    expect(fixed.status).toBe(400);
    expect(fixed.body.error.message).toMatch(/process is fixed at creation/);
    expect(await snapshot()).toEqual(before);
    expect((await t.api("GET", "/v1/sandboxes/rev/policy")).body.revision).toBe(2);
    const check = await t.api("POST", "/v1/sandboxes/rev/policy/check", { url: "https://a.example.com/x" });
    expect(check.body.decision).toMatchObject({ allow: true, rule: "a" });
    const denied = await t.api("POST", "/v1/sandboxes/rev/policy/check", { url: "http://b.example.com/" });
    expect(denied.body.decision).toMatchObject({ allow: false, reason: "no_matching_rule" });
  });
});

describe("watch and events", () => {
  it("streams every phase change as Server-Sent Events", async () => {
    const ac = new AbortController();
    const res = await t.fetch(`/v1/watch?sandbox=`, { headers: { authorization: `Bearer ${t.token}` }, signal: ac.signal });
    expect(res.status).toBe(400); // an empty sandbox filter is invalid input
    await t.api("POST", "/v1/sandboxes", { name: "w" });
    const stream = await t.fetch(`/v1/watch?sandbox=w`, { headers: { authorization: `Bearer ${t.token}` }, signal: ac.signal });
    expect(stream.headers.get("content-type")).toBe("text/event-stream");
    const seen: string[] = [];
    const reading = (async () => {
      const dec = new TextDecoder();
      for await (const chunk of stream.body!) {
        for (const line of dec.decode(chunk as Uint8Array).split("\n")) {
          if (!line.startsWith("data: ")) continue;
          const { event } = JSON.parse(line.slice(6));
          if (event.kind === "phase" || event.kind === "deleted") seen.push(event.newPhase ?? "deleted");
          if (event.kind === "deleted") return;
        }
      }
    })();
    await until("w", "Ready");
    await t.api("DELETE", "/v1/sandboxes/w");
    await reading;
    ac.abort();
    expect(seen.slice(-2)).toEqual(["Deleting", "deleted"]);
    const events = await t.api("GET", `/v1/sandboxes/w/events`);
    expect(events.status).toBe(404);
  });
});

describe("gateway restart", () => {
  it("finishes a persisted stop intent the previous gateway did not complete", async () => {
    await t.api("POST", "/v1/sandboxes", { name: "demo" });
    await until("demo", "Ready");
    const s = (await t.gw.store.get("demo"))!;
    // Persist the intent the way the service does, then "crash" before acting on it.
    await t.gw.store.transition(s.id, { expect: { phase: "Ready", generation: 1 }, next: { phase: "Stopping", generation: 1, reason: null } });
    const homeDir = t.home.dir;
    await t.close({ keepHome: true });
    expect(driver.containers.size).toBe(2);
    t = await startTestGateway(driver, { homeDir });
    await until("demo", "Stopped");
    expect(driver.containers.size).toBe(0);
  });
});
