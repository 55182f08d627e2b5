// The Docker driver's log reader (src/driver/docker/logs.ts) and what it keeps of ended
// generations (log-archive.ts), on a FAKE Engine API whose log streams the test cuts,
// garbles and holds: a broken follow resumes from its cursor without a line twice or
// lost; a daemon away past the window is an error; a removed container is read from
// its kept copy; a slow consumer pauses the daemon's stream; only the recorded
// container of this sandbox is read; kept copies are bounded, private and pruned.
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pino } from "pino";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { LogLine, LogRequest, RuntimeRecord } from "../../../src/driver/contract.js";
import { EngineClient } from "../../../src/driver/docker/engine/client.js";
import { LogArchive } from "../../../src/driver/docker/log-archive.js";
import { encodeLogFrame } from "../../../src/driver/docker/log-frames.js";
import { ContainerLogs } from "../../../src/driver/docker/logs.js";
import { LABEL } from "../../../src/driver/docker/objects.js";
import { ResumeFilter } from "../../../src/util/log-cursor.js";
import { dockerSince } from "../../../src/util/log-time.js";
import { FakeEngine, reply, type HandlerContext } from "../../support/fake-engine.js";
import { eventually } from "../../support/gateway-fixture.js";

const GW = "gw1";
const SBX = "sbx_0123456789abcdef";
const ID = "w".repeat(64);
const T = (n: number): string => `2026-12-03T13:16:${String(n).padStart(2, "0")}.000000000Z`;

const record: RuntimeRecord = {
  generation: 2,
  nonce: "nonce-2",
  workload: { id: ID, name: "w", imageId: "sha256:x", startedAt: "2026-12-03T13:00:00Z", pid: 10 },
  supervisor: { id: "s".repeat(64), name: "s", imageId: "sha256:x", startedAt: "2026-12-03T13:00:00Z", pid: 11 },
  proxyUrl: "http://10.0.0.2:3128",
};

function inspectBody(running: boolean, labels: Record<string, string> = {}): unknown {
  return {
    Id: ID,
    Name: "/w",
    Created: "",
    Image: "sha256:x",
    Config: { Image: "x", Labels: { [LABEL.gateway]: GW, [LABEL.sandbox]: SBX, [LABEL.generation]: "2", [LABEL.role]: "workload", [LABEL.nonce]: "nonce-2", ...labels } },
    State: { Status: running ? "running" : "exited", Running: running, Pid: running ? 10 : 0, ExitCode: 0, StartedAt: record.workload.startedAt, FinishedAt: "", Error: "", OOMKilled: false },
    NetworkSettings: { Networks: null },
  };
}

const frame = (n: number, text: string, s: "out" | "err" = "out"): Buffer => encodeLogFrame(s, T(n).replace(/\.0+Z$/, "Z"), `${text}\n`);

let engine: FakeEngine;
let client: EngineClient;
let home: string;
let archive: LogArchive;
let logs: ContainerLogs;
let archiveBytes = 1 << 20;

beforeEach(async () => {
  engine = await FakeEngine.start();
  client = new EngineClient({ socketPath: engine.socketPath, timeoutMs: 2000 });
  home = mkdtempSync(join(tmpdir(), "sg-logs-"));
  archiveBytes = 1 << 20;
  archive = new LogArchive(join(home, "logs"), () => archiveBytes);
  logs = new ContainerLogs({ engine: client, archive, gatewayId: GW, log: pino({ level: "silent" }), reconnectWindowMs: 60_000, backoff: { initialMs: 5, factor: 1, maxMs: 5, jitter: 0 } });
});
afterEach(async () => {
  await client.close();
  await engine.close();
  rmSync(home, { recursive: true, force: true });
});

function request(over: Partial<LogRequest> = {}, ac = new AbortController()): LogRequest {
  return { sandboxId: SBX, generation: 2, role: "workload", record, follow: false, signal: ac.signal, ...over };
}

async function collect(req: LogRequest): Promise<{ lines: LogLine[]; end: unknown }> {
  const lines: LogLine[] = [];
  const end = await logs.read(req, (l) => void lines.push(l));
  return { lines, end };
}

describe("reading the live container", () => {
  it("asks Docker for both streams with timestamps, keeps stdout and stderr apart, and ends", async () => {
    engine.on("GET", `/containers/${ID}/json`, reply.json(200, inspectBody(true)));
    engine.on("GET", `/containers/${ID}/logs`, reply.chunks([Buffer.concat([frame(1, "out one"), frame(2, "err one", "err")]), frame(3, "out two")], "end"));
    const { lines, end } = await collect(request({ tail: 5, since: T(1) }));
    expect(lines).toEqual([
      { t: T(1), s: "out", l: "out one" },
      { t: T(2), s: "err", l: "err one" },
      { t: T(3), s: "out", l: "out two" },
    ]);
    expect(end).toEqual({ kind: "end", reason: "end of the log" });
    const q = engine.requestsTo(`/containers/${ID}/logs`)[0]!.query;
    expect(Object.fromEntries(q)).toEqual({ stdout: "true", stderr: "true", timestamps: "true", follow: "false", tail: "5", since: dockerSince(T(1)) });
  });

  it("a follow cut mid-frame resumes from its cursor: every line once, in order, lines sharing a time included", async () => {
    engine.on("GET", `/containers/${ID}/json`, (res, ctx) => reply.json(200, inspectBody(engine.requestsTo(`/containers/${ID}/logs`).length < 2))(res, ctx));
    const first = Buffer.concat([frame(1, "a"), frame(2, "b"), frame(2, "c"), frame(3, "d")]);
    let n = 0;
    engine.on("GET", `/containers/${ID}/logs`, (res, ctx: HandlerContext) => {
      n++;
      res.writeHead(200, { "content-type": "application/vnd.docker.multiplexed-stream" });
      if (n === 1) {
        // a, b, c whole; d cut inside its frame; then the socket goes (a daemon restart).
        res.write(first.subarray(0, first.length - 3));
        setTimeout(() => ctx.cut(), 20);
      } else {
        // Docker answers since=T(2) with every line at or after it; the container then stops.
        res.end(Buffer.concat([frame(2, "b"), frame(2, "c"), frame(3, "d"), frame(4, "e")]));
      }
    });
    const { lines, end } = await collect(request({ follow: true, tail: 100 }));
    expect(lines.map((l) => l.l)).toEqual(["a", "b", "c", "d", "e"]);
    expect(end).toMatchObject({ kind: "end" });
    const reqs = engine.requestsTo(`/containers/${ID}/logs`);
    expect(reqs[0]!.query.get("tail")).toBe("100");
    // The resume asks from the last time delivered, not for a new tail.
    expect(reqs[1]!.query.get("since")).toBe(dockerSince(T(2)));
    expect(reqs[1]!.query.get("tail")).toBe("all");
    expect(logs.resumed).toBeGreaterThanOrEqual(1);
  });

  it("while the daemon is away (refused, 500s) it retries, then resumes where it was", async () => {
    let down = 3;
    engine.on("GET", `/containers/${ID}/json`, (res, ctx) => {
      if (engine.requestsTo(`/containers/${ID}/logs`).length === 1 && down-- > 0) return down % 2 === 0 ? ctx.cut() : reply.error(500, "restoring")(res, ctx);
      reply.json(200, inspectBody(engine.requestsTo(`/containers/${ID}/logs`).length < 2))(res, ctx);
    });
    let n = 0;
    engine.on("GET", `/containers/${ID}/logs`, (res, ctx) => {
      if (++n === 1) reply.chunks([frame(1, "one")], "destroy")(res, ctx);
      else reply.chunks([Buffer.concat([frame(1, "one"), frame(2, "two")])], "end")(res, ctx);
    });
    const { lines } = await collect(request({ follow: true }));
    expect(lines.map((l) => l.l)).toEqual(["one", "two"]);
    expect(down).toBeLessThan(0);
  });

  it("a daemon away past the reconnect window ends the read with an error saying so", async () => {
    logs = new ContainerLogs({ engine: client, archive, gatewayId: GW, log: pino({ level: "silent" }), reconnectWindowMs: 200, backoff: { initialMs: 20, factor: 1, maxMs: 20, jitter: 0 } });
    engine.on("GET", `/containers/${ID}/json`, reply.error(500, "daemon restoring"));
    const { end } = await collect(request({ follow: true }));
    expect(end).toEqual({ kind: "error", code: "unavailable", message: expect.stringMatching(/^the workload's log cannot be read: Docker gave no usable answer for 0 s \(docker error HTTP 500: daemon restoring\)$/) });
  });

  it("garbled bytes in the stream count as a break: it resumes and delivers nothing twice", async () => {
    let n = 0;
    engine.on("GET", `/containers/${ID}/json`, (res, ctx) => reply.json(200, inspectBody(n < 2))(res, ctx));
    engine.on("GET", `/containers/${ID}/logs`, (res, ctx) => {
      if (++n === 1) reply.chunks([frame(1, "one"), Buffer.from("garbage that is no frame")], "stall")(res, ctx);
      else reply.chunks([Buffer.concat([frame(1, "one"), frame(2, "two")])], "end")(res, ctx);
    });
    const { lines } = await collect(request({ follow: true }));
    expect(lines.map((l) => l.l)).toEqual(["one", "two"]);
  });

  it("tail 0, then the stream breaks before any line: the resume starts where the first read did, not at a new tail", async () => {
    let n = 0;
    engine.on("GET", `/containers/${ID}/json`, (res, ctx) => reply.json(200, inspectBody(n < 2))(res, ctx));
    engine.on("GET", `/containers/${ID}/logs`, (res, ctx) => {
      if (++n === 1) reply.headersThenDestroy(20)(res, ctx);
      else reply.chunks([encodeLogFrame("out", "2099-01-01T00:00:00Z", "after\n")], "end")(res, ctx);
    });
    const { lines } = await collect(request({ follow: true, tail: 0 }));
    const second = engine.requestsTo(`/containers/${ID}/logs`)[1]!.query;
    expect(second.get("tail")).toBe("all");
    expect(Number(second.get("since"))).toBeGreaterThan(Date.parse("2026-01-01T00:00:00Z") / 1000 - 1);
    expect(lines.map((l) => l.l)).toEqual(["after"]);
    // And lines from before the first read began are not what a resume of tail 0 asks for.
    expect(Number(second.get("since"))).toBeLessThanOrEqual(Date.now() / 1000);
  });

  it("reads only the recorded container of this sandbox, generation, role and launch", async () => {
    for (const [label, value] of [[LABEL.sandbox, "sbx_other"], [LABEL.generation, "1"], [LABEL.role, "supervisor"], [LABEL.nonce, "look-alike"], [LABEL.gateway, "gw2"]] as const) {
      engine.on("GET", `/containers/${ID}/json`, reply.json(200, inspectBody(true, { [label]: value })));
      const { lines, end } = await collect(request());
      expect(lines, label).toEqual([]);
      expect(end, label).toEqual({ kind: "error", code: "not_found", message: expect.stringContaining(`is not this sandbox's workload (${label})`) });
    }
    expect(engine.requestsTo(`/containers/${ID}/logs`)).toHaveLength(0);
  });

  it("a slow consumer pauses the daemon's stream: nothing more is read until it takes the line", async () => {
    engine.on("GET", `/containers/${ID}/json`, reply.json(200, inspectBody(true)));
    const TOTAL = 20_000;
    let blocked = false;
    let written = 0;
    engine.on("GET", `/containers/${ID}/logs`, (res) => {
      res.writeHead(200, { "content-type": "application/vnd.docker.multiplexed-stream" });
      const pump = (): void => {
        blocked = false;
        while (!res.destroyed && written < TOTAL) {
          written++;
          if (!res.write(frame(1, `line ${written} ${"x".repeat(1000)}`))) {
            blocked = true;
            res.once("drain", pump);
            return;
          }
        }
        res.end();
      };
      pump();
    });
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    let delivered = 0;
    const reading = logs.read(request(), async () => {
      delivered++;
      if (delivered === 1) await held;
    });
    await eventually(() => (delivered === 1 && blocked ? true : undefined), 10_000, "the consumer to hold its first line and the daemon's writes to back up");
    // While the consumer holds, the stream is not drained into the gateway's memory:
    // the daemon stays blocked with most of the 20 MB unsent.
    await new Promise((r) => setTimeout(r, 200));
    expect(delivered).toBe(1);
    expect(blocked).toBe(true);
    expect(written).toBeLessThan(TOTAL / 4);
    release();
    expect(await reading).toEqual({ kind: "end", reason: "end of the log" });
    expect(delivered).toBe(TOTAL);
  });
});

describe("what is kept of an ended generation", () => {
  async function keepFrom(frames: Buffer[], generation = 2): Promise<void> {
    engine.on("GET", `/containers/${ID}/logs`, reply.chunks([Buffer.concat(frames)], "end"));
    await logs.keep({ Id: ID }, SBX, generation, "workload");
  }

  it("a removed container is read from its kept copy, from where the read stands", async () => {
    await keepFrom([frame(1, "one"), frame(2, "two", "err"), frame(3, "three")]);
    engine.on("GET", `/containers/${ID}/json`, reply.error(404, "No such container"));
    const { lines, end } = await collect(request({ since: T(2) }));
    expect(lines).toEqual([
      { t: T(2), s: "err", l: "two" },
      { t: T(3), s: "out", l: "three" },
    ]);
    expect(end).toEqual({ kind: "end", reason: "the generation has ended (its kept log)" });
    // Without a record (the generation has ended), the kept copy directly, with a tail.
    expect((await collect(request({ record: null, tail: 1 }))).lines).toEqual([{ t: T(3), s: "out", l: "three" }]);
  });

  it("nothing kept and no container: not found, saying so", async () => {
    engine.on("GET", `/containers/${ID}/json`, reply.error(404, "No such container"));
    expect((await collect(request())).end).toEqual({ kind: "error", code: "not_found", message: "no logs of generation 2's workload: its container is gone and nothing was kept of it" });
  });

  it("is private to the gateway: directory 0700, files 0600", async () => {
    await keepFrom([frame(1, "secret-ish output")]);
    expect(statSync(join(home, "logs")).mode & 0o777).toBe(0o700);
    expect(statSync(archive.dir(SBX)).mode & 0o777).toBe(0o700);
    for (const f of readdirSync(archive.dir(SBX))) expect(statSync(join(archive.dir(SBX), f)).mode & 0o777, f).toBe(0o600);
  });

  it("is bounded: an over-long log keeps its newest lines, within the bound", async () => {
    archiveBytes = 64 * 1024;
    const many = Array.from({ length: 5000 }, (_, i) => encodeLogFrame("out", `2026-12-03T13:16:36.${String(i).padStart(9, "0")}Z`, `line ${String(i).padStart(5, "0")} ${"y".repeat(40)}\n`));
    await keepFrom(many);
    const files = readdirSync(archive.dir(SBX)).map((f) => join(archive.dir(SBX), f));
    const total = files.reduce((n, f) => n + statSync(f).size, 0);
    expect(total).toBeLessThanOrEqual(64 * 1024 + 200);
    expect(total).toBeGreaterThan(32 * 1024);
    const kept: string[] = [];
    await archive.read(SBX, 2, "workload", new ResumeFilter(), undefined, (l) => void kept.push(l.l), new AbortController().signal);
    expect(kept.at(-1)).toMatch(/^line 04999 /);
    expect(kept[0]).not.toMatch(/^line 00000 /);
    // In order, and a contiguous run of the newest.
    const nums = kept.map((l) => Number(l.slice(5, 10)));
    expect(nums).toEqual(nums.map((_, i) => nums[0]! + i));
  });

  it("while a copy is written it holds at most two parts on disk; a copy replaces the kept one only when complete", async () => {
    archiveBytes = 4096;
    await keepFrom([frame(1, "older copy")]);
    const w = archive.writer(SBX, 2, "workload");
    const tmp = readdirSync(archive.dir(SBX)).find((f) => f.startsWith(".tmp-"))!;
    let most = 0;
    for (let i = 0; i < 500; i++) {
      await w.write({ t: T(2), s: "out", l: `line ${i} ${"q".repeat(60)}` });
      most = Math.max(most, readdirSync(join(archive.dir(SBX), tmp)).length);
    }
    expect(most).toBeLessThanOrEqual(2);
    // Until commit, the kept copy is the older one.
    const before: string[] = [];
    await archive.read(SBX, 2, "workload", new ResumeFilter(), undefined, (l) => void before.push(l.l), new AbortController().signal);
    expect(before).toEqual(["older copy"]);
    await w.commit();
    const after: string[] = [];
    await archive.read(SBX, 2, "workload", new ResumeFilter(), undefined, (l) => void after.push(l.l), new AbortController().signal);
    expect(after.at(-1)).toMatch(/^line 499 /);
    expect(readdirSync(archive.dir(SBX)).filter((f) => f.startsWith(".tmp-"))).toEqual([]);
  });

  it("the two newest generations are kept; a copy with a torn last line reads up to it", async () => {
    await keepFrom([frame(1, "g1")], 1);
    await keepFrom([frame(2, "g2")], 2);
    expect(archive.generations(SBX)).toEqual([1, 2]);
    await keepFrom([frame(3, "g3")], 3);
    expect(archive.generations(SBX)).toEqual([2, 3]);
    const file = join(archive.dir(SBX), "g3-workload.ndjson");
    writeFileSync(file, readFileSync(file, "utf8") + '{"t":"2026-12-03T13:16:04.000000000Z","s":"out","l":"tor');
    const kept: string[] = [];
    await archive.read(SBX, 3, "workload", new ResumeFilter(), undefined, (l) => void kept.push(l.l), new AbortController().signal);
    expect(kept).toEqual(["g3"]);
    archive.remove(SBX);
    expect(archive.generations(SBX)).toEqual([]);
  });

  it("a daemon that does not answer fails the copy (the stop retries); one without a log for it is skipped", async () => {
    engine.on("GET", `/containers/${ID}/logs`, (_res, ctx) => ctx.cut());
    await expect(logs.keep({ Id: ID }, SBX, 2, "workload")).rejects.toThrow(/keeping the workload's log of wwwwwwwwwwww: transport failure/);
    engine.on("GET", `/containers/${ID}/logs`, reply.error(501, 'configured logging driver does not support reading'));
    await logs.keep({ Id: ID }, SBX, 2, "workload");
    expect(archive.generations(SBX)).toEqual([]);
    // No half-written copy is left behind.
    expect(readdirSync(archive.dir(SBX))).toEqual([]);
  });
});
