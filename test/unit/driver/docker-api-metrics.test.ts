// Docker Engine API metrics: every call of an observed EngineClient (against a FAKE engine,
// test/support/fake-engine.ts) lands in the gateway's histogram and error counter under a
// route template, never an id, a container name or an image reference; the template set
// is bounded, and so is the label set a driver could hand the metrics. Plus the pure
// computation of a workload's stats from Docker's stats answer.
import fc from "fast-check";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { RuntimeCall } from "../../../src/driver/contract.js";
import { EngineClient } from "../../../src/driver/docker/engine/client.js";
import { engineRoute } from "../../../src/driver/docker/engine/route.js";
import type { ContainerStats } from "../../../src/driver/docker/engine/types.js";
import { workloadStatsOf } from "../../../src/driver/docker/stats.js";
import { MAX_ENDPOINTS, PrometheusMetrics } from "../../../src/gateway/metrics/prometheus.js";
import { PHASES } from "../../../src/lifecycle/phases.js";
import { FakeEngine, reply } from "../../support/fake-engine.js";
import { parseScrape } from "../../support/prometheus.js";

const noSources = {
  sandboxesByPhase: async () => Object.fromEntries(PHASES.map((p) => [p, 0])) as Record<(typeof PHASES)[number], number>,
  monitor: () => null,
  proxy: () => ({ decisions: { allow: 0, deny: 0, would_deny: 0 }, bytes: { out: 0, in: 0 }, droppedRecords: 0 }),
};

describe("engineRoute: a bounded route template", () => {
  it("names the endpoints Sandgate calls by template", () => {
    const cases: [string, string, string][] = [
      ["GET", "/_ping", "GET /_ping"],
      ["GET", "/events", "GET /events"],
      ["POST", "/containers/create", "POST /containers/create"],
      ["GET", "/containers/json", "GET /containers/json"],
      ["GET", "/containers/0123abcd/json", "GET /containers/{id}/json"],
      ["POST", "/containers/sg-sbx_1-g1-workload/start", "POST /containers/{id}/start"],
      ["GET", "/containers/0123abcd/stats", "GET /containers/{id}/stats"],
      ["DELETE", "/containers/0123abcd", "DELETE /containers/{id}"],
      ["POST", "/containers/0123abcd/exec", "POST /containers/{id}/exec"],
      ["POST", "/exec/e1/start", "POST /exec/{id}/start"],
      ["POST", "/networks/create", "POST /networks/create"],
      ["POST", "/networks/sg-net/connect", "POST /networks/{id}/connect"],
      ["GET", "/networks", "GET /networks"],
      ["DELETE", "/volumes/sg-vol", "DELETE /volumes/{name}"],
      ["POST", "/images/create", "POST /images/create"],
      ["GET", "/images/sandgate-workload:abc/json", "GET /images/{name}/json"],
      ["GET", "/images/registry.example.com:5000/team/app:1/json", "GET /images/{name}/json"],
      ["DELETE", "/images/registry.example.com/team/app", "DELETE /images/{name}"],
      // A container named like a collection action is still an id when an action follows.
      ["GET", "/containers/json/json", "GET /containers/{id}/json"],
      // Anything else is "other": never a path segment of its own.
      ["GET", "/containers/abc/secret-name/json", "GET other"],
      ["GET", "/plugins/abc", "GET other"],
      ["GET", "/containers//json", "GET other"],
      ["BREW", "/_ping", "OTHER /_ping"],
    ];
    for (const [method, path, want] of cases) expect(engineRoute(method, path), `${method} ${path}`).toBe(want);
  });

  it("never carries an id, a name or an image reference, whatever it is", () => {
    const templates = new Set<string>();
    fc.assert(
      fc.property(fc.string({ minLength: 1, maxLength: 80 }), fc.constantFrom("json", "start", "stats", "logs", "", "nope"), fc.constantFrom("containers", "exec", "networks", "volumes", "images"), (raw, action, root) => {
        const id = encodeURIComponent(raw);
        const ref = root === "images" ? raw.split("/").map(encodeURIComponent).join("/") : id;
        const r = engineRoute("GET", `/${root}/${ref}${action === "" ? "" : `/${action}`}`);
        templates.add(r);
        // Only fixed vocabulary: the template alphabet, never the caller's value.
        expect(r).toMatch(/^GET (other|\/[a-z_]+(\/(create|json|prune|load|search|get))?(\/\{(id|name)\}(\/[a-z]+)?)?)$/);
        if (id.length > 8) expect(r).not.toContain(id);
      }),
      { numRuns: 500 },
    );
    // A handful of templates from 500 different ids.
    expect(templates.size).toBeLessThan(40);
  });
});

describe("Docker API calls in /metrics", () => {
  let fake: FakeEngine;
  let client: EngineClient;
  let metrics: PrometheusMetrics;
  let seen: RuntimeCall[];

  beforeEach(async () => {
    fake = await FakeEngine.start();
    client = new EngineClient({ socketPath: fake.socketPath, timeoutMs: 60_000 });
    metrics = new PrometheusMetrics(noSources);
    seen = [];
    client.observe((c) => {
      seen.push(c);
      metrics.runtimeCall(c);
    });
  });
  afterEach(async () => {
    await client.close();
    await fake.close();
  });

  it("counts each call under its template with its latency, and failures by kind", async () => {
    const name = "sg-sbx_secretname-g1-workload";
    fake.on("GET", `/containers/${name}/json`, reply.json(200, { Id: "x" }));
    fake.on("GET", "/containers/c0ffee/json", reply.error(404, "No such container: c0ffee"));
    fake.on("POST", "/containers/c0ffee/start", reply.error(500, "boom"));
    expect((await client.inspectContainer(name)).kind).toBe("ok");
    expect((await client.inspectContainer("c0ffee")).kind).toBe("docker");
    expect((await client.startContainer("c0ffee")).kind).toBe("docker");
    expect((await client.ping()).kind).toBe("ok");

    const text = await metrics.scrape();
    expect(text).not.toContain("secretname");
    expect(text).not.toContain("c0ffee");
    const m = parseScrape(text);
    expect(m.family("sandgate_docker_api_call_duration_seconds").type).toBe("HISTOGRAM");
    const count = (endpoint: string): number | undefined => m.value("sandgate_docker_api_call_duration_seconds_count", { endpoint });
    expect(count("GET /containers/{id}/json")).toBe(2);
    expect(count("POST /containers/{id}/start")).toBe(1);
    // The client's first call negotiated the API version: a ping of its own, then the explicit one.
    expect(count("GET /_ping")).toBe(2);
    expect(m.family("sandgate_docker_api_call_errors_total").type).toBe("COUNTER");
    expect(m.samples("sandgate_docker_api_call_errors_total").map((s) => [s.labels.endpoint, s.labels.error, s.value]).sort()).toEqual([
      ["GET /containers/{id}/json", "http_4xx", 1],
      ["POST /containers/{id}/start", "http_5xx", 1],
    ]);
    expect(seen.every((c) => c.seconds !== null && c.seconds >= 0)).toBe(true);
  });

  it("a stream counts once when it opens; one that breaks after is an error without a latency; a cut socket is a transport error", async () => {
    fake.on("GET", "/events", reply.chunks(['{"Type":"container","Action":"start","Actor":{"ID":"a","Attributes":{}},"time":1,"timeNano":1}\n'], "destroy"));
    const end = await client.events({}, () => undefined);
    expect(end.kind).toBe("transport");
    fake.on("GET", "/containers/json", reply.headersThenDestroy());
    expect((await client.listContainers()).kind).toBe("transport");
    const events = seen.filter((c) => c.endpoint === "GET /events");
    expect(events).toEqual([
      { endpoint: "GET /events", seconds: expect.any(Number), error: null },
      { endpoint: "GET /events", seconds: null, error: "transport" },
    ]);
    expect(seen.find((c) => c.endpoint === "GET /containers/json")).toMatchObject({ error: "transport" });
    const m = parseScrape(await metrics.scrape());
    expect(m.value("sandgate_docker_api_call_duration_seconds_count", { endpoint: "GET /events" })).toBe(1);
    expect(m.value("sandgate_docker_api_call_errors_total", { endpoint: "GET /events", error: "transport" })).toBe(1);
  });

  it("a client nobody observes reports nothing, and an observer that throws never fails the call", async () => {
    client.observe(() => {
      throw new Error("metrics broke");
    });
    expect((await client.ping()).kind).toBe("ok");
    client.observe(null);
    expect((await client.ping()).kind).toBe("ok");
    expect(seen).toEqual([]);
  });

  it(`keeps at most ${MAX_ENDPOINTS} endpoint labels: a driver that passed raw paths would be cut off at "other"`, async () => {
    for (let i = 0; i < MAX_ENDPOINTS + 40; i++) metrics.runtimeCall({ endpoint: `GET /containers/raw-${i}/json`, seconds: 0.001, error: "http_4xx" });
    const m = parseScrape(await metrics.scrape());
    const labels = new Set(m.samples("sandgate_docker_api_call_duration_seconds_count").map((s) => s.labels.endpoint));
    expect(labels.size).toBe(MAX_ENDPOINTS + 1);
    expect(labels.has("other")).toBe(true);
    expect(m.value("sandgate_docker_api_call_errors_total", { endpoint: "other" })).toBe(40);
  });
});

describe("workload stats from Docker's stats answer", () => {
  const MIB = 1024 * 1024;
  const base: ContainerStats = {
    cpu_stats: { cpu_usage: { total_usage: 3_000_000_000 }, system_cpu_usage: 120_000_000_000, online_cpus: 4 },
    precpu_stats: { cpu_usage: { total_usage: 2_000_000_000 }, system_cpu_usage: 100_000_000_000, online_cpus: 4 },
    memory_stats: { usage: 80 * MIB, limit: 512 * MIB, stats: { inactive_file: 30 * MIB } },
    pids_stats: { current: 7, limit: 256 },
  };

  it("computes CPU as docker stats does, memory without the page cache, pids and their limits", () => {
    // 1 s of CPU over 20 s of all 4 cores' time: 5 % of the host, 20 % of one core.
    expect(workloadStatsOf(base)).toEqual({ cpuPercent: 20, memory: { usedBytes: 50 * MIB, limitBytes: 512 * MIB }, pids: { current: 7, limit: 256 } });
    // cgroup v1 names the cache total_inactive_file; CPUs counted from percpu_usage when online_cpus is 0.
    const v1: ContainerStats = {
      ...base,
      cpu_stats: { cpu_usage: { total_usage: 3_000_000_000, percpu_usage: [1, 1] }, system_cpu_usage: 120_000_000_000, online_cpus: 0 },
      memory_stats: { usage: 80 * MIB, limit: 512 * MIB, stats: { total_inactive_file: 10 * MIB } },
    };
    expect(workloadStatsOf(v1)).toMatchObject({ cpuPercent: 10, memory: { usedBytes: 70 * MIB } });
  });

  it("says null where it cannot tell: no earlier sample, no limit", () => {
    const first: ContainerStats = { ...base, precpu_stats: {}, memory_stats: { usage: MIB, limit: 2 ** 63 }, pids_stats: { current: 1, limit: 0 } };
    expect(workloadStatsOf(first)).toEqual({ cpuPercent: null, memory: { usedBytes: MIB, limitBytes: null }, pids: { current: 1, limit: null } });
    // A stopped container's answer: all zeros.
    expect(workloadStatsOf({})).toEqual({ cpuPercent: null, memory: { usedBytes: 0, limitBytes: null }, pids: { current: 0, limit: null } });
  });
});
