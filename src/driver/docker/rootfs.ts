// Root filesystems for the two images, assembled from files of this host (no registry):
// the host's node binary with the shared libraries ldd lists for it (at the same paths,
// dynamic loader included), busybox-static for the workload, the bundled supervisor
// program for the supervisor. A layout is described first, then hashed (content hash of
// every input) and only assembled and tarred when its image is missing.
import { execFile } from "node:child_process";
import { createHash } from "node:crypto";
import { createReadStream, existsSync } from "node:fs";
import { chmod, copyFile, mkdir, rename, rm, stat, symlink, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { promisify } from "node:util";

import { DEFAULT_UID_BASE, roleIds, type RoleIds } from "./host-ids.js";

const run = promisify(execFile);

/** Bump when the layout below changes in a way the inputs do not show. */
export const ROOTFS_LAYOUT_VERSION = 1;

/** The ids both images run as unless the gateway is given another base (see host-ids.ts). */
export const DEFAULT_IDS: RoleIds = roleIds(DEFAULT_UID_BASE);
/** Where node goes in both images (on PATH). */
export const IMAGE_NODE_PATH = "/usr/local/bin/node";
export const IMAGE_BUSYBOX_PATH = "/bin/busybox";
export const IMAGE_SUPERVISOR_PATH = "/opt/sandgate/supervisor.mjs";
/** The supervisor's Node-API addon, beside its bundle (the supervisor loads it from there). */
export const IMAGE_ORIG_DST_PATH = "/opt/sandgate/orig-dst.node";
export const IMAGE_PATH_ENV = "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin";

export type ImageKind = "workload" | "supervisor";

export interface RootfsLayout {
  /** An ImageKind for the product images; a test image (test/support) names its own. */
  kind: string;
  /** Host files copied in (symlinks followed). */
  files: { src: string; dest: string; mode: number }[];
  /** Generated files. */
  texts: { dest: string; content: string; mode: number }[];
  /** Directories; non-root owners are allowed on empty directories only (see tarRootfs). */
  dirs: { dest: string; mode: number; uid: number; gid: number }[];
  symlinks: { dest: string; target: string }[];
}

export interface HostInputs {
  /** Default: process.execPath. */
  nodePath?: string;
  /** Default: /bin/busybox (must be statically linked). */
  busyboxPath?: string;
  /** The uids (and gids) of the two roles. Default: DEFAULT_IDS. */
  ids?: RoleIds;
}

/** Absolute paths of the shared libraries (and the loader) `ldd` lists for a binary. */
export async function lddLibraries(binary: string): Promise<string[]> {
  let stdout: string;
  try {
    ({ stdout } = await run("ldd", [binary], { encoding: "utf8" }));
  } catch (err) {
    const out = `${(err as { stdout?: string }).stdout ?? ""}${(err as { stderr?: string }).stderr ?? ""}`;
    if (/not a dynamic executable|statically linked/.test(out)) return [];
    throw new Error(`ldd ${binary} failed: ${out.trim() || String(err)}`);
  }
  const libs: string[] = [];
  for (const raw of stdout.split("\n")) {
    const line = raw.trim();
    if (line === "" || /statically linked/.test(line)) continue;
    if (/=>\s*not found/.test(line)) throw new Error(`ldd ${binary}: ${line}`);
    const arrow = /=>\s*(\/\S+)/.exec(line);
    const direct = /^(\/\S+)/.exec(line); // the loader: "/lib64/ld-linux-x86-64.so.2 (0x...)"
    const path = arrow?.[1] ?? direct?.[1];
    if (path !== undefined && !libs.includes(path)) libs.push(path); // linux-vdso has no path: skipped
  }
  return libs;
}

/** busybox --list-full: applet paths relative to / (e.g. "bin/sh", "usr/bin/awk"). */
async function busyboxApplets(busybox: string): Promise<string[]> {
  const { stdout } = await run(busybox, ["--list-full"], { encoding: "utf8" });
  return stdout
    .split("\n")
    .map((s) => s.trim())
    .filter((s) => s.includes("/") && !s.includes("..") && s !== "bin/busybox"); // drops "linuxrc"
}

async function nodeFiles(nodePath: string): Promise<RootfsLayout["files"]> {
  const libs = await lddLibraries(nodePath);
  return [{ src: nodePath, dest: IMAGE_NODE_PATH, mode: 0o755 }, ...libs.map((lib) => ({ src: lib, dest: lib, mode: 0o755 }))];
}

function baseDirs(): RootfsLayout["dirs"] {
  return [
    { dest: "/etc", mode: 0o755, uid: 0, gid: 0 },
    { dest: "/tmp", mode: 0o1777, uid: 0, gid: 0 },
    { dest: "/proc", mode: 0o555, uid: 0, gid: 0 },
    { dest: "/sys", mode: 0o555, uid: 0, gid: 0 },
    { dest: "/dev", mode: 0o755, uid: 0, gid: 0 },
  ];
}

// glibc reads it for getaddrinfo; files first so /etc/hosts (written by Docker) wins.
const NSSWITCH = "hosts: files dns\npasswd: files\ngroup: files\n";

export async function workloadLayout(inputs: HostInputs = {}): Promise<RootfsLayout> {
  const nodePath = inputs.nodePath ?? process.execPath;
  const busybox = inputs.busyboxPath ?? (existsSync("/bin/busybox") ? "/bin/busybox" : "/usr/bin/busybox");
  if ((await lddLibraries(busybox)).length > 0) throw new Error(`${busybox} is not statically linked (install busybox-static)`);
  const applets = await busyboxApplets(busybox);
  const uid = (inputs.ids ?? DEFAULT_IDS).workload;
  return {
    kind: "workload",
    files: [...(await nodeFiles(nodePath)), { src: busybox, dest: IMAGE_BUSYBOX_PATH, mode: 0o755 }],
    texts: [
      { dest: "/etc/passwd", mode: 0o644, content: `root:x:0:0:root:/root:/bin/sh\nsandbox:x:${uid}:${uid}:sandbox:/sandbox:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n` },
      { dest: "/etc/group", mode: 0o644, content: `root:x:0:\nsandbox:x:${uid}:\nnogroup:x:65534:\n` },
      { dest: "/etc/nsswitch.conf", mode: 0o644, content: NSSWITCH },
    ],
    dirs: [...baseDirs(), { dest: "/root", mode: 0o700, uid: 0, gid: 0 }, { dest: "/sandbox", mode: 0o755, uid, gid: uid }],
    symlinks: applets.map((a) => ({ dest: `/${a}`, target: IMAGE_BUSYBOX_PATH })),
  };
}

/** No shell, no busybox: the supervisor image holds node, its libraries, the bundle and its addon. */
export async function supervisorLayout(supervisorBundlePath: string, inputs: HostInputs & { origDstAddonPath?: string } = {}): Promise<RootfsLayout> {
  const nodePath = inputs.nodePath ?? process.execPath;
  const uid = (inputs.ids ?? DEFAULT_IDS).supervisor;
  const addon = inputs.origDstAddonPath === undefined ? [] : [{ src: inputs.origDstAddonPath, dest: IMAGE_ORIG_DST_PATH, mode: 0o644 }];
  return {
    kind: "supervisor",
    files: [...(await nodeFiles(nodePath)), { src: supervisorBundlePath, dest: IMAGE_SUPERVISOR_PATH, mode: 0o644 }, ...addon],
    texts: [
      { dest: "/etc/passwd", mode: 0o644, content: `root:x:0:0:root:/root:/usr/sbin/nologin\nsupervisor:x:${uid}:${uid}:supervisor:/opt/sandgate:/usr/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n` },
      { dest: "/etc/group", mode: 0o644, content: `root:x:0:\nsupervisor:x:${uid}:\nnogroup:x:65534:\n` },
      { dest: "/etc/nsswitch.conf", mode: 0o644, content: NSSWITCH },
    ],
    dirs: [...baseDirs(), { dest: "/opt/sandgate", mode: 0o755, uid: 0, gid: 0 }],
    symlinks: [],
  };
}

// Hashing the 100 MB node binary takes a few hundred ms; both images need it.
const fileHashes = new Map<string, Promise<string>>();

async function sha256File(path: string): Promise<string> {
  const st = await stat(path);
  const key = `${path}\0${st.dev}:${st.ino}:${st.size}:${st.mtimeMs}`;
  let hash = fileHashes.get(key);
  if (!hash) {
    hash = (async () => {
      const h = createHash("sha256");
      for await (const chunk of createReadStream(path)) h.update(chunk as Buffer);
      return h.digest("hex");
    })();
    fileHashes.set(key, hash);
    hash.catch(() => fileHashes.delete(key));
  }
  return hash;
}

/**
 * sha256 over everything that ends up in the image: the layout version, every copied
 * file's content (by destination and mode), generated files, directories, symlinks, and
 * any extra strings (the image config changes). Host paths do not count, only content.
 */
export async function layoutHash(layout: RootfsLayout, extra: string[] = []): Promise<string> {
  const files = await Promise.all(layout.files.map(async (f) => ({ dest: f.dest, mode: f.mode, sha256: await sha256File(f.src) })));
  const byDest = <T extends { dest: string }>(xs: T[]): T[] => [...xs].sort((a, b) => (a.dest < b.dest ? -1 : a.dest > b.dest ? 1 : 0));
  const doc = {
    version: ROOTFS_LAYOUT_VERSION,
    kind: layout.kind,
    files: byDest(files),
    texts: byDest(layout.texts),
    dirs: byDest(layout.dirs),
    symlinks: byDest(layout.symlinks),
    extra,
  };
  return createHash("sha256").update(JSON.stringify(doc)).digest("hex");
}

/** Create the tree in dir (which must not exist or be empty). Ownership is applied by tarRootfs. */
export async function assembleRootfs(layout: RootfsLayout, dir: string): Promise<void> {
  await mkdir(dir, { recursive: true });
  const at = (p: string): string => join(dir, p);
  for (const d of layout.dirs) {
    await mkdir(at(d.dest), { recursive: true });
    await chmod(at(d.dest), d.mode); // mkdir is subject to the umask
  }
  for (const f of layout.files) {
    await mkdir(dirname(at(f.dest)), { recursive: true });
    await copyFile(f.src, at(f.dest));
    await chmod(at(f.dest), f.mode);
  }
  for (const t of layout.texts) {
    await mkdir(dirname(at(t.dest)), { recursive: true });
    await writeFile(at(t.dest), t.content);
    await chmod(at(t.dest), t.mode);
  }
  for (const s of layout.symlinks) {
    await mkdir(dirname(at(s.dest)), { recursive: true });
    await symlink(s.target, at(s.dest));
  }
}

export async function buildWorkloadRootfs(dir: string, inputs: HostInputs = {}): Promise<RootfsLayout> {
  const layout = await workloadLayout(inputs);
  await assembleRootfs(layout, dir);
  return layout;
}

export async function buildSupervisorRootfs(dir: string, supervisorBundlePath: string, inputs: HostInputs = {}): Promise<RootfsLayout> {
  const layout = await supervisorLayout(supervisorBundlePath, inputs);
  await assembleRootfs(layout, dir);
  return layout;
}

const DETERMINISTIC = ["--sort=name", "--mtime=@0", "--numeric-owner", "--format=gnu"];

/**
 * Tar an assembled tree deterministically with the system tar: everything owned by 0:0
 * except the non-root directories of the layout, appended with their own owner (so no
 * chown and no root are needed). Written to outFile atomically (temp file + rename).
 */
export async function tarRootfs(layout: RootfsLayout, dir: string, outFile: string): Promise<void> {
  const foreign = layout.dirs.filter((d) => d.uid !== 0 || d.gid !== 0);
  const entries = [...layout.files, ...layout.texts, ...layout.symlinks, ...layout.dirs];
  for (const d of foreign) {
    const inside = entries.find((e) => e.dest.startsWith(`${d.dest}/`));
    if (inside) throw new Error(`tarRootfs: ${d.dest} is owned by ${d.uid} and must stay empty, but holds ${inside.dest}`);
  }
  const tmp = `${outFile}.tmp-${process.pid}`;
  await mkdir(dirname(outFile), { recursive: true });
  try {
    const exclude = foreign.map((d) => `--exclude=.${d.dest}`);
    await run("tar", ["-C", dir, "-c", "-f", tmp, ...DETERMINISTIC, "--owner=0", "--group=0", ...exclude, "."]);
    for (const d of foreign) {
      await run("tar", ["-C", dir, "-r", "-f", tmp, ...DETERMINISTIC, `--owner=${d.uid}`, `--group=${d.gid}`, "--no-recursion", `.${d.dest}`]);
    }
    await rename(tmp, outFile);
  } catch (err) {
    await rm(tmp, { force: true });
    throw err;
  }
}
