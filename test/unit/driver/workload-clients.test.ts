// The default workload image's clients: how they add to the base workload layout (pure),
// what they take from this host (real files: Debian's python, curl, git, their libraries,
// and npm beside node), and a missing one refused by name and package.
import { existsSync, mkdtempSync, realpathSync, rmSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { planImage } from "../../../src/driver/docker/images.js";
import { IMAGE_BUSYBOX_PATH, IMAGE_NODE_PATH, type RootfsLayout } from "../../../src/driver/docker/rootfs.js";
import { addToLayout, defaultWorkloadLayout, IMAGE_NPM_DIR, missingClients, npmBeside } from "../../../src/driver/docker/workload-clients.js";

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

const scratch = mkdtempSync(join(tmpdir(), "sg-clients-"));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

describe("addToLayout", () => {
  it("adds files, symlinks and directories, keeping the base's kind and texts", () => {
    const l = addToLayout(base, { files: [file("/usr/bin/curl")], symlinks: [{ dest: "/usr/bin/py", target: "x" }], dirs: [{ dest: "/srv", mode: 0o755, uid: 0, gid: 0 }] });
    expect(l.kind).toBe("workload");
    expect(l.files.map((f) => f.dest)).toEqual(["/usr/local/bin/node", "/lib/libc.so.6", "/usr/bin/curl"]);
    expect(l.dirs.map((d) => d.dest)).toEqual(["/tmp", "/srv"]);
    expect(l.texts).toEqual(base.texts);
    expect(l.symlinks.map((s) => s.dest)).toEqual(["/bin/sh", "/usr/bin/wget", "/usr/bin/python3", "/usr/bin/py"]);
  });

  it("a base file wins over an added file at the same path; duplicates among added files collapse to the first", () => {
    const l = addToLayout(base, { files: [file("/lib/libc.so.6", "/other/libc"), file("/usr/bin/git", "/a"), file("/usr/bin/git", "/b")], symlinks: [], dirs: [{ dest: "/tmp", mode: 0o755, uid: 0, gid: 0 }] });
    expect(l.files.filter((f) => f.dest === "/lib/libc.so.6")).toEqual([file("/lib/libc.so.6", "/host/libc")]);
    expect(l.files.filter((f) => f.dest === "/usr/bin/git")).toEqual([file("/usr/bin/git", "/a")]);
    expect(l.dirs).toEqual(base.dirs);
  });

  it("an added file or symlink replaces a base symlink at its path (a busybox applet never shadows a client)", () => {
    const l = addToLayout(base, { files: [file("/usr/bin/wget")], symlinks: [{ dest: "/usr/bin/python3", target: "python3.11" }], dirs: [] });
    expect(l.symlinks).toEqual([
      { dest: "/bin/sh", target: "/bin/busybox" },
      { dest: "/usr/bin/python3", target: "python3.11" },
    ]);
    const dests = [...l.files.map((f) => f.dest), ...l.symlinks.map((s) => s.dest)];
    expect(new Set(dests).size).toBe(dests.length);
  });
});

describe("defaultWorkloadLayout (this host's files)", () => {
  it("has Debian's python with its stdlib, curl, git with its https helper and exec-path links, OpenSSH's ssh, node with npm, and busybox; every path once", async () => {
    expect(missingClients()).toEqual([]);
    const l = await defaultWorkloadLayout();
    expect(l.kind).toBe("workload");
    const files = new Map(l.files.map((f) => [f.dest, f]));
    const links = new Map(l.symlinks.map((s) => [s.dest, s.target]));
    for (const p of ["/usr/bin/curl", "/usr/bin/git", "/usr/lib/git-core/git-remote-http", "/usr/bin/ssh", IMAGE_NODE_PATH, IMAGE_BUSYBOX_PATH, `${IMAGE_NPM_DIR}/bin/npm-cli.js`, `${IMAGE_NPM_DIR}/package.json`]) {
      expect(files.has(p), p).toBe(true);
    }
    for (const mod of ["urllib/request.py", "ssl.py", "http/client.py", "json/__init__.py", "socket.py"]) expect(files.has(`/usr/lib/python3.11/${mod}`), mod).toBe(true);
    expect(files.get("/usr/bin/python3.11")).toEqual({ src: "/usr/bin/python3.11", dest: "/usr/bin/python3.11", mode: 0o755 });
    expect([...files.keys()].some((d) => d.startsWith("/usr/lib/python3.11/lib-dynload/_ssl."))).toBe(true);
    expect(links.get("/usr/bin/python3")).toBe("python3.11");
    expect(links.get("/usr/lib/git-core/git-remote-https")).toBe("git-remote-http");
    expect(links.get("/usr/lib/git-core/git-upload-pack")).toBe("git");
    expect(links.get("/usr/lib/git-core/git")).toBe("/usr/bin/git");
    // npm and npx beside node, run by it (their scripts say #!/usr/bin/env node: busybox's env).
    expect(links.get("/usr/local/bin/npm")).toBe("../lib/node_modules/npm/bin/npm-cli.js");
    expect(links.get("/usr/local/bin/npx")).toBe("../lib/node_modules/npm/bin/npx-cli.js");
    expect(files.get(`${IMAGE_NPM_DIR}/bin/npm-cli.js`)).toMatchObject({ src: join(npmBeside(process.execPath), "bin", "npm-cli.js"), mode: 0o755 });
    expect(links.get("/usr/bin/env")).toBe(IMAGE_BUSYBOX_PATH);
    // No test suite, no byte-code caches (they change when the host recompiles), no pyenv.
    expect(l.files.filter((f) => /python3[^/]*\/test\/|__pycache__|\.pyc$|pyenv|_testcapi/.test(f.src))).toEqual([]);
    const dests = [...l.files.map((f) => f.dest), ...l.symlinks.map((s) => s.dest), ...l.texts.map((t) => t.dest)];
    expect(new Set(dests).size).toBe(dests.length);
    // Every library the programs load is in the image at the path the loader looks for.
    for (const lib of ["/lib/x86_64-linux-gnu/libcurl.so.4", "/lib/x86_64-linux-gnu/libcurl-gnutls.so.4", "/lib/x86_64-linux-gnu/libssl.so.3", "/lib/x86_64-linux-gnu/libgssapi_krb5.so.2"]) expect(files.has(lib), lib).toBe(true);
  });

  it("npm is taken from beside the node that runs the gateway (Node's layout: <prefix>/lib/node_modules/npm), through a link to it too", () => {
    symlinkSync(process.execPath, join(scratch, "node-link"));
    const prefix = dirname(dirname(realpathSync(process.execPath)));
    expect(npmBeside(process.execPath)).toBe(join(prefix, "lib", "node_modules", "npm"));
    expect(npmBeside(join(scratch, "node-link"))).toBe(npmBeside(process.execPath));
    expect(existsSync(join(npmBeside(process.execPath), "bin", "npm-cli.js"))).toBe(true);
  });

  it("a missing client is refused, naming each missing file and its Debian package, before anything is built", async () => {
    const clients = { curl: join(scratch, "no-curl"), git: join(scratch, "no-git"), ssh: join(scratch, "no-ssh"), gitCore: join(scratch, "no-git-core"), python: join(scratch, "no-python3"), npm: join(scratch, "no-npm") };
    expect(missingClients({ clients })).toEqual([
      `${clients.curl} (curl)`,
      `${clients.git} (git)`,
      `${clients.gitCore}/git-remote-http (git)`,
      `${clients.ssh} (openssh-client)`,
      `${clients.python} (python3-minimal)`,
      `${clients.npm}/bin/npm-cli.js (npm, beside ${process.execPath} (scripts/setup.sh installs both))`,
    ]);
    await expect(planImage("workload", { clients: { git: clients.git }, cacheDir: scratch })).rejects.toThrow(
      `the default workload image needs these files of this host, and they are missing: ${clients.git} (git); install them (scripts/setup.sh does, as root)`,
    );
  });
});
