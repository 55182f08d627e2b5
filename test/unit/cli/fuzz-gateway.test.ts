// Property-based fuzzing of a live gateway (real HTTP on loopback, real SQLite
// file, the in-memory driver): random and malformed HTTP requests, JSON bodies,
// query strings, WebSocket frames, policy YAML and CLI arguments. Whatever comes
// in: never a 5xx (except the documented 503), never a crash, the gateway keeps
// serving, and a refused input changes nothing in the store.
//
// Seeded and reproducible: FUZZ_SEED=<n> replays a run; FUZZ_RUNS=<n> (or
// `npm run fuzz -- --long`, which sets it) runs more cases than the suite's default.
import { connect } from "node:net";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { main } from "../../../src/cli/program.js";
import { MemoryDriver } from "../../support/memory-driver.js";
import { eventually, startTestGateway, type TestGateway } from "../../support/gateway-fixture.js";
import { socketOf } from "../../support/api-client.js";

const SEED = Number(process.env.FUZZ_SEED ?? 20261203);
const RUNS = Number(process.env.FUZZ_RUNS ?? 0);
const runs = (n: number): number => (RUNS > 0 ? RUNS : n);
const params = (n: number): fc.Parameters<unknown> => ({ seed: SEED, numRuns: runs(n), endOnFailure: true });

let t: TestGateway;

/** The sandbox "fz" Ready again, whatever a fuzz case did to it (it may stop or delete it). */
async function fzReady(): Promise<void> {
  await eventually(async () => {
    const r = await t.api("GET", "/v1/sandboxes/fz");
    if (r.status === 404) await t.api("POST", "/v1/sandboxes", { name: "fz" });
    else if (["Stopped", "Error", "Completed"].includes(r.body.phase)) await t.api("POST", "/v1/sandboxes/fz/start");
    return r.status === 200 && r.body.phase === "Ready" ? true : undefined;
  }, 30_000, "fz Ready");
}

beforeAll(async () => {
  t = await startTestGateway(new MemoryDriver());
});
afterAll(async () => {
  await t?.close();
});

/** Everything the store holds, cheaply compared. */
function snapshot(): string {
  const db = t.gw.sqlite!.db;
  return JSON.stringify([
    db.prepare("SELECT id, name, phase, generation, spec FROM sandboxes ORDER BY id").all(),
    db.prepare("SELECT count(*) AS n, max(seq) AS m FROM events").get(),
    db.prepare("SELECT count(*) AS n FROM policies").get(),
    db.prepare("SELECT count(*) AS n, group_concat(state) AS s FROM policy_proposals").get(),
  ]);
}

async function alive(): Promise<void> {
  const r = await t.api("GET", "/v1/status");
  expect(r.status).toBe(200);
}

// ---- arbitraries ------------------------------------------------------------------

const segment = fc.oneof(
  fc.constantFrom("fz", "nope", "", "..", "%2e%2e", "%00", "FZ", "a".repeat(64), "sbx_0000", "💥", "%ZZ", "a/b", ";x"),
  fc.string({ maxLength: 80 }).map(encodeURIComponent),
  fc.string({ unit: "binary", maxLength: 40 }).map(encodeURIComponent),
);
const route = fc.oneof(
  fc.constantFrom("/v1/status", "/v1/sandboxes", "/v1/watch", "/v1/stats", "/metrics", "/v1/", "/", "/v2/sandboxes", "/v1/sandboxes/"),
  segment.map((n) => `/v1/sandboxes/${n}`),
  fc.tuple(segment, fc.constantFrom("start", "stop", "events", "audit", "policy", "policy/check", "exec", "execs", "execs/x", "logs", "stats", "files", "files/stat", "port-forward", "x", "policy/proposals", "policy/proposals/pp_0123456789abcdef", "policy/proposals/x/approve", "policy/proposals/pp_0123456789abcdef/reject", "policy/proposals/%00/approve")).map(([n, a]) => `/v1/sandboxes/${n}/${a}`),
);
const query = fc.oneof(
  fc.constant(""),
  fc.dictionary(fc.constantFrom("after", "before", "limit", "tail", "decision", "sandbox", "cmd", "tty", "since", "stream", "generation", "path", "mode", "port", "label", "phase", "env", "workdir", "user", "timeout", "x", "__proto__"), fc.oneof(fc.integer().map(String), fc.string({ maxLength: 30 }), fc.constantFrom("-1", "1e309", "NaN", "0x10", "")), { maxKeys: 4 }).map(
    (d) => "?" + new URLSearchParams(d).toString(),
  ),
  fc.string({ maxLength: 60 }).map((s) => `?${s}`),
);
const method = fc.constantFrom("GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS");
const jsonBody = fc.oneof(
  fc.jsonValue({ maxDepth: 4 }),
  fc.record({ name: fc.oneof(fc.constant("fz"), fc.string({ maxLength: 70 })), image: fc.string(), command: fc.array(fc.string()), env: fc.dictionary(fc.string(), fc.string()), policy: fc.oneof(fc.string(), fc.jsonValue()), resources: fc.jsonValue() }, { requiredKeys: [] }),
  fc.record({ policy: fc.oneof(fc.string({ maxLength: 200 }), fc.jsonValue()), wait: fc.oneof(fc.integer(), fc.double(), fc.string()) }, { requiredKeys: [] }),
  fc.record({ url: fc.oneof(fc.webUrl(), fc.string()), method: fc.string({ maxLength: 10 }) }, { requiredKeys: [] }),
  // a policy proposal and a decision
  fc.record({ policy: fc.oneof(fc.string({ maxLength: 200 }), fc.jsonValue()), reason: fc.oneof(fc.string({ maxLength: 40 }), fc.jsonValue()), by: fc.oneof(fc.string({ maxLength: 70 }), fc.integer()), wait: fc.oneof(fc.integer(), fc.string()) }, { requiredKeys: [] }),
  // create's newer fields and a detached exec
  fc.record({ name: fc.constant("fz"), labels: fc.oneof(fc.dictionary(fc.string({ maxLength: 140 }), fc.string({ maxLength: 260 })), fc.jsonValue()), ttl: fc.oneof(fc.string({ maxLength: 20 }), fc.double()), idleStop: fc.oneof(fc.string({ maxLength: 20 }), fc.integer()), workdir: fc.string({ maxLength: 40 }) }, { requiredKeys: [] }),
  fc.record({ cmd: fc.oneof(fc.array(fc.string({ maxLength: 20 }), { maxLength: 4 }), fc.jsonValue()), env: fc.jsonValue(), workdir: fc.string({ maxLength: 40 }), user: fc.string({ maxLength: 20 }), timeout: fc.oneof(fc.string({ maxLength: 10 }), fc.integer()) }, { requiredKeys: [] }),
);
const body = fc.oneof(
  fc.constant(undefined),
  jsonBody.map((v) => ({ type: "application/json", text: JSON.stringify(v) })),
  fc.string({ maxLength: 300 }).map((text) => ({ type: "application/json", text })),
  fc.string({ maxLength: 300 }).map((text) => ({ type: fc.sample(fc.constantFrom("text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", "application/json; charset=latin1", "garbage"), 1)[0]!, text })),
);

describe("fuzz: HTTP API", () => {
  it("random requests: never a 5xx but 503, a refusal changes nothing", async () => {
    await fzReady();
    await fc.assert(
      fc.asyncProperty(method, route, query, body, fc.boolean(), async (m, path, q, b, withToken) => {
        const before = snapshot();
        const headers: Record<string, string> = {};
        if (withToken) headers.authorization = `Bearer ${t.token}`;
        // Deciding a policy proposal needs the approver token too: sometimes given.
        if (withToken && path.endsWith("e")) headers["x-sandgate-approver"] = t.approverToken;
        if (b) headers["content-type"] = b.type;
        const sendsBody = b !== undefined && m !== "GET" && m !== "HEAD";
        const res = await t.fetch(path + q, { method: m, headers, body: sendsBody ? b.text : undefined, signal: AbortSignal.timeout(10_000) }).catch((err: unknown) => err as Error);
        if (res instanceof Error) throw new Error(`${m} ${path}${q}: no answer (${res.message})`);
        const type = res.headers.get("content-type") ?? "";
        const isWatch = res.status < 400 && (type.startsWith("text/event-stream") || type.startsWith("application/x-ndjson"));
        // A watch or a followed log never ends by itself: its headers are the answer.
        const text = isWatch ? (await res.body?.cancel(), "") : await res.text().catch(() => "");
        expect(res.status >= 500 && res.status !== 503, `${m} ${path}${q} → ${res.status} ${text.slice(0, 200)}`).toBe(false);
        if (res.status >= 400 && !isWatch) {
          expect(snapshot(), `${m} ${path}${q} was refused (${res.status}) yet changed the store`).toBe(before);
          if (m !== "HEAD") expect(JSON.parse(text), `${m} ${path}${q}: the error is JSON with a code`).toMatchObject({ error: { code: expect.any(String), message: expect.any(String) } });
        }
      }),
      params(2000),
    );
    await alive();
  }, 600_000);

  it("policy YAML (random, and mutated valid ones): 200 or a 400 naming the problem; a refusal changes nothing", async () => {
    await fzReady();
    const valid = "version: 1\nnetwork:\n  rules:\n    - name: api\n      endpoints:\n        - host: api.example.com\n          port: 443\n          protocol: https\n";
    const mutated = fc.tuple(fc.nat(valid.length), fc.nat(20), fc.string({ maxLength: 12 })).map(([at, cut, ins]) => valid.slice(0, at) + ins + valid.slice(Math.min(valid.length, at + cut)));
    await fc.assert(
      fc.asyncProperty(fc.oneof(mutated, fc.string({ maxLength: 400 }), fc.constantFrom("&a [*a, *a, *a]", "!!js/function x", "a: &x [*x]", "---\n...\n---", "\u0000", "version: 1\n".repeat(1000))), async (yaml) => {
        const before = snapshot();
        const r = await t.api("PUT", "/v1/sandboxes/fz/policy", { policy: yaml });
        expect([200, 400]).toContain(r.status);
        if (r.status === 400) {
          expect(r.body.error.code).toBe("invalid_request");
          expect(r.body.error.message).toMatch(/^invalid policy: /);
          expect(snapshot()).toBe(before);
        }
      }),
      params(1000),
    );
    await alive();
  }, 600_000);
});

describe("fuzz: WebSocket frames on exec", () => {
  it("random bytes after the upgrade end that session only", async () => {
    await fzReady();
    await fc.assert(
      fc.asyncProperty(fc.uint8Array({ minLength: 1, maxLength: 300 }), async (bytes) => {
        const s = connect({ path: socketOf(t.url) });
        s.on("error", () => undefined);
        await new Promise<void>((r) => s.once("connect", () => r()));
        s.write(
          `GET /v1/sandboxes/fz/exec?cmd=cat&tty=0 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${t.token}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n` +
            "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
        );
        await new Promise<void>((r) => s.once("data", () => r()));
        s.write(Buffer.from(bytes));
        s.end();
        await new Promise<void>((r) => {
          if (s.destroyed) r();
          else s.once("close", () => r());
          s.resume();
        });
      }),
      params(300),
    );
    await alive();
  }, 600_000);
});

describe("fuzz: CLI arguments", () => {
  /** The CLI in this process, output captured; its exit code. */
  async function run(argv: string[]): Promise<{ code: number; stderr: string }> {
    let stderr = "";
    const out = process.stdout.write.bind(process.stdout);
    const err = process.stderr.write.bind(process.stderr);
    process.stdout.write = (() => true);
    process.stderr.write = ((chunk: string | Uint8Array) => {
      stderr += chunk.toString();
      return true;
    });
    const previous = process.exitCode;
    try {
      process.exitCode = undefined;
      const code = await main(["node", "sandgate", "--home", t.home.dir, ...argv]);
      return { code, stderr };
    } finally {
      process.exitCode = previous;
      process.stdout.write = out;
      process.stderr.write = err;
    }
  }

  it("random argv: a documented exit code, and no stack trace", async () => {
    const word = fc.oneof(
      fc.constantFrom("sandbox", "policy", "audit", "gateway", "status", "list", "get", "events", "create", "delete", "stop", "start", "check", "cz", "nope", "--json", "--tail", "--after", "--url", "--method", "--policy", "--timeout", "--memory", "--cpus", "-e", "--", "-1", "0", "1e9", "NaN", "http://x/", "--help"),
      fc.string({ maxLength: 20 }),
    );
    await fc.assert(
      fc.asyncProperty(fc.array(word, { maxLength: 6 }), async (argv) => {
        // Commands that run until stopped (and gateway start/stop) are out of scope here.
        if (argv.some((a) => a === "watch" || a === "connect" || a === "exec") || (argv[0] === "gateway" && argv[1] !== "status")) return;
        const before = snapshot();
        const { code, stderr } = await run(argv);
        expect([0, 1, 2, 3, 4, 5, 6, 7, 8], `sandgate ${argv.join(" ")} → ${code}: ${stderr}`).toContain(code);
        expect(stderr, `sandgate ${argv.join(" ")}`).not.toMatch(/unexpected error|\n\s+at .+:\d+:\d+/);
        if (code === 2) expect(snapshot()).toBe(before);
      }),
      params(300),
    );
    await alive();
  }, 600_000);
});
