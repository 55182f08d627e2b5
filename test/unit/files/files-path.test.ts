// The text rule for remote paths of `sandbox cp` and the files API: absolute,
// inside /sandbox, no "..": every refusal with its one-line message, the forms
// that are normalised, and properties over arbitrary strings (fast-check).
import { posix } from "node:path";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { NAME_MAX_BYTES, PATH_MAX_BYTES, WORKSPACE, baseOf, checkSandboxPath, parentOf, shownPath } from "../../../src/files/sandbox-path.js";

const ok = (raw: string) => {
  const r = checkSandboxPath(raw);
  if (!r.ok) throw new Error(`expected ${raw} to pass: ${r.error}`);
  return r;
};
const refused = (raw: string): string => {
  const r = checkSandboxPath(raw);
  if (r.ok) throw new Error(`expected ${JSON.stringify(raw)} to be refused, got ${r.path}`);
  expect(r.error.split("\n")).toHaveLength(1);
  return r.error;
};

describe("checkSandboxPath: refusals name the path and the rule", () => {
  it.each([
    ["/sandbox/../etc", 'path "/sandbox/../etc" contains "..": a path must stay inside /sandbox without ".." segments'],
    ["/sandbox/a/../b", 'path "/sandbox/a/../b" contains "..": a path must stay inside /sandbox without ".." segments'],
    ["/sandbox/..", 'path "/sandbox/.." contains "..": a path must stay inside /sandbox without ".." segments'],
    ["/../sandbox/x", 'path "/../sandbox/x" contains "..": a path must stay inside /sandbox without ".." segments'],
    ["/etc/passwd", 'path "/etc/passwd" is outside /sandbox: sandbox cp reaches only the workspace'],
    ["/", 'path "/" is outside /sandbox: sandbox cp reaches only the workspace'],
    ["/sandbox2/x", 'path "/sandbox2/x" is outside /sandbox: sandbox cp reaches only the workspace'],
    ["/sandboxx", 'path "/sandboxx" is outside /sandbox: sandbox cp reaches only the workspace'],
    ["/proc/self/root/sandbox", 'path "/proc/self/root/sandbox" is outside /sandbox: sandbox cp reaches only the workspace'],
    ["sandbox/x", 'path "sandbox/x" is relative; expected an absolute path inside /sandbox (e.g. "/sandbox/sandbox/x")'],
    ["x", 'path "x" is relative; expected an absolute path inside /sandbox (e.g. "/sandbox/x")'],
    ["", "the path is empty; expected an absolute path inside /sandbox (e.g. /sandbox/file)"],
    ["/sandbox/a\0b", 'path "/sandbox/a\\u0000b" contains a NUL byte; expected an absolute path inside /sandbox'],
  ])("%j", (raw, message) => {
    expect(refused(raw)).toBe(message);
  });

  it("refuses over-long paths and names, counted in bytes", () => {
    expect(refused(`/sandbox/${"a".repeat(NAME_MAX_BYTES + 1)}`)).toMatch(/has a name of 256 bytes; a name is at most 255 bytes$/);
    ok(`/sandbox/${"a".repeat(NAME_MAX_BYTES)}`);
    // 128 two-byte characters are 256 bytes.
    expect(refused(`/sandbox/${"é".repeat(128)}`)).toMatch(/name of 256 bytes/);
    const atLimit = `/sandbox/${"a/".repeat(2043)}b`;
    expect(Buffer.byteLength(atLimit)).toBe(PATH_MAX_BYTES);
    expect(ok(atLimit).path).toBe(atLimit);
    expect(refused(`${atLimit}c`)).toMatch(/is 4097 bytes; a path is at most 4096 bytes$/);
    expect(refused(`/sandbox/${"ab/".repeat(1400)}`)).toMatch(/is 4209 bytes; a path is at most 4096 bytes$/);
  });

  it("shows a path with a newline on one line, escaped", () => {
    const e = refused("/etc/a\nb");
    expect(e).toContain('"/etc/a\\nb"');
    expect(shownPath("x".repeat(300))).toHaveLength(203);
  });
});

describe("checkSandboxPath: what passes, normalised", () => {
  it.each([
    ["/sandbox", "/sandbox", false, false],
    ["/sandbox/", "/sandbox", true, false],
    ["/sandbox/.", "/sandbox", true, true],
    ["/sandbox/a/b", "/sandbox/a/b", false, false],
    ["//sandbox//a///b", "/sandbox/a/b", false, false],
    ["/sandbox/./a/./b/", "/sandbox/a/b", true, false],
    ["/sandbox/d/.", "/sandbox/d", true, true],
    ["/sandbox/...", "/sandbox/...", false, false],
    ["/sandbox/..a", "/sandbox/..a", false, false],
    ["/sandbox/a b", "/sandbox/a b", false, false],
    ["/sandbox/new\nline", "/sandbox/new\nline", false, false],
    ["/sandbox/-rf", "/sandbox/-rf", false, false],
  ])("%j → %j", (raw, path, dirOnly, contents) => {
    expect(ok(raw)).toEqual({ ok: true, path, dirOnly, contents });
  });

  it("parentOf and baseOf split a normalised path", () => {
    expect([parentOf("/sandbox/a/b"), baseOf("/sandbox/a/b")]).toEqual(["/sandbox/a", "b"]);
    expect([parentOf("/sandbox"), baseOf("/sandbox")]).toEqual(["/", "sandbox"]);
  });
});

// Strings built from the segments that matter (the root, its look-alikes, dots,
// empties, names with odd bytes), and fully arbitrary strings.
const segment = fc.constantFrom("sandbox", "sandbox2", "sandboxx", "..", ".", "", "a", "etc", "b\nc", "-x", "...", "proc", "self", "root");
const pathish = fc.tuple(fc.boolean(), fc.array(segment, { maxLength: 8 })).map(([abs, segs]) => (abs ? "/" : "") + segs.join("/"));
const anyText = fc.oneof(pathish, fc.string({ maxLength: 64 }), fc.string({ unit: "grapheme", maxLength: 32 }).map((s) => `/sandbox/${s}`));

describe("checkSandboxPath: properties", () => {
  it("whatever passes is the workspace or under it, canonical, with no '..' segment, and passes again unchanged", () => {
    fc.assert(
      fc.property(anyText, (raw) => {
        const r = checkSandboxPath(raw);
        if (!r.ok) return;
        expect(r.path === WORKSPACE || r.path.startsWith(`${WORKSPACE}/`)).toBe(true);
        expect(r.path.split("/").slice(1)).not.toContain("..");
        expect(r.path.split("/").slice(1)).not.toContain(".");
        expect(r.path.split("/").slice(1)).not.toContain("");
        // Resolving it as a path goes nowhere else.
        expect(posix.resolve("/", r.path)).toBe(r.path);
        expect(checkSandboxPath(r.path)).toEqual({ ok: true, path: r.path, dirOnly: false, contents: false });
      }),
      { numRuns: 5000 },
    );
  });

  it("passes exactly the absolute paths without '..' whose normal form is inside the workspace (oracle: path.posix)", () => {
    fc.assert(
      fc.property(pathish, (raw) => {
        const segs = raw.split("/");
        const normal = raw === "" ? "" : posix.normalize(raw).replace(/(.)\/+$/, "$1");
        const expected = raw.startsWith("/") && !segs.includes("..") && (normal === WORKSPACE || normal.startsWith(`${WORKSPACE}/`));
        const r = checkSandboxPath(raw);
        expect(r.ok).toBe(expected);
        if (r.ok) expect(r.path).toBe(normal);
        else expect(r.error.split("\n")).toHaveLength(1);
      }),
      { numRuns: 5000 },
    );
  });

  it("refuses every path with a '..' segment, wherever it is", () => {
    fc.assert(
      fc.property(fc.array(segment, { maxLength: 6 }), fc.array(segment, { maxLength: 6 }), (before, after) => {
        const raw = `/${[...before, "..", ...after].join("/")}`;
        expect(checkSandboxPath(raw).ok).toBe(false);
      }),
    );
  });

  it("an error message is always one line", () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 300 }), (raw) => {
        const r = checkSandboxPath(raw);
        if (!r.ok) expect(r.error).not.toMatch(/[\n\r\u2028\u2029]/);
      }),
      { numRuns: 3000 },
    );
  });
});
