// The programs `sandbox cp` runs in the workload (src/gateway/files/scripts.ts),
// run here on this host against a temporary directory standing in for /sandbox:
// with busybox (the default workload image's tools) and with the host's own sh and
// GNU tools (a custom image). Symlinks out (to /etc, /proc/self/root), missing
// paths, odd names, the atomic single-file write. The real thing, in a container
// as the workload's user, is test/integration/sandbox-cp.test.ts.
import { spawn } from "node:child_process";
import { existsSync, lstatSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, readlinkSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DOWNLOAD, MARKER, STAT, UPLOAD_FILE, UPLOAD_TAR, explainExit, parseStat, scriptArgv } from "../../../src/gateway/files/scripts.js";
import { readTar } from "../../../src/files/tar-stream.js";
import { archive, chunks } from "../../support/tar-craft.js";

const BUSYBOX = ["/bin/busybox", "/usr/bin/busybox"].find((p) => existsSync(p));
const APPLETS = ["sh", "realpath", "stat", "tar", "mktemp", "cat", "chmod", "mv", "rm"];

let dir: string;
let root: string;
/** Outside the stand-in workspace: where the escapes lead; it must stay as it is. */
let decoy: string;
let busyboxBin: string;

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "sg-scripts-"));
  busyboxBin = join(dir, "bin");
  mkdirSync(busyboxBin);
  for (const a of APPLETS) symlinkSync(BUSYBOX!, join(busyboxBin, a));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

interface Ran {
  code: number | null;
  stdout: Buffer;
  stderr: string;
}

function runScript(tools: "busybox" | "host", script: string, args: string[], stdin: Buffer = Buffer.alloc(0)): Promise<Ran> {
  const [cmd, ...argv] = scriptArgv(script, root, args);
  const env = tools === "busybox" ? { PATH: busyboxBin } : { PATH: "/usr/local/bin:/usr/bin:/bin" };
  return new Promise((resolve, reject) => {
    const p = spawn(tools === "busybox" ? join(busyboxBin, cmd!) : cmd!, argv, { env, stdio: ["pipe", "pipe", "pipe"] });
    const out: Buffer[] = [];
    let err = "";
    p.stdout.on("data", (c: Buffer) => out.push(c));
    p.stderr.on("data", (c: Buffer) => (err += c.toString()));
    p.on("error", reject);
    p.on("close", (code) => resolve({ code, stdout: Buffer.concat(out), stderr: err }));
    p.stdin.on("error", () => undefined);
    p.stdin.end(stdin);
  });
}

async function tarNames(b: Buffer): Promise<string[]> {
  expect(b.subarray(0, MARKER.length).toString()).toBe(MARKER);
  const names: string[] = [];
  for await (const e of readTar(chunks(b.subarray(MARKER.length), 4096))) names.push(`${e.header.name}:${e.header.type}`);
  return names;
}

describe.each(["busybox", "host"] as const)("with %s tools", (tools) => {
  beforeAll(() => {
    root = join(dir, `${tools}-sandbox`);
    decoy = join(dir, `${tools}-decoy`);
    mkdirSync(decoy);
    writeFileSync(join(decoy, "passwd"), "decoy");
    mkdirSync(join(root, "d", "sub"), { recursive: true });
    writeFileSync(join(root, "d", "f.txt"), "hello");
    writeFileSync(join(root, "file"), "12345");
    symlinkSync(decoy, join(root, "evil"));
    symlinkSync("/proc/self/root", join(root, "link"));
    symlinkSync(join(root, "d"), join(root, "inside"));
    symlinkSync(join(decoy, "no-such-file"), join(root, "dangling"));
    mkdirSync(join(root, "nl\n"));
    writeFileSync(join(root, "-dash"), "-");
  });

  it("download: a directory, as a tar whose top is its name, after the marker", async () => {
    const r = await runScript(tools, DOWNLOAD, [join(root, "d")]);
    expect(r.code).toBe(0);
    expect((await tarNames(r.stdout)).sort()).toEqual(["d/:directory", "d/f.txt:file", "d/sub/:directory"]);
  });

  it("download: a symlink inside the workspace is followed; the tar is named after its target", async () => {
    const r = await runScript(tools, DOWNLOAD, [join(root, "inside")]);
    expect(r.code).toBe(0);
    expect((await tarNames(r.stdout))[0]).toBe("d/:directory");
  });

  it.each([
    ["evil", ""],
    ["evil/passwd", "/passwd"],
    ["link", "/"],
    ["link/etc/passwd", "/etc/passwd"],
    ["evil/no/such/deeper", ""],
  ])("download refuses %s: it resolves outside (exit 4, the resolved path on stderr, nothing read)", async (rel, resolved) => {
    const r = await runScript(tools, DOWNLOAD, [join(root, rel)]);
    expect(r.code).toBe(4);
    expect(r.stderr).toBe(rel.startsWith("evil") ? decoy + resolved : resolved);
    expect(r.stdout.length).toBe(0);
  });

  it("download: a missing path (or a dangling symlink) is exit 3", async () => {
    expect((await runScript(tools, DOWNLOAD, [join(root, "missing")])).code).toBe(3);
    expect((await runScript(tools, DOWNLOAD, [join(root, "d", "missing", "deeper")])).code).toBe(3);
    expect((await runScript(tools, DOWNLOAD, [join(root, "dangling")])).code).toBe(3);
  });

  it("download: names ending in a newline or starting with '-' survive", async () => {
    expect(await tarNames((await runScript(tools, DOWNLOAD, [join(root, "nl\n")])).stdout)).toEqual(["nl\n/:directory"]);
    expect(await tarNames((await runScript(tools, DOWNLOAD, [join(root, "-dash")])).stdout)).toEqual(["-dash:file"]);
  });

  it("stat: type, mode and size of the resolved path", async () => {
    const r = await runScript(tools, STAT, [join(root, "file")]);
    expect(r.code).toBe(0);
    expect(parseStat(r.stdout.subarray(MARKER.length).toString())).toEqual({ type: "file", mode: lstatSync(join(root, "file")).mode & 0o7777, size: 5 });
    const d = await runScript(tools, STAT, [join(root, "inside")]);
    expect(parseStat(d.stdout.subarray(MARKER.length).toString())?.type).toBe("directory");
    expect((await runScript(tools, STAT, [join(root, "evil")])).code).toBe(4);
  });

  it("upload of a tar: into an existing directory only, never through a symlink out", async () => {
    const tar = archive([{ name: "new.txt", data: "n", mode: 0o640 }]);
    const r = await runScript(tools, UPLOAD_TAR, [join(root, "d", "sub")], tar);
    expect(r.code).toBe(0);
    expect(r.stdout.toString()).toBe(MARKER);
    expect(readFileSync(join(root, "d", "sub", "new.txt"), "utf8")).toBe("n");
    expect(lstatSync(join(root, "d", "sub", "new.txt")).mode & 0o777).toBe(0o640);
    expect((await runScript(tools, UPLOAD_TAR, [join(root, "file")], tar)).code).toBe(5);
    expect((await runScript(tools, UPLOAD_TAR, [join(root, "evil")], tar)).code).toBe(4);
    expect((await runScript(tools, UPLOAD_TAR, [join(root, "link", decoy)], tar)).code).toBe(4);
    expect(readdirSync(decoy)).toEqual(["passwd"]);
  });

  it("upload of one file: written whole with its mode, or not at all", async () => {
    const target = join(root, "one.txt");
    const ok = await runScript(tools, UPLOAD_FILE, [target, "0751", "3"], Buffer.from("abc"));
    expect(ok.code).toBe(0);
    expect(readFileSync(target, "utf8")).toBe("abc");
    expect(lstatSync(target).mode & 0o777).toBe(0o751);
    // Fewer bytes than announced: the old content stays, no temporary file is left.
    const short = await runScript(tools, UPLOAD_FILE, [target, "0644", "10"], Buffer.from("xyz"));
    expect(short.code).toBe(8);
    expect(readFileSync(target, "utf8")).toBe("abc");
    expect((await runScript(tools, DOWNLOAD, [join(root)])).stdout.includes(Buffer.from(".sandgate-cp."))).toBe(false);
  });

  it("upload of one file: a directory in the way, a parent missing or outside, a symlink out: refused", async () => {
    expect((await runScript(tools, UPLOAD_FILE, [join(root, "d"), "0644", "1"], Buffer.from("x"))).code).toBe(6);
    expect((await runScript(tools, UPLOAD_FILE, [join(root, "nope", "x"), "0644", "1"], Buffer.from("x"))).code).toBe(3);
    expect((await runScript(tools, UPLOAD_FILE, [join(root, "evil", "x"), "0644", "1"], Buffer.from("x"))).code).toBe(4);
    // /sandbox/pw -> (outside)/passwd: not followed out.
    symlinkSync(join(decoy, "passwd"), join(root, `pw-${tools}`));
    const r = await runScript(tools, UPLOAD_FILE, [join(root, `pw-${tools}`), "0644", "1"], Buffer.from("x"));
    expect([r.code, r.stderr]).toEqual([4, join(decoy, "passwd")]);
    expect(readlinkSync(join(root, `pw-${tools}`))).toBe(join(decoy, "passwd"));
    expect(readdirSync(decoy)).toEqual(["passwd"]);
    expect(readFileSync(join(decoy, "passwd"), "utf8")).toBe("decoy");
  });

  it("upload of one file: a symlink inside is followed, a dangling one is replaced by the file", async () => {
    symlinkSync(join(root, "file"), join(root, `to-file-${tools}`));
    expect((await runScript(tools, UPLOAD_FILE, [join(root, `to-file-${tools}`), "0644", "2"], Buffer.from("zz"))).code).toBe(0);
    expect(readFileSync(join(root, "file"), "utf8")).toBe("zz");
    symlinkSync(join(decoy, "never"), join(root, `dang-${tools}`));
    expect((await runScript(tools, UPLOAD_FILE, [join(root, `dang-${tools}`), "0644", "1"], Buffer.from("d"))).code).toBe(0);
    expect(lstatSync(join(root, `dang-${tools}`)).isFile()).toBe(true);
    expect(existsSync(join(decoy, "never"))).toBe(false);
  });
});

describe("explainExit", () => {
  const ctx = { sandbox: "s", path: "/sandbox/x", shown: '"/sandbox/x"', stderr: "", stdout: "", op: "download" as const };
  it.each([
    [3, "not_found", 'no such file or directory in sandbox "s": "/sandbox/x"'],
    [5, "invalid_request", '"/sandbox/x" is not a directory in sandbox "s"'],
    [6, "invalid_request", '"/sandbox/x" is a directory in sandbox "s"; a single-file upload names the file to write'],
    [126, "not_allowed", "sandbox cp needs sh, realpath, stat and tar in the workload's image (the default image has them)"],
    [2, "internal", 'tar in sandbox "s" failed (exit 2)'],
  ])("exit %i → %s", (exit, code, message) => {
    expect(explainExit(exit, ctx)).toEqual({ code, message });
  });

  it("shows what the workload said on one line, bounded, control characters removed", () => {
    const f = explainExit(4, { ...ctx, stderr: "/etc\n\u001b[31mred" });
    expect(f.message).toBe('path "/sandbox/x" resolves to "/etc [31mred", outside /sandbox: a symlink may not lead out of the workspace');
    const long = explainExit(1, { ...ctx, stderr: "x".repeat(10_000) });
    expect(long.message.length).toBeLessThan(400);
    const path = explainExit(1, { ...ctx, stderr: `tar: deep/${"a/".repeat(2000)}b/b: File name too long\n` });
    expect(path.message).toBe(`tar in sandbox "s" failed (exit 1): tar: deep/${"a/".repeat(17)}a…${"a/".repeat(13)}b/b: File name too long`);
  });
});
