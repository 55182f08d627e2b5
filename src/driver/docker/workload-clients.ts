// The clients agents run, in the default workload image: Debian's curl, git with its https
// remote helper, python3 with its standard library (ssl, http.client, urllib, json, socket…),
// OpenSSH's ssh client, and npm beside node. Taken from this host like the rest of the image (rootfs.ts): each
// program with every library ldd lists for it, at the same paths. Host paths are fixed on
// purpose (/usr/bin/python3 is Debian's, never a pyenv shim first on PATH). A missing one is
// refused, naming the file and the Debian package that brings it (scripts/ensure-docker.sh
// installs them): the default image is the same on every host, never silently without git.
import { existsSync, realpathSync } from "node:fs";
import { readdir, readlink, stat } from "node:fs/promises";
import { basename, dirname, join, relative } from "node:path";
import { IMAGE_NODE_PATH, lddLibraries, workloadLayout, type HostInputs, type RootfsLayout } from "./rootfs.js";

/** Where the programs are taken from on the host (and put in the image: the same paths). */
export interface ClientPaths {
  curl: string;
  git: string;
  ssh: string;
  /** git's exec path: its builtins' links and git-remote-http (https, through libcurl). */
  gitCore: string;
  /** A link to the versioned interpreter (python3 → python3.11); its stdlib is /usr/lib/<that name>. */
  python: string;
  /** npm's package directory. Default: beside node, <node's prefix>/lib/node_modules/npm (Node's own layout). */
  npm?: string;
}

export const HOST_CLIENTS: Readonly<ClientPaths> = { curl: "/usr/bin/curl", git: "/usr/bin/git", ssh: "/usr/bin/ssh", gitCore: "/usr/lib/git-core", python: "/usr/bin/python3" };

export interface WorkloadInputs extends HostInputs {
  /** Default: HOST_CLIENTS. */
  clients?: Partial<ClientPaths>;
}

/** Where npm goes in the image, and its commands on PATH beside node. */
export const IMAGE_NPM_DIR = "/usr/local/lib/node_modules/npm";
const IMAGE_BIN = dirname(IMAGE_NODE_PATH);

/** Parts of the stdlib no client imports (tests, GUIs, build tooling): left out to keep the image small. */
const PYTHON_SKIP = new Set(["test", "idlelib", "tkinter", "turtledemo", "lib2to3", "ensurepip", "distutils", "venv", "__pycache__"]);
/** Extension modules that exist only to test CPython. */
const isTestExtension = (name: string): boolean => /^(_test|_xxtestfuzz|xxlimited|_ctypes_test)/.test(name);

/** npm's package directory for a node binary: <prefix>/lib/node_modules/npm, the prefix holding bin/node. */
export function npmBeside(nodePath: string): string {
  return join(dirname(dirname(realpathSync(nodePath))), "lib", "node_modules", "npm");
}

function pathsOf(inputs: WorkloadInputs): Required<ClientPaths> {
  const p = { ...HOST_CLIENTS, ...inputs.clients };
  return { ...p, npm: p.npm ?? npmBeside(inputs.nodePath ?? process.execPath) };
}

/** The interpreter python names (python3.11) and its stdlib directory, or null when it is missing. */
function pythonOf(python: string): { exe: string; lib: string } | null {
  if (!existsSync(python)) return null;
  const exe = realpathSync(python);
  return { exe, lib: join(dirname(dirname(exe)), "lib", basename(exe)) };
}

/** Missing host files, each named with the Debian package that brings it ("/usr/bin/git (git)"). */
export function missingClients(inputs: WorkloadInputs = {}): string[] {
  const p = pathsOf(inputs);
  const py = pythonOf(p.python);
  const want: [string, string][] = [
    [p.curl, "curl"],
    [p.git, "git"],
    [join(p.gitCore, "git-remote-http"), "git"],
    [p.ssh, "openssh-client"],
    [p.python, "python3-minimal"],
    ...(py === null
      ? []
      : ([
          [join(py.lib, "ssl.py"), "python3-minimal"],
          [join(py.lib, "http", "client.py"), `lib${basename(py.exe)}-stdlib`],
        ] as [string, string][])),
    [join(p.npm, "bin", "npm-cli.js"), `npm, beside ${inputs.nodePath ?? process.execPath} (scripts/setup.sh installs both)`],
  ];
  return want.filter(([f]) => !existsSync(f)).map(([f, pkg]) => `${f} (${pkg})`);
}

/** Regular files under dir, each with its mode (executable or not), and its symlinks. */
async function tree(dir: string, skip: (path: string, isDir: boolean) => boolean, out: { files: string[]; links: string[] } = { files: [], links: [] }): Promise<typeof out> {
  for (const e of await readdir(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (skip(p, e.isDirectory())) continue;
    if (e.isDirectory()) await tree(p, skip, out);
    else if (e.isSymbolicLink()) out.links.push(p);
    else if (e.isFile()) out.files.push(p);
  }
  return out;
}

const fileMode = async (path: string): Promise<number> => ((await stat(path)).mode & 0o111 ? 0o755 : 0o644);

/** The stdlib's .py files (pyc caches left out: they change when the host recompiles) and its extension modules. */
async function pythonStdlib(lib: string): Promise<string[]> {
  const t = await tree(lib, (p, isDir) => (isDir ? PYTHON_SKIP.has(basename(p)) || basename(p).startsWith("config-") : p.endsWith(".pyc") || (dirname(p).endsWith("lib-dynload") && isTestExtension(basename(p)))));
  return t.files;
}

/** git's builtins as Debian links them in its exec path (git-upload-pack -> git, git-remote-https -> git-remote-http, ...). */
async function gitExecLinks(gitCore: string): Promise<RootfsLayout["symlinks"]> {
  const links: RootfsLayout["symlinks"] = [];
  for (const e of await readdir(gitCore, { withFileTypes: true })) {
    if (!e.isSymbolicLink()) continue;
    const target = await readlink(join(gitCore, e.name));
    if (target === "git" || target === "git-remote-http") links.push({ dest: join(gitCore, e.name), target });
  }
  return links;
}

/** npm's package, moved to IMAGE_NPM_DIR, and npm and npx on PATH. */
async function npmParts(npm: string): Promise<Pick<RootfsLayout, "files" | "symlinks">> {
  const t = await tree(npm, () => false);
  const at = (p: string): string => join(IMAGE_NPM_DIR, relative(npm, p));
  return {
    files: await Promise.all(t.files.map(async (f) => ({ src: f, dest: at(f), mode: await fileMode(f) }))),
    symlinks: [
      ...(await Promise.all(t.links.map(async (l) => ({ dest: at(l), target: await readlink(l) })))),
      { dest: join(IMAGE_BIN, "npm"), target: `${relative(IMAGE_BIN, IMAGE_NPM_DIR)}/bin/npm-cli.js` },
      { dest: join(IMAGE_BIN, "npx"), target: `${relative(IMAGE_BIN, IMAGE_NPM_DIR)}/bin/npx-cli.js` },
    ],
  };
}

/**
 * The base layout with more files, symlinks and directories. The base's files win over an
 * added file at the same path (node's libraries are the same files anyway); an added file or
 * symlink wins over a base symlink there (a busybox applet never shadows a real client).
 */
export function addToLayout(base: RootfsLayout, add: Pick<RootfsLayout, "files" | "symlinks" | "dirs">): RootfsLayout {
  const files = new Map(base.files.map((f) => [f.dest, f]));
  for (const f of add.files) if (!files.has(f.dest)) files.set(f.dest, f);
  const links = new Map(add.symlinks.map((l) => [l.dest, l]));
  const taken = new Set([...files.keys(), ...links.keys()]);
  return {
    ...base,
    files: [...files.values()],
    dirs: [...base.dirs, ...add.dirs.filter((d) => !base.dirs.some((b) => b.dest === d.dest))],
    symlinks: [...base.symlinks.filter((s) => !taken.has(s.dest)), ...links.values()],
  };
}

/** The default workload image: rootfs.ts's workload layout plus the clients and every library they load. */
export async function defaultWorkloadLayout(inputs: WorkloadInputs = {}): Promise<RootfsLayout> {
  const missing = missingClients(inputs);
  if (missing.length > 0) {
    throw new Error(`the default workload image needs these files of this host, and they are missing: ${missing.join(", ")}; install them (scripts/setup.sh does, as root)`);
  }
  const p = pathsOf(inputs);
  const py = pythonOf(p.python)!;
  const stdlib = await pythonStdlib(py.lib);
  const remoteHttp = join(p.gitCore, "git-remote-http");
  const programs = [p.curl, p.git, remoteHttp, p.ssh, py.exe];
  const libs = (await Promise.all([...programs, ...stdlib.filter((f) => f.endsWith(".so"))].map((b) => lddLibraries(b)))).flat();
  const npm = await npmParts(p.npm);
  return addToLayout(await workloadLayout(inputs), {
    files: [
      ...programs.map((f) => ({ src: f, dest: f, mode: 0o755 })),
      ...stdlib.map((f) => ({ src: f, dest: f, mode: f.endsWith(".so") ? 0o755 : 0o644 })),
      ...libs.map((l) => ({ src: l, dest: l, mode: 0o755 })),
      ...npm.files,
    ],
    symlinks: [
      // git runs its builtins and helpers from its exec path.
      { dest: join(p.gitCore, "git"), target: p.git },
      ...(await gitExecLinks(p.gitCore)),
      ...(p.python === py.exe ? [] : [{ dest: p.python, target: basename(py.exe) }]),
      ...npm.symlinks,
    ],
    // Without it every git init and clone warns; an empty directory is what --template= gives.
    dirs: [{ dest: "/usr/share/git-core/templates", mode: 0o755, uid: 0, gid: 0 }],
  });
}
