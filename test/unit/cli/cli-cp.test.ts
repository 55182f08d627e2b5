// `sandgate sandbox cp` as a user meets it: a real CLI process against a real
// gateway on the local-exec TEST DOUBLE driver (the real programs with busybox,
// /sandbox a temp dir). docker cp's rules for where things land, `-` both ways,
// --json, progress, and every mistake as one line with its exit code.
import { spawn } from "node:child_process";
import { existsSync, lstatSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseCpArg } from "../../../src/cli/cp-command.js";
import { readTar } from "../../../src/files/tar-stream.js";
import { CLI_ARGS } from "../../support/cli-runner.js";
import { eventually, startTestGateway, type TestGateway } from "../../support/gateway-fixture.js";
import { LocalExecDriver } from "../../support/local-exec-driver.js";
import { archive, chunks } from "../../support/tar-craft.js";

let dir: string;
let driver: LocalExecDriver;
let t: TestGateway;
let n = 0;
const NAME = "cp";

interface Ran {
  code: number | null;
  stdout: Buffer;
  stderr: string;
}

function sg(args: string[], stdin?: Buffer): Promise<Ran> {
  return new Promise((resolve, reject) => {
    const p = spawn(CLI_ARGS[0]!, [...CLI_ARGS.slice(1), "--home", t.home.dir, ...args], { env: { ...process.env, SANDGATE_URL: undefined, SANDGATE_TOKEN: undefined }, stdio: ["pipe", "pipe", "pipe"] });
    const out: Buffer[] = [];
    let err = "";
    p.stdout.on("data", (c: Buffer) => out.push(c));
    p.stderr.on("data", (c: Buffer) => (err += c.toString()));
    p.on("error", reject);
    p.on("close", (code) => resolve({ code, stdout: Buffer.concat(out), stderr: err }));
    p.stdin.on("error", () => undefined);
    p.stdin.end(stdin ?? Buffer.alloc(0));
  });
}

/** One line on stderr, no stack trace; returns it. */
function oneLine(r: Ran): string {
  const lines = r.stderr.trim().split("\n");
  expect(lines, r.stderr).toHaveLength(1);
  expect(r.stderr).not.toMatch(/\bat .+:\d+:\d+/);
  return lines[0]!;
}

const ws = (...p: string[]): string => join(driver.workspace, ...p);
const local = (...p: string[]): string => join(dir, "local", ...p);
const mode = (p: string): number => lstatSync(p).mode & 0o7777;
/** A fresh local directory for one test. */
function scratch(): string {
  const d = local(`t${++n}`);
  mkdirSync(d, { recursive: true });
  return d;
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "sg-cli-cp-"));
  driver = new LocalExecDriver(join(dir, "ws"), dir);
  t = await startTestGateway(driver, { files: { maxBytes: 64 * 1024 * 1024 } });
  expect((await t.api("POST", "/v1/sandboxes", { name: NAME })).status).toBe(201);
  await eventually(async () => ((await t.api("GET", `/v1/sandboxes/${NAME}`)).body.phase === "Ready" ? true : undefined));
  // A tree in the "workspace" for downloads.
  mkdirSync(ws("tree", "sub"), { recursive: true });
  writeFileSync(ws("tree", "run.sh"), "#!/bin/sh\necho ran\n", { mode: 0o755 });
  writeFileSync(ws("tree", "key"), "k", { mode: 0o600 });
  writeFileSync(ws("tree", "sub", "deep.txt"), "deep");
  writeFileSync(ws("one.txt"), "one");
  symlinkSync("/etc", ws("evil"));
});

afterAll(async () => {
  await t.close();
  rmSync(dir, { recursive: true, force: true });
});

describe("parseCpArg", () => {
  it.each([
    ["demo:/sandbox/x", { remote: { sandbox: "demo", path: "/sandbox/x", dirOnly: false, contents: false, text: "demo:/sandbox/x" } }],
    ["demo:x/y", { remote: { sandbox: "demo", path: "/sandbox/x/y", dirOnly: false, contents: false, text: "demo:x/y" } }],
    ["demo:", { remote: { sandbox: "demo", path: "/sandbox", dirOnly: false, contents: false, text: "demo:" } }],
    ["demo:/sandbox/d/.", { remote: { sandbox: "demo", path: "/sandbox/d", dirOnly: true, contents: true, text: "demo:/sandbox/d/." } }],
    ["sbx_0123456789abcdef:/sandbox", { remote: { sandbox: "sbx_0123456789abcdef", path: "/sandbox", dirOnly: false, contents: false, text: "sbx_0123456789abcdef:/sandbox" } }],
    ["./demo:x", { local: "./demo:x" }],
    ["/tmp/a:b", { local: "/tmp/a:b" }],
    ["-", { local: "-" }],
    ["Demo:x", { local: "Demo:x" }],
    ["file.txt", { local: "file.txt" }],
  ])("%j", (arg, parsed) => {
    expect(parseCpArg(arg)).toEqual(parsed);
  });

  it("refuses remote paths that leave the workspace", () => {
    expect(parseCpArg("demo:/sandbox/../etc")).toEqual({ error: 'path "/sandbox/../etc" contains "..": a path must stay inside /sandbox without ".." segments' });
    expect(parseCpArg("demo:/etc/passwd")).toEqual({ error: 'path "/etc/passwd" is outside /sandbox: sandbox cp reaches only the workspace' });
    expect(parseCpArg("demo:../x")).toEqual({ error: 'path "/sandbox/../x" contains "..": a path must stay inside /sandbox without ".." segments' });
  });
});

describe("out of a sandbox", () => {
  it("a directory into an existing local directory lands under its own name, modes kept", async () => {
    const d = scratch();
    const r = await sg(["sandbox", "cp", `${NAME}:/sandbox/tree`, d]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout.toString()).toBe(`copied 5 entries (24 B) to ${d}\n`);
    expect(readFileSync(join(d, "tree", "sub", "deep.txt"), "utf8")).toBe("deep");
    expect(mode(join(d, "tree", "run.sh"))).toBe(0o755);
    expect(mode(join(d, "tree", "key"))).toBe(0o600);
  });

  it("to a path that does not exist: created with the contents; /. copies the contents into an existing directory", async () => {
    const d = scratch();
    expect((await sg(["sandbox", "cp", `${NAME}:tree`, join(d, "copy")])).code).toBe(0);
    expect(readdirSync(join(d, "copy")).sort()).toEqual(["key", "run.sh", "sub"]);
    expect((await sg(["sandbox", "cp", `${NAME}:/sandbox/tree/.`, d])).code).toBe(0);
    expect(readdirSync(d).sort()).toEqual(["copy", "key", "run.sh", "sub"]);
  });

  it("a file onto an existing file replaces it; a directory onto a file is refused (exit 1)", async () => {
    const d = scratch();
    writeFileSync(join(d, "f"), "old");
    expect((await sg(["sandbox", "cp", `${NAME}:/sandbox/one.txt`, join(d, "f")])).code).toBe(0);
    expect(readFileSync(join(d, "f"), "utf8")).toBe("one");
    const r = await sg(["sandbox", "cp", `${NAME}:/sandbox/tree`, join(d, "f")]);
    expect(r.code).toBe(1);
    expect(oneLine(r)).toBe(`sandgate: cannot copy a directory onto the file ${JSON.stringify(d)}/f`);
  });

  it("`-` writes the tar to stdout; --json prints a summary", async () => {
    const r = await sg(["sandbox", "cp", `${NAME}:/sandbox/tree`, "-"]);
    expect(r.code, r.stderr).toBe(0);
    const names: string[] = [];
    for await (const e of readTar(chunks(r.stdout, 4096))) names.push(e.header.name);
    expect(names.sort()).toEqual(["tree/", "tree/key", "tree/run.sh", "tree/sub/", "tree/sub/deep.txt"]);
    const d = scratch();
    const j = await sg(["sandbox", "cp", "--json", `${NAME}:/sandbox/one.txt`, d]);
    expect(JSON.parse(j.stdout.toString())).toEqual({ direction: "download", source: `${NAME}:/sandbox/one.txt`, destination: d, entries: 1, bytes: 3, skipped: 0 });
  });

  it("--progress shows bytes copied on stderr", async () => {
    writeFileSync(ws("big.bin"), Buffer.alloc(8 * 1024 * 1024, 7));
    const r = await sg(["sandbox", "cp", "--progress", `${NAME}:/sandbox/big.bin`, scratch()]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toMatch(/copying from cp:\/sandbox\/big.bin: 8 MiB/);
    // The final count is printed also when the copy ends before the first redraw.
    const small = await sg(["sandbox", "cp", "--progress", `${NAME}:/sandbox/one.txt`, scratch()]);
    expect(small.stderr.split("\r").at(-1)).toBe("copying from cp:/sandbox/one.txt: 3 B\u001b[K\n");
  });
});

describe("into a sandbox", () => {
  it("a directory to a path that does not exist: created with the contents, modes kept", async () => {
    const d = scratch();
    mkdirSync(join(d, "proj"));
    writeFileSync(join(d, "proj", "run.sh"), "#!/bin/sh\n", { mode: 0o755 });
    writeFileSync(join(d, "proj", "secret"), "s", { mode: 0o600 });
    const r = await sg(["sandbox", "cp", join(d, "proj"), `${NAME}:/sandbox/up-${n}`]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout.toString()).toBe(`copied 3 entries (11 B) to ${NAME}:/sandbox/up-${n}\n`);
    expect(mode(ws(`up-${n}`, "run.sh"))).toBe(0o755);
    expect(mode(ws(`up-${n}`, "secret"))).toBe(0o600);
  });

  it("into an existing directory under its own name; a file onto a file; a directory onto a file is refused", async () => {
    const d = scratch();
    writeFileSync(join(d, "a.txt"), "A");
    mkdirSync(ws("into"), { recursive: true });
    expect((await sg(["sandbox", "cp", join(d, "a.txt"), `${NAME}:into`])).code).toBe(0);
    expect(readFileSync(ws("into", "a.txt"), "utf8")).toBe("A");
    writeFileSync(join(d, "b.txt"), "B");
    expect((await sg(["sandbox", "cp", join(d, "b.txt"), `${NAME}:into/a.txt`])).code).toBe(0);
    expect(readFileSync(ws("into", "a.txt"), "utf8")).toBe("B");
    const r = await sg(["sandbox", "cp", d, `${NAME}:into/a.txt`]);
    expect([r.code, oneLine(r)]).toEqual([2, `sandgate: cannot copy a directory onto the file ${NAME}:into/a.txt`]);
  });

  it("`-` reads a tar from stdin into an existing directory", async () => {
    mkdirSync(ws("stdin"), { recursive: true });
    const r = await sg(["sandbox", "cp", "-", `${NAME}:/sandbox/stdin`], archive([{ name: "from-stdin.txt", data: "s", mode: 0o640 }]));
    expect(r.code, r.stderr).toBe(0);
    expect(mode(ws("stdin", "from-stdin.txt"))).toBe(0o640);
  });

  it("a hostile tar on stdin is refused with its member named", async () => {
    mkdirSync(ws("stdin2"), { recursive: true });
    const r = await sg(["sandbox", "cp", "-", `${NAME}:/sandbox/stdin2`], archive([{ name: "l", type: "2", linkname: "/etc" }, { name: "l/x", data: "x" }]));
    expect([r.code, oneLine(r)]).toEqual([2, 'sandgate: member "l/x" goes through the symbolic link "l" of the same archive; a member is never written through a symlink']);
  });
});

describe("mistakes: one line, the documented exit code", () => {
  it.each([
    [["a", "b"], 2, 'sandgate: one of SRC and DEST must be NAME:PATH (a sandbox\'s path); got "a" and "b" (write ./a for a local path with a colon)'],
    [[`${NAME}:x`, `${NAME}:y`], 2, "sandgate: copying from one sandbox to another is not supported; copy to a local path first"],
    [[`${NAME}:/sandbox/../etc`, "."], 2, 'sandgate: path "/sandbox/../etc" contains "..": a path must stay inside /sandbox without ".." segments'],
    [[`${NAME}:/sandbox/evil`, "."], 2, 'sandgate: path "/sandbox/evil" resolves to "/etc", outside /sandbox: a symlink may not lead out of the workspace'],
    [[`${NAME}:/sandbox/missing`, "."], 4, `sandgate: no such file or directory in sandbox "${NAME}": "/sandbox/missing"`],
    [["nope:/sandbox", "."], 4, 'sandgate: no sandbox named "nope"'],
    [["./no-such-local-file", `${NAME}:/sandbox`], 4, 'sandgate: no such file or directory: "./no-such-local-file"'],
  ])("%j → exit %i", async (args, code, line) => {
    const r = await sg(["sandbox", "cp", ...args]);
    expect(r.code).toBe(code);
    expect(oneLine(r)).toBe(line);
  });

  it("--json with `-` as the destination is a usage error", async () => {
    const r = await sg(["sandbox", "cp", "--json", `${NAME}:/sandbox/one.txt`, "-"]);
    expect([r.code, oneLine(r)]).toEqual([2, "sandgate: --json prints to stdout, where `-` sends the tar; drop one of them"]);
  });

  it("a destination whose parent does not exist is exit 4, nothing written", async () => {
    const d = scratch();
    const r = await sg(["sandbox", "cp", `${NAME}:/sandbox/one.txt`, join(d, "no", "such")]);
    expect([r.code, oneLine(r)]).toEqual([4, `sandgate: no such directory: ${JSON.stringify(join(d, "no"))} (the destination's parent must exist)`]);
    expect(existsSync(join(d, "no"))).toBe(false);
  });

  it("a sandbox that is not Ready is exit 5", async () => {
    await t.api("POST", "/v1/sandboxes", { name: "cp-stopped" });
    await eventually(async () => ((await t.api("GET", "/v1/sandboxes/cp-stopped")).body.phase === "Ready" ? true : undefined));
    await t.api("POST", "/v1/sandboxes/cp-stopped/stop");
    await eventually(async () => ((await t.api("GET", "/v1/sandboxes/cp-stopped")).body.phase === "Stopped" ? true : undefined));
    const r = await sg(["sandbox", "cp", "cp-stopped:/sandbox", scratch()]);
    expect([r.code, oneLine(r)]).toEqual([5, 'sandgate: cannot copy files with sandbox "cp-stopped": it is Stopped; sandbox cp needs Ready']);
    const up = await sg(["sandbox", "cp", scratch(), "cp-stopped:/sandbox/x"]);
    expect(up.code).toBe(5);
  });

  it("a hostile download the gateway ends: the gateway's reason, exit 2, nothing outside the destination", async () => {
    driver.hostileDownload = archive([{ name: "tree/", type: "5" }, { name: "tree/../../../escape", data: "x" }]);
    try {
      const d = scratch();
      const r = await sg(["sandbox", "cp", `${NAME}:/sandbox/tree`, d]);
      expect([r.code, oneLine(r)]).toEqual([2, 'sandgate: member "tree/../../../escape" contains "..": members must stay inside the destination']);
      expect(existsSync(join(d, "..", "escape"))).toBe(false);
      expect(existsSync(join(d, "..", "..", "escape"))).toBe(false);
    } finally {
      driver.hostileDownload = undefined;
    }
  });

  it("a bad SANDGATE_CP_* setting stops `gateway start` before anything starts (exit 2, one line)", async () => {
    const home = mkdtempSync(join(tmpdir(), "sg-cp-home-"));
    try {
      const r = await new Promise<Ran>((resolve, reject) => {
        const p = spawn(CLI_ARGS[0]!, [...CLI_ARGS.slice(1), "--home", home, "gateway", "start", "--port", "0"], {
          env: { ...process.env, SANDGATE_CP_MAX_BYTES: "lots", DOCKER_HOST: `unix://${join(home, "no-docker.sock")}` },
          stdio: ["ignore", "pipe", "pipe"],
        });
        let err = "";
        p.stderr.on("data", (c: Buffer) => (err += c.toString()));
        p.on("error", reject);
        p.on("close", (code) => resolve({ code, stdout: Buffer.alloc(0), stderr: err }));
      });
      expect([r.code, oneLine(r)]).toEqual([2, 'sandgate: SANDGATE_CP_MAX_BYTES must be a size such as 512M or 16G (binary units K, M, G, T) from 1048576 to 17592186044416 bytes; got "lots"']);
      expect(readdirSync(home)).toEqual([]);
    } finally {
      rmSync(home, { recursive: true, force: true });
    }
  });

  it("has --help", async () => {
    const r = await sg(["sandbox", "cp", "--help"]);
    expect(r.code).toBe(0);
    expect(r.stdout.toString()).toMatch(/Usage: sandgate sandbox cp \[options\] <src> <dest>/);
  });
});
