// `sandbox events NAME --follow`: the real CLI process following a real gateway (HTTP +
// SQLite) on the in-memory driver test double. It prints each new event once, in
// order, across a gateway restart (a new process on a new port, same home), and ends
// with the sandbox's deletion or on Ctrl-C.

import { spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { FRAME_MAX_BYTES, sseFrames } from "../../../src/cli/events-follow.js";
import { CLI_ARGS } from "../../support/cli-runner.js";
import { MemoryDriver } from "../../support/memory-driver.js";
import { eventually, startTestGateway, type TestGateway } from "../../support/gateway-fixture.js";

const LONG = { timeout: 240_000 };

interface Follower {
  proc: ChildProcessWithoutNullStreams;
  out: () => string;
  err: () => string;
  exit: Promise<number | null>;
}

function follow(args: string[]): Follower {
  const proc = spawn(CLI_ARGS[0]!, [...CLI_ARGS.slice(1), ...args], { env: { ...process.env, SANDGATE_URL: undefined, SANDGATE_TOKEN: undefined } });
  let out = "";
  let err = "";
  proc.stdout.on("data", (b: Buffer) => (out += b.toString()));
  proc.stderr.on("data", (b: Buffer) => (err += b.toString()));
  const exit = new Promise<number | null>((resolve) => proc.on("close", (code) => resolve(code)));
  return { proc, out: () => out, err: () => err, exit };
}

type Ev = { seq: number; kind: string; newPhase: string | null; sandboxId: string };
const jsonLines = (text: string): Ev[] => text.split("\n").filter(Boolean).map((l) => JSON.parse(l) as Ev);

let homeDir: string;
let t: TestGateway;
beforeAll(async () => {
  homeDir = mkdtempSync(join(tmpdir(), "sg-follow-"));
  t = await startTestGateway(new MemoryDriver(), { homeDir });
});
afterAll(async () => {
  await t.close();
  rmSync(homeDir, { recursive: true, force: true });
});

/**
 * The rows of an events table cut at the header's column starts, each checked to be what its
 * column holds: rows printed later must line up with the first (issue 31, item 10: each
 * followed row had widths of its own).
 */
function inColumns(out: string): string[][] {
  const [header, ...rows] = out.trimEnd().split("\n");
  const starts = ["SEQ", "TIME", "GEN", "KIND", "CHANGE", "DETAIL"].map((h) => header!.indexOf(h));
  const cells = rows.map((l) => starts.map((s, i) => l.slice(s, starts[i + 1]).trimEnd()));
  for (const c of cells) {
    expect(c.slice(0, 5).join("|"), c.join("|")).toMatch(/^\d+\|\d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ\|\d+\|(phase\|\S+ → \S+|deleted\|\S+ → gone|info\|-)$/);
    expect(c[5], c.join("|")).toMatch(/^\S/);
  }
  return cells;
}

const untilOut = (f: Follower, re: RegExp, what: string): Promise<true> =>
  eventually(() => (re.test(f.out()) ? true : undefined), 120_000, `${what}; stdout so far:\n${f.out()}\nstderr:\n${f.err()}`);

describe("sandbox events --follow", () => {
  it("prints the last N, then each new event once and in order, across a gateway restart, and ends with the deletion (exit 0)", LONG, async () => {
    const id = (await t.api("POST", "/v1/sandboxes", { name: "fol" })).body.id as string;
    await t.gw.idle();
    const f = follow(["--home", homeDir, "sandbox", "events", "fol", "--tail", "1", "--follow", "--json"]);
    await untilOut(f, /"newPhase":"Ready"/, "the tail");
    expect(jsonLines(f.out())).toHaveLength(1);

    expect((await t.api("POST", "/v1/sandboxes/fol/stop")).status).toBe(202);
    await untilOut(f, /"newPhase":"Stopped"/, "the stop");

    // The gateway goes away and comes back as another process would: same home, another port.
    await t.close({ keepHome: true });
    await eventually(() => (/the gateway is not answering/.test(f.err()) ? true : undefined), 120_000, "the follower to notice");
    t = await startTestGateway(new MemoryDriver(), { homeDir });
    expect((await t.api("POST", "/v1/sandboxes/fol/start")).status).toBe(202);
    await t.gw.idle();
    expect((await t.api("DELETE", "/v1/sandboxes/fol")).status).toBe(202);

    expect(await f.exit).toBe(0);
    expect(f.err()).toMatch(/the gateway answers again; resuming after event \d+/);
    const printed = jsonLines(f.out());
    const log = await t.gw.store.events(id);
    // Exactly the log from the tail on: nothing lost, nothing twice, in order, ending with the deletion.
    expect(printed.map((e) => e.seq)).toEqual(log.slice(log.findIndex((e) => e.seq === printed[0]!.seq)).map((e) => e.seq));
    expect(printed.every((e) => e.sandboxId === id)).toBe(true);
    expect(printed.at(-1)!.kind).toBe("deleted");
    expect(printed.map((e) => e.newPhase).filter(Boolean)).toEqual(["Ready", "Stopping", "Stopped", "Provisioning", "Ready", "Deleting"]);
  });

  it("a sandbox deleted while the follower was away (gateway restarted meanwhile): its last events are printed on return, then exit 0", LONG, async () => {
    const id = (await t.api("POST", "/v1/sandboxes", { name: "fol-away" })).body.id as string;
    await t.gw.idle();
    const f = follow(["--home", homeDir, "sandbox", "events", "fol-away", "--follow", "--json"]);
    await untilOut(f, /"newPhase":"Ready"/, "the log");
    // Stopped (SIGSTOP), the follower cannot reconnect before the deletion: it must resume by id.
    f.proc.kill("SIGSTOP");
    try {
      await t.close({ keepHome: true });
      t = await startTestGateway(new MemoryDriver(), { homeDir });
      expect((await t.api("DELETE", "/v1/sandboxes/fol-away")).status).toBe(202);
      await t.gw.idle();
      expect((await t.api("GET", "/v1/sandboxes/fol-away")).status).toBe(404);
    } finally {
      f.proc.kill("SIGCONT");
    }
    expect(await f.exit, f.err()).toBe(0);
    expect(jsonLines(f.out()).map((e) => e.seq)).toEqual((await t.gw.store.events(id)).map((e) => e.seq));
    expect(jsonLines(f.out()).at(-1)!.kind).toBe("deleted");
  });

  it("as a table: the log, then one row per new event, in the header's columns; Ctrl-C ends it with exit 0", LONG, async () => {
    await t.api("POST", "/v1/sandboxes", { name: "fol-int" });
    await t.gw.idle();
    const f = follow(["--home", homeDir, "sandbox", "events", "fol-int", "--follow"]);
    await untilOut(f, /Provisioning → Ready/, "the log");
    expect(f.out()).toMatch(/^SEQ\s+TIME\s+GEN\s+KIND\s+CHANGE\s+DETAIL\n/);
    expect((await t.api("POST", "/v1/sandboxes/fol-int/stop")).status).toBe(202);
    await untilOut(f, /Stopping → Stopped/, "the stop");
    const changes = f.out().split("\n").filter((l) => l.includes("→")).map((l) => /(\S+ → \S+)/.exec(l)![1]);
    expect(changes).toEqual(["- → Provisioning", "Provisioning → Ready", "Ready → Stopping", "Stopping → Stopped"]);
    expect(inColumns(f.out())).toHaveLength(5); // the four changes and "verifying readiness"
    f.proc.kill("SIGINT");
    expect(await f.exit).toBe(0);
  });

  it("as a table from --tail 1 to the deletion: rows wider than the first (a deleted event) still in the header's columns", LONG, async () => {
    await t.api("POST", "/v1/sandboxes", { name: "fol-wide" });
    await t.gw.idle();
    const f = follow(["--home", homeDir, "sandbox", "events", "fol-wide", "--tail", "1", "--follow"]);
    await untilOut(f, /Provisioning → Ready/, "the tail");
    expect((await t.api("DELETE", "/v1/sandboxes/fol-wide")).status).toBe(202);
    expect(await f.exit, f.err()).toBe(0);
    const kinds = inColumns(f.out()).map((c) => `${c[3]} ${c[4]}`);
    expect(kinds).toEqual(["phase Provisioning → Ready", "phase Ready → Deleting", "deleted Deleting → gone"]);
  });

  it("an unknown sandbox is exit 4 at once; a flag it does not know is exit 2", LONG, async () => {
    const f = follow(["--home", homeDir, "sandbox", "events", "nope", "--follow"]);
    expect(await f.exit).toBe(4);
    expect(f.err()).toBe('sandgate: no sandbox named "nope"\n');
    const g = follow(["--home", homeDir, "sandbox", "events", "nope", "--follow", "--tail", "0"]);
    expect(await g.exit).toBe(2);
  });
});

describe("the follower's reading of the watch stream", () => {
  async function* chunks(...parts: string[]): AsyncGenerator<Uint8Array> {
    for (const p of parts) yield Buffer.from(p);
  }
  const all = async (it: AsyncIterable<unknown>): Promise<unknown[]> => {
    const out: unknown[] = [];
    for await (const x of it) out.push(x);
    return out;
  };

  it("splits frames across chunks, skips comments and frames without data", async () => {
    expect(await all(sseFrames(chunks(": sandgate watch\n\n", "event: sandbox\nid: 3\nda", "ta: {\"a\":1}\n\nevent: overflow\ndata: {}\n\n")))).toEqual([
      { event: "sandbox", data: '{"a":1}' },
      { event: "overflow", data: "{}" },
    ]);
  });

  it("a frame that never ends is refused past FRAME_MAX_BYTES, not buffered without bound", async () => {
    const piece = "x".repeat(1 << 20);
    const endless = (async function* () {
      for (let i = 0; i < 64; i++) yield Buffer.from(piece);
    })();
    await expect(all(sseFrames(endless))).rejects.toThrow(`a watch frame is over ${FRAME_MAX_BYTES} bytes`);
  });
});
