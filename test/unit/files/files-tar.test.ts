// The tar reader and encoder: every header form the producers we meet write
// (ustar, ustar with a prefix, GNU long names, pax, base-256 sizes), every way a
// stream can be malformed or truncated (a clear TarFormatError, never a hang or a
// guess), a round trip over arbitrary headers (fast-check), and interop both ways
// with the real GNU tar and busybox tar of this host.
import { execFile } from "node:child_process";
import { lstatSync, mkdirSync, mkdtempSync, readFileSync, readlinkSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BLOCK, END_OF_ARCHIVE, TarFormatError, decodeBlock, encodeHeader, padding, parsePax, type TarHeader } from "../../../src/files/tar-format.js";
import { META_MAX_BYTES, readTar } from "../../../src/files/tar-stream.js";
import { archive, chunks, collect, member, rawHeader } from "../../support/tar-craft.js";

const run = promisify(execFile);
const BUSYBOX = ["/bin/busybox", "/usr/bin/busybox"].find((p) => { try { return lstatSync(p).isFile(); } catch { return false; } }) ?? "busybox";

async function entries(stream: AsyncIterable<Buffer>): Promise<(TarHeader & { data: string })[]> {
  const out: (TarHeader & { data: string })[] = [];
  for await (const e of readTar(stream)) out.push({ ...e.header, data: (await collect(e.data)).toString("latin1") });
  return out;
}

const failure = async (stream: AsyncIterable<Buffer>): Promise<string> => {
  try {
    await entries(stream);
  } catch (err) {
    expect(err).toBeInstanceOf(TarFormatError);
    return (err as Error).message;
  }
  throw new Error("expected a TarFormatError");
};

describe("readTar: header forms", () => {
  it("reads files, directories, symlinks, hard links, FIFOs and devices from a ustar stream cut into odd chunks", async () => {
    const tar = archive([
      { name: "d/", type: "5", mode: 0o755 },
      { name: "d/f", data: "hello", mode: 0o600, mtime: 1234 },
      { name: "d/l", type: "2", linkname: "../elsewhere" },
      { name: "d/h", type: "1", linkname: "d/f" },
      { name: "d/p", type: "6" },
      { name: "d/c", type: "3" },
      { name: "d/b", type: "4" },
      { name: "d/old", type: "\0", data: "x" },
      { name: "d/contig", type: "7", data: "yy" },
    ]);
    for (const size of [1, 7, 511, 512, 513, 100_000]) {
      const got = await entries(chunks(tar, size));
      expect(got.map((e) => [e.name, e.type, e.data])).toEqual([
        ["d/", "directory", ""],
        ["d/f", "file", "hello"],
        ["d/l", "symlink", ""],
        ["d/h", "hardlink", ""],
        ["d/p", "fifo", ""],
        ["d/c", "char", ""],
        ["d/b", "block", ""],
        ["d/old", "file", "x"],
        ["d/contig", "file", "yy"],
      ]);
      expect(got[1]).toMatchObject({ mode: 0o600, mtime: 1234, size: 5 });
      expect(got[2]!.linkname).toBe("../elsewhere");
    }
  });

  it("joins a POSIX prefix, and reads GNU long names and long link targets", async () => {
    const long = `${"p".repeat(150)}/${"f".repeat(90)}`;
    const target = "t".repeat(300);
    const got = await entries(chunks(archive([
      { name: long, magic: "posix", data: "a" },
      { name: `g${"x".repeat(250)}`, magic: "gnu", gnuLong: true, data: "b" },
      { name: `s${"y".repeat(250)}`, type: "2", linkname: target, magic: "gnu", gnuLong: true },
    ]), 300));
    expect(got.map((e) => [e.name.length, e.data])).toEqual([[long.length, "a"], [251, "b"], [251, ""]]);
    expect(got[0]!.name).toBe(long);
    expect(got[2]!.linkname).toBe(target);
  });

  it("applies pax path, linkpath, size and mtime to the next member only", async () => {
    const got = await entries(chunks(archive([
      { name: "short", pax: { path: "a/very/long/" + "n".repeat(200), mtime: "1700000000.5", comment: "ignored" }, data: "abc" },
      { name: "l", type: "2", linkname: "x", pax: { linkpath: "z".repeat(200) } },
      { name: "next", data: "d" },
    ])));
    expect(got.map((e) => [e.name.slice(0, 12), e.data, e.mtime])).toEqual([["a/very/long/", "abc", 1_700_000_000], ["l", "", 1_700_000_000], ["next", "d", 1_700_000_000]]);
    expect(got[1]!.linkname).toBe("z".repeat(200));
  });

  it("reads a pax size and a GNU base-256 size", async () => {
    expect(parsePax(Buffer.from("11 size=12\n"))).toEqual({ size: 12 });
    const h = rawHeader({ name: "big" }, 0);
    h[124] = 0x80;
    h.fill(0, 125, 136);
    h.writeUIntBE(9 * 1024 ** 3, 130, 6);
    h.fill(0x20, 148, 156);
    let sum = 0;
    for (const x of h) sum += x;
    h.write(sum.toString(8).padStart(6, "0") + "\0 ", 148, "latin1");
    expect(decodeBlock(h)).toMatchObject({ kind: "entry", header: { name: "big", size: 9 * 1024 ** 3 } });
  });

  it("keeps a name's bytes exactly, UTF-8 or not", async () => {
    const raw = Buffer.from([0x61, 0xff, 0xfe, 0x0a, 0xc3, 0xa9]).toString("latin1");
    const [e] = await entries(chunks(archive([{ name: raw, data: "x" }])));
    expect(Buffer.from(e!.name, "latin1")).toEqual(Buffer.from([0x61, 0xff, 0xfe, 0x0a, 0xc3, 0xa9]));
  });

  it("discards what follows the end marker (record padding), reading it to the end", async () => {
    let pulled = 0;
    async function* source(): AsyncGenerator<Buffer> {
      for await (const c of chunks(Buffer.concat([archive([{ name: "a", data: "1" }]), Buffer.alloc(8192)]), 1000)) {
        pulled += c.length;
        yield c;
      }
    }
    expect((await entries(source())).map((e) => e.name)).toEqual(["a"]);
    expect(pulled).toBe(4 * BLOCK + 8192);
  });

  it("skips the data a consumer does not read", async () => {
    const names: string[] = [];
    for await (const e of readTar(chunks(archive([{ name: "a", data: "x".repeat(5000) }, { name: "b", data: "y" }]), 333))) names.push(e.header.name);
    expect(names).toEqual(["a", "b"]);
  });
});

describe("readTar: malformed and truncated streams are errors, never guesses", () => {
  it.each([
    ["an empty stream", Buffer.alloc(0), "the stream ended without the end-of-archive marker (truncated)"],
    ["no end marker", archive([{ name: "a", data: "1" }], { end: false }), "the stream ended without the end-of-archive marker (truncated)"],
    ["a cut header", archive([{ name: "a", data: "1" }]).subarray(0, 300), "the stream ended inside a header"],
    ["cut data", archive([{ name: "a", data: "x".repeat(2000) }]).subarray(0, 1500), 'the stream ended inside the data of "a" (1012 bytes missing)'],
    ["a bad checksum", archive([{ name: "a", badChecksum: true }]), "a header block with a wrong checksum (not a tar stream, or a corrupt one)"],
    ["text, not tar", Buffer.from("x".repeat(2048)), "a header block with a wrong checksum (not a tar stream, or a corrupt one)"],
    ["a GNU sparse member", archive([{ name: "sparse", type: "S" }]), 'member "sparse" has tar type "S"; only files, directories, symbolic links and hard links are copied'],
    ["a multi-volume member", archive([{ name: "mv", type: "M" }]), 'member "mv" has tar type "M"; only files, directories, symbolic links and hard links are copied'],
    ["a directory with data", archive([{ name: "d", type: "5", size: 512, data: Buffer.alloc(512) }]), 'member "d" is a directory that claims 512 bytes of data'],
    ["a symlink with data", archive([{ name: "l", type: "2", linkname: "x", size: 10, data: Buffer.alloc(10) }]), 'member "l" is a symlink that claims 10 bytes of data'],
    ["a pax record that is not one", archive([{ name: "a", pax: { path: "x" } }]).fill(0x41, 512, 520), "a malformed pax record (no length)"],
  ])("%s", async (_what, tar, message) => {
    expect(await failure(chunks(tar, 97))).toBe(message);
  });

  it("refuses a metadata record over the limit without reading it into memory", async () => {
    const huge = rawHeader({ name: "././@LongLink", type: "L", magic: "gnu" }, META_MAX_BYTES + 1);
    expect(await failure(chunks(Buffer.concat([huge, Buffer.alloc(BLOCK)]), 512))).toBe(`a longname record of ${META_MAX_BYTES + 1} bytes; the limit is ${META_MAX_BYTES}`);
    const pax = rawHeader({ name: "p", type: "x" }, 10 * 1024 * 1024);
    expect(await failure(chunks(pax, 512))).toMatch(/^a pax record of 10485760 bytes/);
  });

  it("refuses numbers that are not octal, and negative base-256 numbers", async () => {
    const h = rawHeader({ name: "a" }, 0);
    h.write("9999", 124, "latin1");
    h.fill(0x20, 148, 156);
    let sum = 0;
    for (const x of h) sum += x;
    h.write(sum.toString(8).padStart(6, "0") + "\0 ", 148, "latin1");
    expect(() => decodeBlock(h)).toThrow(/size is not an octal number/);
    h.fill(0xff, 124, 136);
    h.fill(0x20, 148, 156);
    sum = 0;
    for (const x of h) sum += x;
    h.write(sum.toString(8).padStart(6, "0") + "\0 ", 148, "latin1");
    expect(() => decodeBlock(h)).toThrow(/a negative size/);
  });
});

const headerArb: fc.Arbitrary<TarHeader> = fc
  .record({
    name: fc.uint8Array({ minLength: 1, maxLength: 400 }).map((a) => Buffer.from(a.map((x) => (x === 0 ? 0x61 : x))).toString("latin1")),
    type: fc.constantFrom<TarHeader["type"]>("file", "directory", "symlink", "hardlink", "fifo"),
    mode: fc.integer({ min: 0, max: 0o7777 }),
    size: fc.integer({ min: 0, max: 3000 }),
    mtime: fc.integer({ min: 0, max: 2 ** 33 - 1 }),
    linkname: fc.uint8Array({ minLength: 1, maxLength: 400 }).map((a) => Buffer.from(a.map((x) => (x === 0 ? 0x62 : x))).toString("latin1")),
  })
  .map((h) => ({
    ...h,
    name: h.type === "directory" ? h.name.replace(/\/+$/, "") || "d" : h.name,
    size: h.type === "file" ? h.size : 0,
    linkname: h.type === "symlink" || h.type === "hardlink" ? h.linkname : "",
  }));

describe("encodeHeader", () => {
  it("round-trips any header through readTar (names and targets of any bytes and length)", async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(headerArb, { maxLength: 5 }), async (hs) => {
        const tar = Buffer.concat([...hs.flatMap((h) => [encodeHeader(h), Buffer.alloc(h.size, 0x7a), padding(h.size)]), END_OF_ARCHIVE]);
        const got = await entries(chunks(tar, 300));
        expect(got.map(({ data: _d, ...h }) => ({ ...h, name: h.type === "directory" ? h.name.replace(/\/$/, "") : h.name }))).toEqual(hs);
        expect(got.map((e) => e.data.length)).toEqual(hs.map((h) => h.size));
      }),
      { numRuns: 300 },
    );
  });

  it("writes a size past 8 GiB in base-256", () => {
    const b = encodeHeader({ name: "big", type: "file", mode: 0o644, size: 9 * 1024 ** 3, mtime: 0, linkname: "" });
    expect(b[124]).toBe(0x80);
    expect(decodeBlock(b)).toMatchObject({ header: { size: 9 * 1024 ** 3 } });
  });
});

describe("interop with the host's GNU tar and busybox tar", () => {
  let dir: string;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), "sg-tar-"));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  const longName = `${"n".repeat(120)}/${"m".repeat(150)}`;
  const ours = (): Buffer =>
    Buffer.concat([
      encodeHeader({ name: "top", type: "directory", mode: 0o750, size: 0, mtime: 1_600_000_000, linkname: "" }),
      encodeHeader({ name: "top/run.sh", type: "file", mode: 0o755, size: 3, mtime: 1_600_000_000, linkname: "" }),
      Buffer.from("hi\n"),
      padding(3),
      encodeHeader({ name: `top/${longName.split("/")[0]!}`, type: "directory", mode: 0o700, size: 0, mtime: 0, linkname: "" }),
      encodeHeader({ name: `top/${longName}`, type: "file", mode: 0o600, size: 1, mtime: 0, linkname: "" }),
      Buffer.from("s"),
      padding(1),
      encodeHeader({ name: "top/link", type: "symlink", mode: 0o777, size: 0, mtime: 0, linkname: "t".repeat(200) }),
      encodeHeader({ name: "top/nl\nname", type: "file", mode: 0o644, size: 0, mtime: 0, linkname: "" }),
      END_OF_ARCHIVE,
    ]);

  const tools: [string, (f: string, d: string) => [string, string[]]][] = [
    ["GNU tar", (f, d) => ["tar", ["-xf", f, "-C", d]]],
    ["busybox tar", (f, d) => [BUSYBOX, ["tar", "-xf", f, "-C", d]]],
  ];
  for (const [tool, args] of tools) {
    it(`${tool} extracts what encodeHeader writes: modes, long names, long link targets, newlines`, async () => {
      const out = join(dir, tool.replace(" ", "-"));
      mkdirSync(out);
      const file = join(dir, `${tool.replace(" ", "-")}.tar`);
      writeFileSync(file, ours());
      const [cmd, a] = args(file, out);
      await run(cmd, a);
      expect(lstatSync(join(out, "top/run.sh")).mode & 0o7777).toBe(0o755);
      expect(readFileSync(join(out, "top/run.sh"), "utf8")).toBe("hi\n");
      expect(lstatSync(join(out, "top", longName)).mode & 0o7777).toBe(0o600);
      expect(readlinkSync(join(out, "top/link"))).toBe("t".repeat(200));
      expect(lstatSync(join(out, "top/nl\nname")).isFile()).toBe(true);
    });
  }

  it("reads what GNU tar and busybox tar write (long names, symlinks, FIFOs, newlines)", async () => {
    const src = join(dir, "src");
    mkdirSync(join(src, "t", "n".repeat(120)), { recursive: true });
    writeFileSync(join(src, "t", "n".repeat(120), "m".repeat(150)), "deep");
    writeFileSync(join(src, "t", "nl\nx"), "nl");
    symlinkSync("t".repeat(300), join(src, "t", "longlink"));
    await run("mkfifo", [join(src, "t", "fifo")]);
    for (const [cmd, a] of [
      ["tar", ["-cf", "-", "-C", src, "t"]],
      ["tar", ["--format=posix", "-cf", "-", "-C", src, "t"]],
      [BUSYBOX, ["tar", "-cf", "-", "-C", src, "t"]],
    ] as const) {
      const { stdout } = await run(cmd, a as unknown as string[], { encoding: "buffer", maxBuffer: 1 << 24 });
      const got = await entries(chunks(stdout, 4096));
      const byName = new Map(got.map((e) => [e.name.replace(/\/$/, ""), e]));
      expect(byName.get(`t/${"n".repeat(120)}/${"m".repeat(150)}`)?.data, `${cmd} ${a.join(" ")}`).toBe("deep");
      expect(byName.get("t/nl\nx")?.data).toBe("nl");
      expect(byName.get("t/longlink")).toMatchObject({ type: "symlink", linkname: "t".repeat(300) });
      expect(byName.get("t/fifo")?.type).toBe("fifo");
      expect(byName.get("t")?.type).toBe("directory");
    }
  });
});

it("member() of the craft helper and encodeHeader agree on a plain file (sanity of the test helper)", async () => {
  const a = await entries(chunks(archive([{ name: "x", data: "1", mode: 0o640, mtime: 5 }])));
  const b = await entries(chunks(Buffer.concat([encodeHeader({ name: "x", type: "file", mode: 0o640, size: 1, mtime: 5, linkname: "" }), Buffer.from("1"), padding(1), END_OF_ARCHIVE])));
  expect(a).toEqual(b);
  expect(member({ name: "x" }).length).toBe(512);
});
