// `sandgate audit`: the audit trail through the API and the real CLI against a real
// gateway whose audit table (a real SQLite file) holds recorded decisions: the table,
// --decision (would_deny included), --since, --json as OCSF JSON lines, --follow, and
// the mistakes a user makes with them.
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { spawn } from "node:child_process";
import { CLI_ARGS, CLI_TEST_TIMEOUT_MS, cli } from "../../support/cli-runner.js";
import { eventually, startTestGateway, type TestGateway } from "../../support/gateway-fixture.js";
import { MemoryDriver } from "../../support/memory-driver.js";

// Spawn-heavy: see CLI_TEST_TIMEOUT_MS.
vi.setConfig({ testTimeout: CLI_TEST_TIMEOUT_MS });

describe("sandgate audit: table, filters, OCSF JSON lines, follow", () => {
  let t: TestGateway;
  let id: string;
  const run = (...args: string[]) => cli(["--home", t.home.dir, ...args]);
  const at = (h: number) => new Date(Date.UTC(2026, 11, 1, h)).toISOString();
  const egress = (host: string, decision: string, extra: Record<string, unknown>) => ({ type: "egress", time: at(0), decision, host, port: 443, protocol: "https", revision: 1, ...extra });

  beforeAll(async () => {
    t = await startTestGateway(new MemoryDriver());
    expect((await t.api("POST", "/v1/sandboxes", { name: "aud" })).status).toBe(201);
    id = (await eventually(async () => ((await t.api("GET", "/v1/sandboxes/aud")).body?.phase === "Ready" ? (await t.api("GET", "/v1/sandboxes/aud")).body : undefined))).id;
    await t.gw.store.appendAudit([
      { sandboxId: id, generation: 1, time: at(1), decision: "allow", count: 1, event: egress("api.example.com", "allow", { rule: "api", method: "GET", path: "/v1/x", address: "203.0.113.7", status: 200, bytesOut: 120, bytesIn: 2048, durationMs: 35 }) },
      { sandboxId: id, generation: 1, time: at(2), decision: "deny", count: 4, event: egress("pypi.org", "deny", { reason: "no_matching_rule" }) },
      { sandboxId: id, generation: 1, time: at(3), decision: "would_deny", count: 1, event: egress("api.example.com", "would_deny", { reason: "path_not_allowed", rule: "api", method: "DELETE", path: "/v1/x", status: 204 }) },
    ]);
  });
  afterAll(async () => {
    await t.close();
  });

  it("prints a table oldest first, with what each moved; --decision narrows it to one decision", async () => {
    const r = await run("audit", "aud");
    expect(r.code, r.stderr).toBe(0);
    const lines = r.stdout.trim().split("\n");
    expect(lines[0]).toMatch(/^SEQ\s+TIME\s+GEN\s+DECISION\s+COUNT\s+TARGET\s+OUT\/IN\s+WHY$/);
    expect(lines.slice(1).map((l) => l.split(/\s{2,}/)[3])).toEqual(["allow", "deny", "would_deny"]);
    expect(lines[1]).toContain("GET api.example.com:443/v1/x");
    expect(lines[1]).toContain("120B/2.0K");
    const w = await run("audit", "aud", "--decision", "would_deny");
    expect(w.stdout.trim().split("\n").slice(1)).toEqual([expect.stringMatching(/would_deny .*DELETE api\.example\.com:443\/v1\/x .*path_not_allowed$/)]);
  });

  it("--since keeps the records at or after a time; a time that is not RFC 3339 is exit 2 naming it", async () => {
    const r = await run("audit", "aud", "--since", "2026-12-01T02:00:00Z", "--json");
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout.trim().split("\n").map((l) => JSON.parse(l).unmapped.decision)).toEqual(["deny", "would_deny"]);
    const bad = await run("audit", "aud", "--since", "yesterday");
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/^sandgate: .*--since.*RFC 3339 time .* or a duration back from now .*"yesterday"/);
    // A duration back from now, as logs takes it (the records are of 2026-12-01).
    const all = await run("audit", "aud", "--since", "36500d", "--json");
    expect([all.code, all.stdout.trim().split("\n").length]).toEqual([0, 3]);
    const none = await run("audit", "aud", "--since", "1s", "--json");
    expect([none.code, none.stdout]).toEqual([0, ""]);
    const api = await t.api("GET", "/v1/sandboxes/aud/audit?since=yesterday");
    expect(api.status).toBe(400);
    const dec = await run("audit", "aud", "--decision", "blocked");
    expect(dec.code).toBe(2);
    expect(dec.stderr).toMatch(/allow, deny, would_deny, dropped/);
  });

  it("--json prints one OCSF event per line: HTTP Activity for a request, Network Activity for a refused tunnel", async () => {
    const r = await run("audit", "aud", "--json");
    expect(r.code, r.stderr).toBe(0);
    const [get, refused, would] = r.stdout.trim().split("\n").map((l) => JSON.parse(l));
    expect(get).toMatchObject({
      class_uid: 4002,
      activity_id: 3,
      type_uid: 400203,
      action: "Allowed",
      action_id: 1,
      time: Date.parse(at(1)),
      duration: 35,
      dst_endpoint: { hostname: "api.example.com", ip: "203.0.113.7", port: 443 },
      traffic: { bytes_out: 120, bytes_in: 2048, bytes: 2168 },
      http_request: { http_method: "GET", url: { hostname: "api.example.com", path: "/v1/x", port: 443 } },
      http_response: { code: 200 },
      firewall_rule: { name: "api" },
      unmapped: { sandbox_id: id, sandbox_name: "aud", generation: 1, policy_revision: 1 },
    });
    expect(refused).toMatchObject({ class_uid: 4001, activity_id: 5, action: "Denied", action_id: 2, count: 4, status_detail: "no_matching_rule" });
    expect(would).toMatchObject({ class_uid: 4002, action: "Allowed", disposition_id: 17, status_detail: "path_not_allowed", unmapped: { decision: "would_deny" } });
  });

  it("--follow prints what arrives after it started, and stops on Ctrl-C with exit 0", async () => {
    const child = spawn(CLI_ARGS[0]!, [...CLI_ARGS.slice(1), "--home", t.home.dir, "audit", "aud", "--follow", "--tail", "1", "--json"], { stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, SANDGATE_URL: undefined, SANDGATE_TOKEN: undefined } });
    let out = "";
    child.stdout.on("data", (d: Buffer) => (out += d.toString()));
    const exited = new Promise<number | null>((r) => child.once("exit", (code) => r(code)));
    await eventually(async () => (out.split("\n").filter(Boolean).length === 1 ? true : undefined));
    await t.gw.store.appendAudit([{ sandboxId: id, generation: 1, time: at(4), decision: "deny", count: 1, event: egress("late.example.com", "deny", { reason: "explicit_deny", rule: "no" }) }]);
    await eventually(async () => (out.includes("late.example.com") ? true : undefined));
    child.kill("SIGINT");
    expect(await exited).toBe(0);
    const lines = out.trim().split("\n").map((l) => JSON.parse(l));
    expect(lines.map((l) => l.unmapped.decision)).toEqual(["would_deny", "deny"]);
  });
});
