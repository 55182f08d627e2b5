// Slow readers cannot grow the gateway: watch clients that stop reading are
// disconnected with a final message, while a client that reads gets every event;
// a client that resumes from its last sequence misses nothing. Real gateway (HTTP on
// loopback, real SQLite file) on the in-memory driver; real CLI for the resume.
import { spawn } from "node:child_process";
import { connect, type Socket } from "node:net";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { MemoryDriver } from "../support/memory-driver.js";
import { eventually, startTestGateway, type TestGateway } from "../support/gateway-fixture.js";

let t: TestGateway | undefined;
afterEach(async () => {
  await t?.close();
  t = undefined;
});

const POLICY = (i: number): string => `version: 1\nnetwork:\n  rules:\n    - name: r${i}\n      endpoints:\n        - host: h${i}.example.com\n          port: 443\n          protocol: https\n`;

async function stoppedSandbox(name: string): Promise<string> {
  const created = await t!.api("POST", "/v1/sandboxes", { name });
  await eventually(async () => ((await t!.api("GET", `/v1/sandboxes/${name}`)).body.phase === "Ready" ? true : undefined), 10_000, "Ready");
  await t!.api("POST", `/v1/sandboxes/${name}/stop`);
  await eventually(async () => ((await t!.api("GET", `/v1/sandboxes/${name}`)).body.phase === "Stopped" ? true : undefined), 10_000, "Stopped");
  return created.body.id as string;
}

/** `n` policy revisions (one event each), a few per turn of the event loop, as API traffic would come. */
async function changes(name: string, n: number): Promise<void> {
  for (let i = 0; i < n; i++) {
    t!.gw.service.setPolicy(name, POLICY(i));
    if (i % 10 === 9) await new Promise((r) => setImmediate(r));
  }
}

/** A client that asks for the watch stream and then never reads a byte. */
function silentWatcher(): Promise<Socket> {
  const port = Number(new URL(t!.url).port);
  return new Promise((resolve, reject) => {
    const s = connect({ host: "127.0.0.1", port }, () => {
      s.write(`GET /v1/watch HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${t!.token}\r\n\r\n`);
      s.pause();
      resolve(s);
    });
    s.on("error", reject);
  });
}

describe("watch streams are bounded", () => {
  it("50 clients that never read while 10,000 changes happen: each is cut off, the gateway's memory stays flat, a reading client gets every event", async () => {
    t = await startTestGateway(new MemoryDriver(), { watch: { maxBufferedBytes: 64 * 1024 } });
    const id = await stoppedSandbox("churn");
    const silent = await Promise.all(Array.from({ length: 50 }, () => silentWatcher()));
    for (const s of silent) s.on("error", () => undefined);
    await eventually(async () => ((await t!.api("GET", "/v1/status")).body.watch.streams === 50 ? true : undefined), 10_000, "50 streams open");

    // A client that reads everything, in order.
    const seen: number[] = [];
    const ac = new AbortController();
    const reader = (async () => {
      const res = await fetch(`${t.url}/v1/watch?sandbox=churn`, { headers: { authorization: `Bearer ${t.token}` }, signal: ac.signal });
      let buf = "";
      for await (const chunk of res.body!) {
        buf += Buffer.from(chunk as Uint8Array).toString();
        for (let i; (i = buf.indexOf("\n\n")) >= 0; ) {
          const frame = buf.slice(0, i);
          buf = buf.slice(i + 2);
          const idLine = frame.split("\n").find((l) => l.startsWith("id: "));
          if (idLine) seen.push(Number(idLine.slice(4)));
        }
      }
    })().catch(() => undefined);
    await eventually(async () => ((await t!.api("GET", "/v1/status")).body.watch.streams === 51 ? true : undefined), 10_000, "reader open");

    const rssBefore = process.memoryUsage().rss;
    await changes("churn", 10_000);
    const last = t.gw.read.events(id, { tail: 1 })[0]!.seq;
    await eventually(() => (seen.at(-1) === last ? true : undefined), 60_000, "the reader saw the last event");
    const growthMb = (process.memoryUsage().rss - rssBefore) / 2 ** 20;

    const status = (await t.api("GET", "/v1/status")).body;
    expect(status.watch.overflows).toBe(50);
    expect(status.watch.streams).toBe(1);
    expect(growthMb).toBeLessThan(50);
    // Every event of the sandbox, once each, in order.
    const expected = t.gw.read.events(id, { afterSeq: seen[0]! - 1, limit: 10_000 }).map((e) => e.seq);
    expect(seen).toEqual(expected);
    ac.abort();
    await reader;
    for (const s of silent) s.destroy();
  }, 120_000);

  it("a CLI watch that falls behind is told so, reconnects after its last event and prints each event exactly once", async () => {
    t = await startTestGateway(new MemoryDriver(), { watch: { maxBufferedBytes: 16 * 1024 } });
    const id = await stoppedSandbox("resume");
    const cli = spawn(process.execPath, ["--import", "tsx", join(import.meta.dirname, "../../src/cli/main.ts"), "--home", t.home.dir, "sandbox", "watch", "resume", "--json"], {
      stdio: ["ignore", "pipe", "pipe"],
    });
    let out = "";
    let err = "";
    cli.stderr.on("data", (d: Buffer) => (err += d.toString()));
    await eventually(async () => ((await t!.api("GET", "/v1/status")).body.watch.streams === 1 ? true : undefined), 30_000, "CLI watching");
    // Not reading the CLI's output: it blocks, its socket fills, the gateway cuts it off.
    cli.stdout.pause();
    // Changes until the gateway gives up on it (kernel socket buffers absorb a few MB first).
    for (let round = 0; (await t.api("GET", "/v1/status")).body.watch.overflows === 0; round++) {
      expect(round, "the CLI was never cut off").toBeLessThan(50);
      await changes("resume", 1_000);
    }
    cli.stdout.on("data", (d: Buffer) => (out += d.toString()));
    cli.stdout.resume();
    t.gw.service.setPolicy("resume", POLICY(99_999));
    const last = t.gw.read.events(id, { tail: 1 })[0]!.seq;
    await eventually(() => (out.includes(`"seq":${last},`) ? true : undefined), 60_000, "the CLI printed the last event");
    cli.kill("SIGINT");
    const seqs = out.trim().split("\n").map((l) => (JSON.parse(l) as { event: { seq: number } }).event.seq);
    expect(err).toMatch(/fell behind the gateway; resuming after event \d+/);
    expect(new Set(seqs).size).toBe(seqs.length);
    expect(seqs).toEqual(t.gw.read.events(id, { afterSeq: seqs[0]! - 1, limit: 10_000 }).map((e) => e.seq));
  }, 120_000);
});
