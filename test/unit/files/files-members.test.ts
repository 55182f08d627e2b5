// What a tar member may be (src/files/members.ts) and the stream that re-encodes
// only what passed (src/files/sanitize.ts): every hostile member — "..", absolute
// names, a symlink then a member through it, hard links out, devices, set-id bits,
// sizes over the limit, floods of metadata — refused or neutralised, each with
// its one-line message; properties over arbitrary names (fast-check).
import { posix } from "node:path";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { CopyRefused, MemberGuard, checkMemberName, type GuardOptions } from "../../../src/files/members.js";
import { sanitizeTar } from "../../../src/files/sanitize.js";
import type { TarHeader } from "../../../src/files/tar-format.js";
import { readTar } from "../../../src/files/tar-stream.js";
import { archive, chunks, collect, rawHeader, type CraftMember } from "../../support/tar-craft.js";

const LIMITS = { maxEntries: 1000, maxBytes: 1 << 20, symlinkMemoryBytes: 1 << 16 };
const h = (name: string, type: TarHeader["type"] = "file", more: Partial<TarHeader> = {}): TarHeader => ({ name, type, mode: 0o644, size: 0, mtime: 0, linkname: "", ...more });
const guard = (opts: Partial<GuardOptions> = {}): MemberGuard => new MemberGuard({ limits: LIMITS, ...opts });

function refusal(fn: () => unknown): CopyRefused {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(CopyRefused);
    expect((err as Error).message.split("\n")).toHaveLength(1);
    return err as CopyRefused;
  }
  throw new Error("expected a CopyRefused");
}

describe("checkMemberName", () => {
  it.each([
    ["a", "a"],
    ["./a", "a"],
    ["./a//b/", "a/b"],
    ["a/./b", "a/b"],
    ["./", ""],
    [".", ""],
    ["...", "..."],
    ["a..b/..c", "a..b/..c"],
    ["new\nline", "new\nline"],
  ])("%j → %j", (raw, name) => {
    expect(checkMemberName(raw)).toEqual({ ok: true, name });
  });

  it.each([
    ["/abs", 'member "/abs" has an absolute name; members must be relative to the destination'],
    ["/etc/passwd", 'member "/etc/passwd" has an absolute name; members must be relative to the destination'],
    ["../x", 'member "../x" contains "..": members must stay inside the destination'],
    ["a/../../x", 'member "a/../../x" contains "..": members must stay inside the destination'],
    ["a/..", 'member "a/.." contains "..": members must stay inside the destination'],
    ["./../x", 'member "./../x" contains "..": members must stay inside the destination'],
    [`a/${"s".repeat(256)}`, `member "a/${"s".repeat(198)}…" has a name segment of 256 bytes; the limit is 255`],
  ])("refuses %j", (raw, message) => {
    expect(checkMemberName(raw)).toEqual({ ok: false, error: message });
  });

  it("refuses names over 4096 bytes", () => {
    expect(checkMemberName("a/".repeat(2049))).toMatchObject({ ok: false, error: expect.stringMatching(/has a name of 4098 bytes; the limit is 4096$/) });
  });

  const segment = fc.constantFrom("a", "b", "..", ".", "", "...", "x\ny", "\u00ff");
  it("whatever passes stays under the destination when joined to it (oracle: path.posix)", () => {
    fc.assert(
      fc.property(fc.boolean(), fc.array(segment, { maxLength: 8 }), (abs, segs) => {
        const raw = (abs ? "/" : "") + segs.join("/");
        const r = checkMemberName(raw);
        expect(r.ok).toBe(!raw.startsWith("/") && !segs.includes(".."));
        if (!r.ok) return;
        const joined = posix.join("/dest", r.name);
        expect(joined === "/dest" || joined.startsWith("/dest/")).toBe(true);
        expect(r.name.split("/")).not.toContain("..");
        expect(checkMemberName(r.name)).toEqual(r);
      }),
      { numRuns: 3000 },
    );
  });
});

describe("MemberGuard: an upload (no root)", () => {
  it("keeps permission bits, drops set-uid and set-gid, keeps a directory's sticky bit", () => {
    const g = guard();
    expect(g.admit(h("run.sh", "file", { mode: 0o755 }))).toEqual({ action: "copy", header: h("run.sh", "file", { mode: 0o755 }) });
    expect(g.admit(h("key", "file", { mode: 0o600 }))).toMatchObject({ header: { mode: 0o600 } });
    expect(g.admit(h("suid", "file", { mode: 0o4755 }))).toMatchObject({ header: { mode: 0o755 } });
    expect(g.admit(h("sgid", "file", { mode: 0o2711 }))).toMatchObject({ header: { mode: 0o711 } });
    expect(g.admit(h("sticky-file", "file", { mode: 0o1644 }))).toMatchObject({ header: { mode: 0o644 } });
    expect(g.admit(h("tmp", "directory", { mode: 0o1777 }))).toMatchObject({ header: { mode: 0o1777 } });
    expect(g.admit(h("sgid-dir", "directory", { mode: 0o2775 }))).toMatchObject({ header: { mode: 0o775 } });
  });

  it("skips FIFOs, device nodes and the archive's root entry, counting them", () => {
    const g = guard();
    expect(g.admit(h("p", "fifo"))).toEqual({ action: "skip", reason: "a FIFO is not copied" });
    expect(g.admit(h("c", "char"))).toEqual({ action: "skip", reason: "a device node is not copied" });
    expect(g.admit(h("b", "block"))).toEqual({ action: "skip", reason: "a device node is not copied" });
    expect(g.admit(h("./", "directory", { mode: 0o777 }))).toEqual({ action: "skip", reason: "the archive's root entry" });
    expect([g.entries, g.skipped]).toEqual([4, 4]);
  });

  it("refuses absolute and '..' names, and hard links that point out", () => {
    expect(refusal(() => guard().admit(h("../x"))).message).toBe('member "../x" contains "..": members must stay inside the destination');
    expect(refusal(() => guard().admit(h("/abs"))).message).toBe('member "/abs" has an absolute name; members must be relative to the destination');
    expect(refusal(() => guard().admit(h("hl", "hardlink", { linkname: "../../etc/passwd" }))).message).toBe('hard link target "../../etc/passwd" contains "..": members must stay inside the destination');
    expect(refusal(() => guard().admit(h("hl", "hardlink", { linkname: "/etc/shadow" }))).message).toBe('hard link target "/etc/shadow" has an absolute name; members must be relative to the destination');
    expect(refusal(() => guard().admit(h("hl", "hardlink", { linkname: "./" }))).message).toBe('hard link "hl" points at the destination itself');
    expect(guard().admit(h("hl", "hardlink", { linkname: "./a/b" }))).toMatchObject({ header: { linkname: "a/b" } });
  });

  it("refuses a member, or a hard link's target, through a symlink the archive made, and one that replaces it", () => {
    const g = guard();
    g.admit(h("evil", "symlink", { linkname: "/etc" }));
    expect(refusal(() => g.admit(h("evil/passwd"))).message).toBe('member "evil/passwd" goes through the symbolic link "evil" of the same archive; a member is never written through a symlink');
    expect(refusal(() => g.admit(h("./evil//cron.d/x"))).message).toMatch(/goes through the symbolic link "evil"/);
    expect(refusal(() => g.admit(h("evil", "directory"))).message).toBe('member "evil" replaces a symbolic link made earlier in the same archive');
    expect(refusal(() => g.admit(h("hl", "hardlink", { linkname: "evil/shadow" }))).message).toBe('hard link target "evil/shadow" goes through the symbolic link "evil" of the same archive; a member is never written through a symlink');
    g.admit(h("d/deep/link", "symlink", { linkname: "../../.." }));
    expect(refusal(() => g.admit(h("d/deep/link/x"))).message).toMatch(/goes through the symbolic link "d\/deep\/link"/);
    // Names that merely start like the symlink are not inside it.
    expect(g.admit(h("evilx/ok"))).toMatchObject({ action: "copy" });
    expect(g.admit(h("d/deep/linkx"))).toMatchObject({ action: "copy" });
  });

  it("refuses a symlink with an empty target", () => {
    expect(refusal(() => guard().admit(h("l", "symlink", { linkname: "" }))).message).toBe('symbolic link "l" has an empty or over-long target');
  });

  it("keeps its limits, naming the setting: members, bytes, symlink memory", () => {
    const names = { maxEntries: "SANDGATE_CP_MAX_ENTRIES", maxBytes: "SANDGATE_CP_MAX_BYTES", symlinkMemoryBytes: "SANDGATE_CP_SYMLINK_MEMORY" };
    const g = new MemberGuard({ limits: { maxEntries: 2, maxBytes: 100, symlinkMemoryBytes: 200 }, names });
    g.admit(h("a"));
    g.admit(h("b"));
    const e = refusal(() => g.admit(h("c")));
    expect([e.code, e.message]).toEqual(["too_large", "more than 2 members in one transfer; the limit is 2 (SANDGATE_CP_MAX_ENTRIES)"]);
    const big = refusal(() => new MemberGuard({ limits: { maxEntries: 9, maxBytes: 100, symlinkMemoryBytes: 200 }, names }).admit(h("big", "file", { size: 60 }), 50));
    expect([big.code, big.message]).toEqual(["too_large", 'member "big" is 60 bytes, past the limit of 100 bytes per transfer (SANDGATE_CP_MAX_BYTES)']);
    const links = new MemberGuard({ limits: { maxEntries: 99, maxBytes: 100, symlinkMemoryBytes: 150 }, names });
    links.admit(h("l1", "symlink", { linkname: "x" }));
    links.admit(h("l2", "symlink", { linkname: "x" }));
    expect(refusal(() => links.admit(h("l3", "symlink", { linkname: "x" }))).message).toBe("too many symbolic links in one transfer (their names pass 150 bytes (SANDGATE_CP_SYMLINK_MEMORY))");
  });
});

describe("MemberGuard: a download (one root, renamed)", () => {
  it("renames the first member's top-level name and refuses members under any other", () => {
    const g = guard({ root: { rename: "copy" } });
    expect(g.admit(h("real/", "directory"))).toMatchObject({ header: { name: "copy" } });
    expect(g.admit(h("real/a/b"))).toMatchObject({ header: { name: "copy/a/b" } });
    expect(refusal(() => g.admit(h("other/x"))).message).toBe('member "other/x" is not under "real", the path that was asked for');
    expect(refusal(() => g.admit(h("./"))).message).toBe('member "./" is not under the path that was asked for');
    expect(g.admit(h("real/h", "hardlink", { linkname: "real/a/b" }))).toMatchObject({ header: { name: "copy/h", linkname: "copy/a/b" } });
    expect(refusal(() => g.admit(h("real/h2", "hardlink", { linkname: "etc/passwd" }))).message).toBe('hard link target "etc/passwd" is not under "real", the path that was asked for');
  });

  it("with an empty rename copies the contents only (the top entry itself is skipped)", () => {
    const g = guard({ root: { rename: "" } });
    expect(g.admit(h("d", "directory"))).toMatchObject({ action: "skip" });
    expect(g.admit(h("d/x"))).toMatchObject({ header: { name: "x" } });
    expect(g.admit(h("d/sub/y"))).toMatchObject({ header: { name: "sub/y" } });
  });

  it("a single file is its own root", () => {
    const g = guard({ root: { rename: "renamed.txt" } });
    expect(g.admit(h("f.txt", "file", { size: 3 }))).toMatchObject({ header: { name: "renamed.txt", size: 3 } });
    expect(refusal(() => g.admit(h("f.txt/x"))).message).toBe('member "f.txt/x" follows "f.txt", a single file: nothing may follow it');
  });
});

async function sanitized(members: CraftMember[], opts: Partial<Parameters<typeof sanitizeTar>[1]> = {}) {
  const s = sanitizeTar(chunks(archive(members), 333), { limits: LIMITS, ...opts });
  const out = await collect(s.stream);
  const got: (TarHeader & { data: string })[] = [];
  for await (const e of readTar(chunks(out, 1000))) got.push({ ...e.header, data: (await collect(e.data)).toString() });
  return { got, stats: s.stats, out };
}

async function sanitizeRefusal(source: AsyncIterable<Buffer>, opts: Partial<Parameters<typeof sanitizeTar>[1]> = {}): Promise<CopyRefused> {
  try {
    await collect(sanitizeTar(source, { limits: LIMITS, ...opts }).stream);
  } catch (err) {
    expect(err).toBeInstanceOf(CopyRefused);
    return err as CopyRefused;
  }
  throw new Error("expected a refusal");
}

describe("sanitizeTar", () => {
  it("re-encodes only what the guard admitted, data intact, ownership dropped", async () => {
    const { got, stats } = await sanitized([
      { name: "./", type: "5", mode: 0o777 },
      { name: "d/", type: "5", mode: 0o755 },
      { name: "d/run.sh", data: "#!/bin/sh\n", mode: 0o4755 },
      { name: "d/fifo", type: "6" },
      { name: "d/l", type: "2", linkname: "run.sh" },
    ]);
    expect(got.map((e) => [e.name, e.type, e.mode, e.data])).toEqual([
      ["d/", "directory", 0o755, ""],
      ["d/run.sh", "file", 0o755, "#!/bin/sh\n"],
      ["d/l", "symlink", 0o777, ""],
    ]);
    expect(stats).toMatchObject({ entries: 5, skipped: 2, dataBytes: 10 });
  });

  it("writes no uid, gid or owner names, whatever came in", async () => {
    const { out } = await sanitized([{ name: "f", data: "x" }]);
    expect(out.subarray(108, 124).toString("latin1")).toBe("0000000\u00000000000\u0000");
    expect(out.subarray(265, 329).every((b) => b === 0)).toBe(true);
  });

  it("refuses a symlink member followed by a file through it, before writing that file", async () => {
    const e = await sanitizeRefusal(chunks(archive([{ name: "evil", type: "2", linkname: "/etc" }, { name: "evil/passwd", data: "root::0:0::/:/bin/sh\n" }])));
    expect(e.message).toBe('member "evil/passwd" goes through the symbolic link "evil" of the same archive; a member is never written through a symlink');
  });

  it.each([
    [[{ name: "../x", data: "x" }], 'member "../x" contains "..": members must stay inside the destination'],
    [[{ name: "/abs", data: "x" }], 'member "/abs" has an absolute name; members must be relative to the destination'],
    [[{ name: "hl", type: "1", linkname: "../outside" }], 'hard link target "../outside" contains "..": members must stay inside the destination'],
    [[{ name: "x", pax: { path: "../../etc/cron.d/x" }, data: "x" }], 'member "../../etc/cron.d/x" contains "..": members must stay inside the destination'],
    [[{ name: `${"a".repeat(190)}/../../x`, gnuLong: true, magic: "gnu" as const }], `member "${"a".repeat(190)}/../../x" contains "..": members must stay inside the destination`],
  ])("refuses %j", async (members, message) => {
    expect((await sanitizeRefusal(chunks(archive(members)))).message).toBe(message);
  });

  it("refuses a declared size past the limit before reading the data", async () => {
    let pulled = 0;
    const tar = archive([{ name: "huge", data: Buffer.alloc(64 * 1024) }]);
    async function* source(): AsyncGenerator<Buffer> {
      for await (const c of chunks(tar, 512)) {
        pulled += c.length;
        yield c;
      }
    }
    const e = await sanitizeRefusal(source(), { limits: { ...LIMITS, maxBytes: 10_000 }, names: { maxBytes: "SANDGATE_CP_MAX_BYTES" } });
    expect(e.message).toBe('member "huge" is 65536 bytes, past the limit of 10000 bytes per transfer (SANDGATE_CP_MAX_BYTES)');
    expect(pulled).toBe(512);
  });

  it("counts every byte of the stream: a flood of metadata records ends at the limit", async () => {
    const paxRecord = Buffer.concat([rawHeader({ name: "g", type: "g" }, 512), Buffer.from(`${"512 comment=".padEnd(511, "x")}\n`)]);
    async function* flood(): AsyncGenerator<Buffer> {
      for (;;) yield paxRecord;
    }
    const e = await sanitizeRefusal(flood(), { limits: { ...LIMITS, maxBytes: 1 << 20 } });
    expect([e.code, e.message]).toEqual(["too_large", "the transfer is over the limit of 1048576 bytes"]);
  });

  it("defers a read-only directory's mode until the stream has left it", async () => {
    const { got } = await sanitized(
      [
        { name: "ro/", type: "5", mode: 0o555 },
        { name: "ro/f", data: "1", mode: 0o444 },
        { name: "ro/inner/", type: "5", mode: 0o500 },
        { name: "ro/inner/g", data: "2" },
        { name: "ro/z", data: "3" },
        { name: "next", data: "4" },
        { name: "last/", type: "5", mode: 0o700 },
      ],
      { deferDirModes: true },
    );
    expect(got.map((e) => [e.name, e.mode.toString(8)])).toEqual([
      ["ro/", "755"],
      ["ro/f", "444"],
      ["ro/inner/", "700"],
      ["ro/inner/g", "644"],
      ["ro/inner/", "500"],
      ["ro/z", "644"],
      ["ro/", "555"],
      ["next", "644"],
      ["last/", "700"],
    ]);
  });

  it("with deferSymlinks writes every symlink after the other members; a refused stream has written none", async () => {
    const { got, stats } = await sanitized(
      [{ name: "a", type: "2", linkname: "/etc" }, { name: "d/", type: "5" }, { name: "d/l", type: "2", linkname: "../x" }, { name: "d/f", data: "1" }],
      { deferSymlinks: true },
    );
    expect(got.map((e) => e.name)).toEqual(["d/", "d/f", "a", "d/l"]);
    expect(stats.written).toBe(4);
    const s = sanitizeTar(chunks(archive([{ name: "a", type: "2", linkname: "/etc" }, { name: "f", data: "1" }, { name: "../bad", data: "x" }])), { limits: LIMITS, deferSymlinks: true });
    const out: Buffer[] = [];
    await expect((async () => { for await (const c of s.stream) out.push(c); })()).rejects.toThrow(/"\.\.\/bad" contains/);
    expect(Buffer.concat(out).includes(Buffer.from("/etc"))).toBe(false);
    expect(s.stats.written).toBe(1);
  });

  it("a download keeps one root and renames it", async () => {
    const { got } = await sanitized([{ name: "real/", type: "5" }, { name: "real/x", data: "x" }], { root: { rename: "asked" } });
    expect(got.map((e) => e.name)).toEqual(["asked/", "asked/x"]);
    const e = await sanitizeRefusal(chunks(archive([{ name: "real/", type: "5" }, { name: "sneaky", data: "x" }])), { root: { rename: "asked" } });
    expect(e.message).toBe('member "sneaky" is not under "real", the path that was asked for');
  });

  it("a truncated stream is an error (never a short, complete-looking archive)", async () => {
    const cut = archive([{ name: "a", data: "x".repeat(3000) }]).subarray(0, 2000);
    await expect(collect(sanitizeTar(chunks(cut), { limits: LIMITS }).stream)).rejects.toThrow(/the stream ended inside the data of "a"/);
  });
});
