// `sandgate sandbox logs` as a user runs it: the real CLI process against a real gateway
// on the scripted-logs test double. stdout lines to stdout, stderr lines to stderr,
// partial lines joined, --timestamps and --json; bad flags one line, exit 2; a follow
// cut by a gateway restart resumes without a line twice or lost (lines sharing a time
// included); Ctrl-C and a closed stdout end it cleanly, exit 0.
import { spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { CLI_ARGS, cli, type CliRun } from "../../support/cli-runner.js";
import { eventually, startTestGateway, type TestGateway } from "../../support/gateway-fixture.js";
import { LogsDriver } from "../../support/logs-driver.js";

const T = (n: number): string => `2026-12-03T13:16:${String(n).padStart(2, "0")}.000000000Z`;

let t: TestGateway;
let driver: LogsDriver;
let home: string[];
const running: ChildProcessWithoutNullStreams[] = [];

beforeEach(async () => {
  driver = new LogsDriver();
  t = await startTestGateway(driver);
  home = ["--home", t.home.dir];
  const created = await cli([...home, "sandbox", "create", "app"]);
  expect(created.code, created.stderr).toBe(0);
});
afterEach(async () => {
  for (const p of running.splice(0)) if (p.exitCode === null) p.kill("SIGKILL");
  driver.end();
  await t.close();
});

/** One line on stderr, no stack trace. */
function oneLine(r: CliRun): string {
  const lines = r.stderr.trim().split("\n");
  expect(lines, r.stderr).toHaveLength(1);
  expect(r.stderr).not.toMatch(/\bat .+:\d+:\d+/);
  return lines[0]!;
}

/** The CLI as a running process whose output the test watches. */
function start(args: string[]): { p: ChildProcessWithoutNullStreams; out: () => string; err: () => string; exit: Promise<number | null> } {
  const p = spawn(CLI_ARGS[0]!, [...CLI_ARGS.slice(1), ...home, ...args], { env: { ...process.env, SANDGATE_URL: undefined, SANDGATE_TOKEN: undefined }, stdio: "pipe" });
  running.push(p);
  let out = "";
  let err = "";
  p.stdout.on("data", (b: Buffer) => (out += b.toString()));
  p.stderr.on("data", (b: Buffer) => (err += b.toString()));
  const exit = new Promise<number | null>((resolve) => p.on("close", (code) => resolve(code)));
  return { p, out: () => out, err: () => err, exit };
}

describe("sandbox logs", () => {
  it("stdout to stdout, stderr to stderr, partial lines joined; --timestamps, --json, --tail and --since as asked", { timeout: 240_000 }, async () => {
    driver.append(1, [
      { t: T(1), s: "out", l: "out one" },
      { t: T(2), s: "err", l: "err one" },
      { t: T(3), s: "out", l: "joined ", p: true },
      { t: T(3), s: "out", l: "line" },
      { t: T(4), s: "out", l: "no newline at the end", p: true },
    ]);
    const r = await cli([...home, "sandbox", "logs", "app"]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toBe("out one\njoined line\nno newline at the end");
    expect(r.stderr).toBe("err one\n");

    const ts = await cli([...home, "sandbox", "logs", "app", "--timestamps", "--tail", "3"]);
    expect(ts.stdout).toBe(`${T(3)} joined line\n${T(4)} no newline at the end`);
    expect(driver.requests.at(-1)).toMatchObject({ tail: 3 });

    const json = await cli([...home, "sandbox", "logs", "app", "--json", "--since", "2026-12-03T13:16:02Z"]);
    expect(json.stdout.trim().split("\n").map((l) => JSON.parse(l))).toEqual([
      { t: T(2), s: "err", l: "err one" },
      { t: T(3), s: "out", l: "joined ", p: true },
      { t: T(3), s: "out", l: "line" },
      { t: T(4), s: "out", l: "no newline at the end", p: true },
    ]);
    expect(json.stderr).toBe("");

    // A duration is a time back from now, sent as one.
    const before = Date.now();
    await cli([...home, "sandbox", "logs", "app", "--since", "10m"]);
    const since = Date.parse(driver.requests.at(-1)!.since!);
    expect(since).toBeGreaterThanOrEqual(before - 600_000 - 1000);
    expect(since).toBeLessThanOrEqual(Date.now() - 600_000 + 1000);

    const sup = await cli([...home, "sandbox", "logs", "app", "--supervisor"]);
    expect(sup.code).toBe(4);
    expect(oneLine(sup)).toBe("sandgate: no logs of generation 1's supervisor");
  });

  it("bad flags: one line naming the value, exit 2, nothing asked of the gateway; unknown sandbox exit 4", { timeout: 240_000 }, async () => {
    const asked = driver.requests.length;
    const cases: [string[], RegExp][] = [
      [["--tail", "x"], /--tail must be a whole number from 0 to 1000000; got "x"/],
      [["--tail", "1000001"], /--tail must be a whole number from 0 to 1000000; got "1000001"/],
      [["--since", "last tuesday"], /--since must be an RFC 3339 time \(e\.g\. 2026-12-01T10:00:00Z\) or a duration back from now \(e\.g\. 90s, 10m, 2h, 7d\); got "last tuesday"/],
      [["--generation", "0"], /--generation must be a whole number from 1 to 999999999; got "0"/],
      [["--previous", "--generation", "2"], /--previous and --generation both name a generation; give one of them/],
    ];
    for (const [args, message] of cases) {
      const r = await cli([...home, "sandbox", "logs", "app", ...args]);
      expect(r.code, args.join(" ")).toBe(2);
      expect(oneLine(r), args.join(" ")).toMatch(message);
    }
    expect(driver.requests.length).toBe(asked);
    const missing = await cli([...home, "sandbox", "logs", "nope"]);
    expect(missing.code).toBe(4);
    expect(oneLine(missing)).toBe('sandgate: no sandbox named "nope"');
    const previous = await cli([...home, "sandbox", "logs", "app", "--previous"]);
    expect(previous.code).toBe(4);
    expect(oneLine(previous)).toBe('sandgate: sandbox "app" has no previous generation (it is at generation 1)');
    const help = await cli(["sandbox", "logs", "--help"]);
    expect(help.code).toBe(0);
    for (const flag of ["--follow", "--tail", "--since", "--timestamps", "--supervisor", "--previous", "--generation", "--json"]) expect(help.stdout).toContain(flag);
  });

  it("-f across a gateway restart: resumes from the last line printed, lines sharing its time counted, none twice or lost", { timeout: 240_000 }, async () => {
    driver.append(1, [
      { t: T(1), s: "out", l: "L1" },
      { t: T(2), s: "err", l: "L2" },
      { t: T(3), s: "out", l: "L3" },
      { t: T(3), s: "out", l: "L4" },
    ]);
    const c = start(["sandbox", "logs", "app", "-f", "--tail", "100"]);
    await eventually(() => (c.out().includes("L4\n") ? true : undefined), 30_000, "the first lines");
    // The gateway goes away (its close cuts the stream, no last record), the log goes on.
    await t.close({ keepHome: true });
    driver.append(1, [
      { t: T(3), s: "out", l: "L5" },
      { t: T(4), s: "err", l: "L6" },
      { t: T(5), s: "out", l: "L7" },
    ]);
    t = await startTestGateway(driver, { homeDir: t.home.dir });
    await eventually(() => (c.out().includes("L7\n") ? true : undefined), 60_000, "the lines after the restart");
    driver.end();
    expect(await c.exit).toBe(0);
    expect(c.out()).toBe("L1\nL3\nL4\nL5\nL7\n");
    expect(c.err()).toBe("L2\nL6\n");
    // The resume asked from the last time printed, for the same generation, without a tail.
    expect(driver.requests.at(-1)).toMatchObject({ since: T(3), generation: 1, follow: true });
    expect(driver.requests.at(-1)!.tail).toBeUndefined();
  });

  it("Ctrl-C ends a follow cleanly, exit 0; so does a reader that closes our stdout", { timeout: 240_000 }, async () => {
    driver.append(1, [{ t: T(1), s: "out", l: "first" }]);
    const c = start(["sandbox", "logs", "app", "-f"]);
    await eventually(() => (c.out() === "first\n" ? true : undefined), 30_000, "the first line");
    c.p.kill("SIGINT");
    expect(await c.exit).toBe(0);
    expect(c.err()).toBe("");
    await eventually(() => (driver.open === 0 ? true : undefined), 10_000, "the gateway's read to end");

    const piped = start(["sandbox", "logs", "app", "-f"]);
    await eventually(() => (piped.out() === "first\n" ? true : undefined), 30_000, "the first line");
    piped.p.stdout.destroy();
    for (let i = 2; piped.p.exitCode === null && i < 2000; i++) {
      driver.append(1, [{ t: T(2), s: "out", l: `line ${i}` }]);
      await new Promise((r) => setTimeout(r, 5));
    }
    expect(await piped.exit).toBe(0);
    expect(piped.err()).toBe("");
  });
});
