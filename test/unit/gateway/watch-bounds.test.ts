// Slow readers cannot grow the gateway: watch clients that stop reading are
// disconnected with a final message, while a client that reads gets every event;
// a client that resumes from its last sequence misses nothing. Real gateway (HTTP on
// loopback, real SQLite file) on the in-memory driver; real CLI for the resume.
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { connect, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { MemoryDriver } from "../../support/memory-driver.js";
import { eventually, startTestGateway, type TestGateway } from "../../support/gateway-fixture.js";
import { CLI_MAIN } from "../../support/cli-build.js";
import { apiFetch, socketOf } from "../../support/api-client.js";

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
    await t!.gw.service.setPolicy(name, POLICY(i));
    if (i % 10 === 9) await new Promise((r) => setImmediate(r));
  }
}

describe("watch streams are bounded", () => {
  it("50 clients that never read while 10,000 changes happen: each is cut off, the gateway's RSS stays flat, a reading client gets every event", async () => {
    // The gateway in a process of its own, so that its RSS is all that is measured.
    const home = mkdtempSync(join(tmpdir(), "sg-watch-"));
    const child = spawn(process.execPath, ["--expose-gc", "--import", "tsx", join(import.meta.dirname, "../../support/memory-gateway-main.ts"), home, String(64 * 1024)], { stdio: ["pipe", "pipe", "inherit"] });
    try {
      const url = await new Promise<string>((resolve, reject) => {
        let out = "";
        child.stdout.on("data", (d: Buffer) => {
          out += d.toString();
          const m = /ready (\S+)/.exec(out);
          if (m) resolve(m[1]!);
        });
        child.once("exit", (code) => reject(new Error(`gateway exited ${String(code)}`)));
      });
      const token = readFileSync(join(home, "token"), "utf8").trim();
      const api = async (method: string, path: string, body?: unknown): Promise<any> => {
        const headers: Record<string, string> = { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { "content-type": "application/json" }) };
        const r = await apiFetch(url, path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
        return r.json();
      };
      // The gateway's RSS after a full collection (what it retains, socket buffers included).
      const rssMb = (): Promise<number> =>
        new Promise((resolve) => {
          const onData = (d: Buffer): void => {
            const m = /rss (\d+)/.exec(d.toString());
            if (!m) return;
            child.stdout.off("data", onData);
            resolve(Number(m[1]) / 2 ** 20);
          };
          child.stdout.on("data", onData);
          child.stdin.write("rss\n");
        });
      const status = (): Promise<any> => api("GET", "/v1/status");
      const created = await api("POST", "/v1/sandboxes", { name: "churn" });
      await eventually(async () => ((await api("GET", "/v1/sandboxes/churn")).phase === "Ready" ? true : undefined), 10_000, "Ready");
      await api("POST", "/v1/sandboxes/churn/stop");
      await eventually(async () => ((await api("GET", "/v1/sandboxes/churn")).phase === "Stopped" ? true : undefined), 10_000, "Stopped");

      const churn = async (from: number): Promise<void> => {
        for (let i = from; i < from + 10_000; i += 20) await Promise.all(Array.from({ length: 20 }, (_, k) => api("PUT", "/v1/sandboxes/churn/policy", { policy: POLICY(i + k) })));
      };
      // Warm up: 10,000 changes with no watcher, so the allocator's working set of
      // serving them is there before the measurement (it is ~45 MB here, watchers or not).
      await churn(0);

      const silent = await Promise.all(
        Array.from({ length: 50 }, () =>
          new Promise<Socket>((resolve, reject) => {
            const s = connect({ path: socketOf(url) }, () => {
              s.write(`GET /v1/watch HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token}\r\n\r\n`);
              s.pause(); // and never reads a byte
              resolve(s);
            });
            s.on("error", reject);
          }),
        ),
      );
      for (const s of silent) s.on("error", () => undefined);
      await eventually(async () => ((await status()).watch.streams === 50 ? true : undefined), 10_000, "50 streams open");

      const seen: number[] = [];
      const ac = new AbortController();
      const reader = (async () => {
        const res = await apiFetch(url, `/v1/watch?sandbox=churn`, { headers: { authorization: `Bearer ${token}` }, signal: ac.signal });
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
      await eventually(async () => ((await status()).watch.streams === 51 ? true : undefined), 10_000, "reader open");

      const before = await rssMb();
      await churn(10_000);
      const { events } = await api("GET", `/v1/sandboxes/churn/events?tail=1`);
      const last = events[0].seq as number;
      await eventually(() => (seen.at(-1) === last ? true : undefined), 60_000, "the reader saw the last event");
      const growthMb = (await rssMb()) - before;

      const st = await status();
      expect(st.watch.overflows).toBe(50);
      expect(st.watch.streams).toBe(1);
      expect(growthMb).toBeLessThan(50);
      // Every event of the sandbox, once each, in order.
      const all = (await api("GET", `/v1/sandboxes/churn/events?after=${seen[0]! - 1}&limit=10000`)).events.map((e: { seq: number }) => e.seq);
      expect(seen).toEqual(all);
      expect(created.name).toBe("churn");
      ac.abort();
      await reader;
      for (const s of silent) s.destroy();
    } finally {
      child.kill("SIGTERM");
      await new Promise((r) => child.once("exit", r));
      rmSync(home, { recursive: true, force: true });
    }
  }, 600_000);

  it("a CLI watch that falls behind is told so, reconnects after its last event and prints each event exactly once", async () => {
    t = await startTestGateway(new MemoryDriver(), { watch: { maxBufferedBytes: 16 * 1024 } });
    const id = await stoppedSandbox("resume");
    const cli = spawn(process.execPath, [CLI_MAIN, "--home", t.home.dir, "sandbox", "watch", "resume", "--json"], {
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
    await t.gw.service.setPolicy("resume", POLICY(99_999));
    const last = (await t.gw.read.events(id, { tail: 1 }))[0]!.seq;
    await eventually(() => (out.includes(`"seq":${last},`) ? true : undefined), 60_000, "the CLI printed the last event");
    cli.kill("SIGINT");
    const seqs = out.trim().split("\n").map((l) => (JSON.parse(l) as { event: { seq: number } }).event.seq);
    expect(err).toMatch(/fell behind the gateway; resuming after event \d+/);
    expect(new Set(seqs).size).toBe(seqs.length);
    expect(seqs).toEqual((await t.gw.read.events(id, { afterSeq: seqs[0]! - 1, limit: 10_000 })).map((e) => e.seq));
  }, 120_000);
});
