// A workload image with the clients people actually run (test support, not a product
// image): Debian's curl, python3.11 with its stdlib (urllib, ssl), git with its https
// remote helper, plus node and busybox as in the default workload image. Built like the
// product images, from this host's files and their shared libraries (rootfs.ts), tagged
// by content hash, its tar cached under .cache/images; scripts/ensure-docker.sh installs
// the Debian packages. Host paths are fixed on purpose: /usr/bin/python3.11 is Debian's,
// never a pyenv shim that happens to be first on PATH.
import { existsSync } from "node:fs";
import { readdir, readlink } from "node:fs/promises";
import { join } from "node:path";
import { DEFAULT_IMAGE_CACHE_DIR, ensurePlannedImage, type ImageEngine, type ImagePlan, type ImageRef } from "../../src/driver/docker/images.js";
import { DEFAULT_IDS, IMAGE_PATH_ENV, layoutHash, lddLibraries, workloadLayout, type RootfsLayout } from "../../src/driver/docker/rootfs.js";

export const CLIENT_REPO = "sandgate-test-clients";
const KIND = "clients";

export const HOST_CURL = "/usr/bin/curl";
export const HOST_GIT = "/usr/bin/git";
export const HOST_GIT_REMOTE_HTTP = "/usr/lib/git-core/git-remote-http";
export const HOST_PYTHON = "/usr/bin/python3.11";
const PYTHON_LIB = "/usr/lib/python3.11";
const GIT_CORE = "/usr/lib/git-core";

/** Parts of the stdlib no client here imports (tests, GUIs, build tooling): left out to keep the image small. */
const PYTHON_SKIP = new Set(["test", "idlelib", "tkinter", "turtledemo", "lib2to3", "ensurepip", "distutils", "venv", "config-3.11-x86_64-linux-gnu", "__pycache__"]);
/** Extension modules that exist only to test CPython. */
const isTestExtension = (name: string): boolean => /^(_test|_xxtestfuzz|xxlimited|_ctypes_test)/.test(name);

/** Missing host programs, named with the Debian package that brings each. */
export function missingClientPrograms(): string[] {
  const want: [string, string][] = [
    [HOST_CURL, "curl"],
    [HOST_GIT, "git"],
    [HOST_GIT_REMOTE_HTTP, "git"],
    [HOST_PYTHON, "python3-minimal"],
    [join(PYTHON_LIB, "ssl.py"), "python3-minimal"],
    [join(PYTHON_LIB, "http", "client.py"), "libpython3.11-stdlib"],
  ];
  return want.filter(([p]) => !existsSync(p)).map(([p, pkg]) => `${p} (${pkg})`);
}

/** The stdlib's .py files (pyc caches left out: they change when the host recompiles) and its extension modules. */
async function pythonStdlib(dir: string, out: string[] = []): Promise<string[]> {
  for (const e of await readdir(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory()) {
      if (!PYTHON_SKIP.has(e.name)) await pythonStdlib(p, out);
    } else if (!(dir.endsWith("lib-dynload") && isTestExtension(e.name)) && !e.name.endsWith(".pyc")) {
      out.push(p);
    }
  }
  return out;
}

/** git's builtins as Debian links them in its exec path (git-upload-pack -> git, git-remote-https -> git-remote-http, ...). */
async function gitExecLinks(): Promise<RootfsLayout["symlinks"]> {
  const links: RootfsLayout["symlinks"] = [];
  for (const e of await readdir(GIT_CORE, { withFileTypes: true })) {
    if (!e.isSymbolicLink()) continue;
    const target = await readlink(join(GIT_CORE, e.name));
    if (target === "git" || target === "git-remote-http") links.push({ dest: join(GIT_CORE, e.name), target });
  }
  return links;
}

/**
 * The base layout with more files, symlinks and directories. The base's files win over an
 * added file at the same path (node's libraries are the same files anyway); an added file or
 * symlink wins over a base symlink there (a busybox applet never shadows a real client).
 */
export function addToLayout(base: RootfsLayout, kind: string, add: Pick<RootfsLayout, "files" | "symlinks" | "dirs">): RootfsLayout {
  const files = new Map(base.files.map((f) => [f.dest, f]));
  for (const f of add.files) if (!files.has(f.dest)) files.set(f.dest, f);
  const links = new Map(add.symlinks.map((l) => [l.dest, l]));
  const taken = new Set([...files.keys(), ...links.keys()]);
  return {
    ...base,
    kind,
    files: [...files.values()],
    dirs: [...base.dirs, ...add.dirs.filter((d) => !base.dirs.some((b) => b.dest === d.dest))],
    symlinks: [...base.symlinks.filter((s) => !taken.has(s.dest)), ...links.values()],
  };
}

/** The default workload layout plus the clients and every library they load. */
export async function clientLayout(): Promise<RootfsLayout> {
  const missing = missingClientPrograms();
  if (missing.length > 0) throw new Error(`client image: missing on this host: ${missing.join(", ")} (run scripts/ensure-docker.sh as root)`);
  const stdlib = await pythonStdlib(PYTHON_LIB);
  const programs = [HOST_CURL, HOST_GIT, HOST_GIT_REMOTE_HTTP, HOST_PYTHON];
  const libs = (await Promise.all([...programs, ...stdlib.filter((f) => f.endsWith(".so"))].map((b) => lddLibraries(b)))).flat();
  return addToLayout(await workloadLayout(), KIND, {
    files: [
      ...programs.map((p) => ({ src: p, dest: p, mode: 0o755 })),
      ...stdlib.map((f) => ({ src: f, dest: f, mode: f.endsWith(".so") ? 0o755 : 0o644 })),
      ...libs.map((l) => ({ src: l, dest: l, mode: 0o755 })),
    ],
    symlinks: [
      // git runs its builtins and helpers from its exec path.
      { dest: join(GIT_CORE, "git"), target: HOST_GIT },
      ...(await gitExecLinks()),
      { dest: "/usr/bin/python3", target: "python3.11" },
    ],
    // Without it every git init and clone warns; an empty directory is what --template= gives.
    dirs: [{ dest: "/usr/share/git-core/templates", mode: 0o755, uid: 0, gid: 0 }],
  });
}

/** Like the workload image, plus an idle command: a container of it needs no Cmd of its own. */
function clientChanges(hash: string): string[] {
  const uid = DEFAULT_IDS.workload;
  return [
    `USER ${uid}:${uid}`,
    "WORKDIR /sandbox",
    `ENV PATH=${IMAGE_PATH_ENV}`,
    "ENV HOME=/sandbox",
    'CMD ["sleep", "2147483647"]',
    `LABEL org.sandgate.image=${KIND} org.sandgate.content-hash=${hash}`,
  ];
}

export async function planClientImage(cacheDir = DEFAULT_IMAGE_CACHE_DIR): Promise<ImagePlan> {
  const layout = await clientLayout();
  const hash = await layoutHash(layout, clientChanges(""));
  const tag = hash.slice(0, 12);
  return { kind: KIND, repo: CLIENT_REPO, hash, ref: `${CLIENT_REPO}:${tag}`, changes: clientChanges(hash), layout, tarPath: join(cacheDir, `${KIND}-${tag}.tar`) };
}

/** The client image in this daemon: imported from the cached tar, assembled first when there is none. */
export async function ensureClientImage(engine: ImageEngine, onProgress?: (msg: string) => void): Promise<ImageRef> {
  return (await ensurePlannedImage(engine, await planClientImage(), onProgress)).image;
}
