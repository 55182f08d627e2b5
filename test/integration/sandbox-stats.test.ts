// Stats and metrics on a real private dockerd: `sandbox stats` of a Ready sandbox shows
// what Docker measures of its workload (memory in use, its processes, the limits it was
// created with) and its mounted workspace; GET /metrics after a create shows the Docker
// Engine API calls by route template, a Ready sandbox in the phase gauge and the monitor
// connected, with no sandbox name or id in the text.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { cli } from "../support/cli-runner.js";
import { deleteAllAndCheckMonitors, startDockerFixture, type DockerFixture } from "../support/docker-fixture.js";
import { eventually } from "../support/gateway-fixture.js";
import { parseScrape, type Scrape } from "../support/prometheus.js";
import { cliExec, waitPhase } from "../support/sandbox-helpers.js";

const MIB = 1024 * 1024;
let fx: DockerFixture;

beforeAll(async () => {
  fx = await startDockerFixture({ liveRestore: true, name: "stats" });
});
afterAll(async () => {
  if (fx) await deleteAllAndCheckMonitors(fx);
  await fx?.close();
});

async function scrape(): Promise<Scrape> {
  const r = await fx.t.fetch(`/metrics`, { headers: { authorization: `Bearer ${fx.t.token}` } });
  expect(r.status).toBe(200);
  return parseScrape(await r.text());
}

describe("sandbox stats against Docker", () => {
  it("a Ready sandbox: memory in use and its limit, its processes and their limit, CPU, the mounted workspace", async () => {
    expect((await fx.t.api("POST", "/v1/sandboxes", { name: "st-busy", resources: { memoryMb: 256, pids: 128 }, disk: "64M" })).status).toBe(201);
    await waitPhase(fx, "st-busy", "Ready", { ms: 120_000 });
    // Something to count: a file in the workspace and a second process that keeps running.
    expect((await cliExec(fx, "st-busy", ["sh", "-c", "head -c 1048576 /dev/zero > /sandbox/mib && (sleep 600 >/dev/null 2>&1 &)"])).code).toBe(0);

    const r = await fx.t.api("GET", "/v1/sandboxes/st-busy/stats");
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    const s = r.body;
    expect(s.error).toBeNull();
    expect(s.memory.usedBytes).toBeGreaterThan(0);
    expect(s.memory.limitBytes).toBe(256 * MIB);
    expect(s.pids.current).toBeGreaterThanOrEqual(2);
    expect(s.pids.limit).toBe(128);
    // Docker samples twice for stream=false: a CPU figure, however small.
    expect(typeof s.cpuPercent).toBe("number");
    expect(s.cpuPercent).toBeGreaterThanOrEqual(0);
    expect(s.disk.limitBytes).toBe(64 * MIB);
    expect(s.disk.usedBytes).toBeGreaterThanOrEqual(MIB);
    expect(s.egress).toMatchObject({ allowed: 0, denied: 0 });

    const table = await cli(["sandbox", "stats", "st-busy", "--no-stream"], fx.cliEnv);
    expect(table.code, table.stderr).toBe(0);
    const row = table.stdout.trimEnd().split("\n")[1]!.split(/\s{2,}/);
    expect(row[0]).toBe("st-busy");
    expect(row[2]).toMatch(/^\d+(\.\d)? (B|KiB|MiB) \/ 256 MiB$/);
    expect(row[4]).toMatch(/^\d+ \/ 128$/);

    const all = await cli(["sandbox", "stats", "--no-stream", "--json"], fx.cliEnv);
    expect(all.code, all.stderr).toBe(0);
    expect((JSON.parse(all.stdout) as { name: string; error: string | null }[]).find((x) => x.name === "st-busy")).toMatchObject({ error: null });
  });

  it("a sandbox that is not Ready: exit 5 naming its phase, and no row among all", async () => {
    expect((await fx.t.api("POST", "/v1/sandboxes", { name: "st-off" })).status).toBe(201);
    await waitPhase(fx, "st-off", "Ready", { ms: 120_000 });
    expect((await fx.t.api("POST", "/v1/sandboxes/st-off/stop")).status).toBe(202);
    await waitPhase(fx, "st-off", "Stopped", { ms: 120_000 });
    const r = await cli(["sandbox", "stats", "st-off", "--no-stream"], fx.cliEnv);
    expect(r.code).toBe(5);
    expect(r.stderr).toBe('sandgate: sandbox "st-off" is Stopped: stats are measured only while it is Ready\n');
    const all = await fx.t.api("GET", "/v1/stats");
    expect(all.body.stats.map((x: { name: string }) => x.name)).not.toContain("st-off");
  });
});

describe("GET /metrics against Docker", () => {
  it("after a create: Docker API calls by route template, Ready in the phase gauge, the monitor connected; no name or id", async () => {
    const created = await fx.t.api("POST", "/v1/sandboxes", { name: "st-metrics-7c1d" });
    expect(created.status).toBe(201);
    const s = await waitPhase(fx, "st-metrics-7c1d", "Ready", { ms: 120_000 });
    expect((await fx.t.api("GET", "/v1/sandboxes/st-metrics-7c1d/stats")).status).toBe(200);

    const m = await eventually(async () => {
      const x = await scrape();
      return x.value("sandgate_monitor_watched_sandboxes")! >= 1 ? x : undefined;
    }, 30_000, "the monitor watching the new sandbox");
    expect(m.family("sandgate_docker_api_call_duration_seconds").type).toBe("HISTOGRAM");
    const endpoints = new Set(m.samples("sandgate_docker_api_call_duration_seconds_count").map((x) => x.labels.endpoint));
    for (const e of ["POST /containers/create", "POST /containers/{id}/start", "GET /containers/{id}/json", "GET /containers/{id}/stats", "GET /_ping", "GET /events"]) expect(endpoints, e).toContain(e);
    expect(m.value("sandgate_docker_api_call_duration_seconds_count", { endpoint: "POST /containers/create" })).toBeGreaterThanOrEqual(2);
    expect(m.value("sandgate_sandboxes", { phase: "Ready" })).toBeGreaterThanOrEqual(1);
    expect(m.value("sandgate_lifecycle_transitions_total", { from: "Provisioning", to: "Ready", reason: "none" })).toBeGreaterThanOrEqual(1);
    expect(m.value("sandgate_monitor_docker_connected")).toBe(1);
    for (const secret of ["st-metrics-7c1d", s.id, s.runtime!.workload.id.slice(0, 12), s.runtime!.supervisor.id.slice(0, 12)]) expect(m.text).not.toContain(secret);

    const denied = await fx.t.fetch(`/metrics`);
    expect(denied.status).toBe(401);
  });
});
