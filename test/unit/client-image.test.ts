// The client test image's layout: how it adds to the workload layout (pure), and what it
// takes from this host (real files: Debian's python, curl, git and their libraries).
import { describe, expect, it } from "vitest";
import type { RootfsLayout } from "../../src/driver/docker/rootfs.js";
import { addToLayout, clientLayout, HOST_PYTHON, missingClientPrograms } from "../support/client-image.js";

const file = (dest: string, src = dest): RootfsLayout["files"][number] => ({ src, dest, mode: 0o755 });
const base: RootfsLayout = {
  kind: "workload",
  files: [file("/usr/local/bin/node"), file("/lib/libc.so.6", "/host/libc")],
  texts: [{ dest: "/etc/passwd", content: "root:x:0:0::/:/bin/sh\n", mode: 0o644 }],
  dirs: [{ dest: "/tmp", mode: 0o1777, uid: 0, gid: 0 }],
  symlinks: [
    { dest: "/bin/sh", target: "/bin/busybox" },
    { dest: "/usr/bin/wget", target: "/bin/busybox" },
    { dest: "/usr/bin/python3", target: "/bin/busybox" },
  ],
};

describe("addToLayout", () => {
  it("adds files, symlinks and directories under its own kind, keeping the base's texts", () => {
    const l = addToLayout(base, "clients", { files: [file("/usr/bin/curl")], symlinks: [{ dest: "/usr/bin/py", target: "x" }], dirs: [{ dest: "/srv", mode: 0o755, uid: 0, gid: 0 }] });
    expect(l.kind).toBe("clients");
    expect(l.files.map((f) => f.dest)).toEqual(["/usr/local/bin/node", "/lib/libc.so.6", "/usr/bin/curl"]);
    expect(l.dirs.map((d) => d.dest)).toEqual(["/tmp", "/srv"]);
    expect(l.texts).toEqual(base.texts);
    expect(l.symlinks.map((s) => s.dest)).toEqual(["/bin/sh", "/usr/bin/wget", "/usr/bin/python3", "/usr/bin/py"]);
  });

  it("a base file wins over an added file at the same path; duplicates among added files collapse to the first", () => {
    const l = addToLayout(base, "clients", { files: [file("/lib/libc.so.6", "/other/libc"), file("/usr/bin/git", "/a"), file("/usr/bin/git", "/b")], symlinks: [], dirs: [{ dest: "/tmp", mode: 0o755, uid: 0, gid: 0 }] });
    expect(l.files.filter((f) => f.dest === "/lib/libc.so.6")).toEqual([file("/lib/libc.so.6", "/host/libc")]);
    expect(l.files.filter((f) => f.dest === "/usr/bin/git")).toEqual([file("/usr/bin/git", "/a")]);
    expect(l.dirs).toEqual(base.dirs);
  });

  it("an added file or symlink replaces a base symlink at its path (a busybox applet never shadows a client)", () => {
    const l = addToLayout(base, "clients", { files: [file("/usr/bin/wget")], symlinks: [{ dest: "/usr/bin/python3", target: "python3.11" }], dirs: [] });
    expect(l.symlinks).toEqual([
      { dest: "/bin/sh", target: "/bin/busybox" },
      { dest: "/usr/bin/python3", target: "python3.11" },
    ]);
    const dests = [...l.files.map((f) => f.dest), ...l.symlinks.map((s) => s.dest)];
    expect(new Set(dests).size).toBe(dests.length);
  });
});

describe("clientLayout (this host's files)", () => {
  it("has Debian's python with urllib and ssl, curl, git with its https helper and exec-path links, node and busybox; every path once", async () => {
    expect(missingClientPrograms()).toEqual([]);
    const l = await clientLayout();
    const files = new Map(l.files.map((f) => [f.dest, f]));
    const links = new Map(l.symlinks.map((s) => [s.dest, s.target]));
    for (const p of ["/usr/bin/curl", "/usr/bin/git", "/usr/lib/git-core/git-remote-http", "/usr/local/bin/node", "/bin/busybox", "/usr/lib/python3.11/urllib/request.py", "/usr/lib/python3.11/ssl.py", "/usr/lib/python3.11/http/client.py"]) {
      expect(files.has(p), p).toBe(true);
    }
    expect(files.get(HOST_PYTHON)).toEqual({ src: "/usr/bin/python3.11", dest: "/usr/bin/python3.11", mode: 0o755 });
    expect([...files.keys()].some((d) => d.startsWith("/usr/lib/python3.11/lib-dynload/_ssl."))).toBe(true);
    expect(links.get("/usr/bin/python3")).toBe("python3.11");
    expect(links.get("/usr/lib/git-core/git-remote-https")).toBe("git-remote-http");
    expect(links.get("/usr/lib/git-core/git-upload-pack")).toBe("git");
    expect(links.get("/usr/lib/git-core/git")).toBe("/usr/bin/git");
    // No test suite, no byte-code caches (they change when the host recompiles), no pyenv.
    expect(l.files.filter((f) => /\/test\/|__pycache__|\.pyc$|pyenv|_testcapi/.test(f.src))).toEqual([]);
    const dests = [...l.files.map((f) => f.dest), ...l.symlinks.map((s) => s.dest), ...l.texts.map((t) => t.dest)];
    expect(new Set(dests).size).toBe(dests.length);
    // Every library the programs load is in the image at the path the loader looks for.
    for (const lib of ["/lib/x86_64-linux-gnu/libcurl.so.4", "/lib/x86_64-linux-gnu/libcurl-gnutls.so.4", "/lib/x86_64-linux-gnu/libssl.so.3"]) expect(files.has(lib), lib).toBe(true);
  });
});
