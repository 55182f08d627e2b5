// The host side of `sandbox cp` (src/cli/cp-local.ts): writing a tar stream under a
// local directory never leaves it, whatever the stream says (it comes from a
// sandbox: a hostile workload may have made it, and a gateway bug may have let it
// through), and never follows a symlink, one the stream made or one already on
// disk. And packing a local tree: modes, symlinks as symlinks, odd names, special
// files skipped.
import { execFile, execFileSync } from "node:child_process";
import { existsSync, lstatSync, mkdirSync, mkdtempSync, readFileSync, readlinkSync, readdirSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { packLocal, unpackLocal } from "../../../src/cli/cp-local.js";
import { CopyRefused } from "../../../src/files/members.js";
import { readTar } from "../../../src/files/tar-stream.js";
import { archive, chunks, collect, type CraftMember } from "../../support/tar-craft.js";

const run = promisify(execFile);
let dir: string;
let n = 0;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "sg-cp-local-"));
});
// rm -rf: node's rmSync recurses, and the deep trees here are 2000 levels.
afterAll(() => execFileSync("rm", ["-rf", dir]));

/** A fresh destination directory, and an "outside" directory beside it that nothing may touch. */
function fresh(): { dest: string; outside: string } {
  n++;
  const dest = join(dir, `dest${n}`);
  const outside = join(dir, `outside${n}`);
  mkdirSync(dest);
  mkdirSync(outside);
  writeFileSync(join(outside, "keep"), "original");
  return { dest, outside };
}

async function refused(members: CraftMember[], opts: { dest: string; rename?: string }): Promise<string> {
  try {
    await unpackLocal(chunks(archive(members), 100), { root: opts.dest, rename: opts.rename ?? "top" });
  } catch (err) {
    expect(err).toBeInstanceOf(CopyRefused);
    return (err as Error).message;
  }
  throw new Error("expected a refusal");
}

describe("unpackLocal: a hostile stream stays under the destination", () => {
  it.each<[string, CraftMember[], string]>([
    ["a ../ member", [{ name: "top/", type: "5" }, { name: "top/../../x", data: "x" }], 'member "top/../../x" contains "..": members must stay inside the destination'],
    ["an absolute member", [{ name: "/etc/x", data: "x" }], 'member "/etc/x" has an absolute name; members must be relative to the destination'],
    ["a member outside the one root", [{ name: "top/", type: "5" }, { name: "other", data: "x" }], 'member "other" is not under "top", the path that was asked for'],
    ["a symlink then a file through it", [{ name: "top/", type: "5" }, { name: "top/l", type: "2", linkname: "../../outside" }, { name: "top/l/keep", data: "pwned" }], 'member "top/l/keep" goes through the symbolic link "top/l" of the same archive; a member is never written through a symlink'],
    ["a hard link to outside", [{ name: "top/", type: "5" }, { name: "top/h", type: "1", linkname: "../outside/keep" }], 'hard link target "../outside/keep" contains "..": members must stay inside the destination'],
    ["a hard link to a path outside the root", [{ name: "top/", type: "5" }, { name: "top/h", type: "1", linkname: "etc/passwd" }], 'hard link target "etc/passwd" is not under "top", the path that was asked for'],
  ])("%s is refused, and nothing outside changes", async (_what, members, message) => {
    const { dest, outside } = fresh();
    expect(await refused(members, { dest })).toBe(message);
    expect(readFileSync(join(outside, "keep"), "utf8")).toBe("original");
    expect(readdirSync(outside)).toEqual(["keep"]);
  });

  it("never writes through a symlink already in the destination (a parent of a member)", async () => {
    const { dest, outside } = fresh();
    symlinkSync(outside, join(dest, "top"));
    expect(await refused([{ name: "top/", type: "5" }, { name: "top/keep", data: "pwned" }], { dest })).toBe('cannot replace "top" (a symbolic link) with a directory');
    mkdirSync(join(dest, "real"));
    symlinkSync(outside, join(dest, "real", "sub"));
    expect(await refused([{ name: "top/", type: "5" }, { name: "top/sub/keep", data: "pwned" }], { dest, rename: "real" })).toBe(
      'member "real/sub/keep" would be written through "real/sub", which is a symbolic link; nothing is written through a symlink',
    );
    expect(readFileSync(join(outside, "keep"), "utf8")).toBe("original");
  });

  it("a file member replaces a symlink in its place; it never writes to where the symlink pointed", async () => {
    const { dest, outside } = fresh();
    symlinkSync(join(outside, "keep"), join(dest, "top"));
    await unpackLocal(chunks(archive([{ name: "top", data: "new" }])), { root: dest, rename: "top" });
    expect(lstatSync(join(dest, "top")).isFile()).toBe(true);
    expect(readFileSync(join(dest, "top"), "utf8")).toBe("new");
    expect(readFileSync(join(outside, "keep"), "utf8")).toBe("original");
  });

  it("a hard link to a file of the same copy works; to a symlink or a directory it is refused", async () => {
    const { dest } = fresh();
    await unpackLocal(chunks(archive([{ name: "top/", type: "5" }, { name: "top/a", data: "A" }, { name: "top/b", type: "1", linkname: "top/a" }])), { root: dest, rename: "top" });
    expect(lstatSync(join(dest, "top/b")).ino).toBe(lstatSync(join(dest, "top/a")).ino);
    const other = fresh();
    expect(await refused([{ name: "top/", type: "5" }, { name: "top/l", type: "2", linkname: "/etc/passwd" }, { name: "top/h", type: "1", linkname: "top/l" }], { dest: other.dest })).toBe(
      'hard link target "top/l" replaces a symbolic link made earlier in the same archive',
    );
    expect(await refused([{ name: "top/", type: "5" }, { name: "top/d/", type: "5" }, { name: "top/h", type: "1", linkname: "top/d" }], { dest: fresh().dest })).toBe(
      'hard link "top/h" names "top/d", which is not a file under the destination',
    );
  });

  it("symlinks arrive as symlinks, whatever they point at, and are never followed", async () => {
    const { dest } = fresh();
    await unpackLocal(chunks(archive([{ name: "top/", type: "5" }, { name: "top/etc", type: "2", linkname: "/etc" }, { name: "top/rel", type: "2", linkname: "../../x" }])), { root: dest, rename: "top" });
    expect(readlinkSync(join(dest, "top/etc"))).toBe("/etc");
    expect(readlinkSync(join(dest, "top/rel"))).toBe("../../x");
  });

  it("modes are kept (0755 stays executable, 0600 stays 0600), set-id bits dropped, a read-only directory filled then closed", async () => {
    const { dest } = fresh();
    const s = await unpackLocal(
      chunks(archive([
        { name: "top/", type: "5", mode: 0o755 },
        { name: "top/run.sh", data: "#!/bin/sh\necho ok\n", mode: 0o755 },
        { name: "top/key", data: "k", mode: 0o600 },
        { name: "top/suid", data: "s", mode: 0o6755 },
        { name: "top/ro/", type: "5", mode: 0o555 },
        { name: "top/ro/inside", data: "i", mode: 0o444 },
        { name: "top/fifo", type: "6" },
        { name: "top/dev", type: "3" },
      ])),
      { root: dest, rename: "copy" },
    );
    expect(s).toEqual({ entries: 6, bytes: 21, skipped: 2, rootType: "directory" });
    const mode = (p: string): string => (lstatSync(join(dest, "copy", p)).mode & 0o7777).toString(8);
    expect([mode("run.sh"), mode("key"), mode("suid"), mode("ro"), mode("ro/inside")]).toEqual(["755", "600", "755", "555", "444"]);
    expect((await run(join(dest, "copy", "run.sh"))).stdout).toBe("ok\n");
    expect(existsSync(join(dest, "copy", "fifo"))).toBe(false);
  });

  it("a directory onto a file the user named is refused; an empty stream is an error", async () => {
    const { dest } = fresh();
    await expect(unpackLocal(chunks(archive([{ name: "d/", type: "5" }])), { root: dest, rename: "f", fileOnly: true })).rejects.toThrow(/^cannot copy a directory onto the file/);
    await expect(unpackLocal(chunks(archive([])), { root: dest, rename: "f" })).rejects.toThrow("the archive is empty");
  });

  it("a deep tree (1500 levels) and a return to a shallower branch afterwards", async () => {
    const { dest } = fresh();
    const deep = Array.from({ length: 1500 }, () => "a").join("/");
    const members: CraftMember[] = [{ name: "top/", type: "5" }];
    for (let i = 1; i <= 1500; i++) members.push({ name: `top/${deep.slice(0, 2 * i - 1)}/`, type: "5", gnuLong: true, magic: "gnu" });
    members.push({ name: `top/${deep}/leaf`, data: "leaf", gnuLong: true, magic: "gnu" }, { name: "top/b/c", data: "c" });
    const s = await unpackLocal(chunks(archive(members), 65536), { root: dest, rename: "top" });
    expect(s.entries).toBe(1503);
    expect(readFileSync(join(dest, "top", "b", "c"), "utf8")).toBe("c");
    expect(readFileSync(Buffer.from(`${dest}/top/${deep}/leaf`), "utf8")).toBe("leaf");
  });

  it("a name the local system cannot hold (past PATH_MAX with the destination) is one clear line", async () => {
    const { dest } = fresh();
    const deep = Array.from({ length: 2040 }, () => "a").join("/");
    const members: CraftMember[] = [{ name: "top/", type: "5" }, { name: `top/${deep}/f`, data: "x", gnuLong: true, magic: "gnu" }];
    expect(await refused(members, { dest })).toMatch(/^cannot write "top\/a\/a.*…" under ".*": the path is too long for this system \(ENAMETOOLONG\)$/);
  });

  it("names that are not UTF-8, or hold a newline, arrive byte for byte", async () => {
    const { dest } = fresh();
    const odd = Buffer.from([0x6e, 0x0a, 0xff]).toString("latin1");
    await unpackLocal(chunks(archive([{ name: "top/", type: "5" }, { name: `top/${odd}`, data: "z" }])), { root: dest, rename: "top" });
    const names = readdirSync(join(dest, "top"), { encoding: "buffer" });
    expect(names).toEqual([Buffer.from([0x6e, 0x0a, 0xff])]);
  });
});

describe("packLocal", () => {
  it("packs a tree: modes, symlinks as symlinks, odd names; sockets and FIFOs skipped", async () => {
    const src = join(dir, "src");
    mkdirSync(join(src, "sub"), { recursive: true });
    writeFileSync(join(src, "run.sh"), "#!/bin/sh\n", { mode: 0o755 });
    writeFileSync(join(src, "key"), "k", { mode: 0o600 });
    writeFileSync(join(src, "sub", "nl\nname"), "n");
    symlinkSync("/etc/passwd", join(src, "link"));
    await run("mkfifo", [join(src, "fifo")]);
    const packed = packLocal(src, "top");
    const got: Record<string, [string, string, string]> = {};
    for await (const e of readTar(chunks(await collect(packed.stream), 1000))) got[e.header.name] = [e.header.type, e.header.mode.toString(8), e.header.linkname];
    expect(got).toEqual({
      "top/": ["directory", (lstatSync(src).mode & 0o7777).toString(8), ""],
      "top/run.sh": ["file", "755", ""],
      "top/key": ["file", "600", ""],
      "top/sub/": ["directory", (lstatSync(join(src, "sub")).mode & 0o7777).toString(8), ""],
      "top/sub/nl\nname": ["file", "644", ""],
      "top/link": ["symlink", "777", "/etc/passwd"],
    });
    expect(packed.stats).toMatchObject({ entries: 6, bytes: 12, skipped: ["top/fifo"] });
  });

  it("with a null top packs a directory's contents only; a missing path is a clear error", async () => {
    const src = join(dir, "src2");
    mkdirSync(src);
    writeFileSync(join(src, "a"), "a");
    const names: string[] = [];
    for await (const e of readTar(packLocal(src, null).stream)) names.push(e.header.name);
    expect(names).toEqual(["a"]);
    await expect(collect(packLocal(join(dir, "missing"), "x").stream)).rejects.toThrow(/^no such file or directory: ".*missing"$/);
  });
});
