// Which paths inside a sandbox `sandbox cp` and the files API may name: absolute,
// inside the workspace (/sandbox) by their text alone, with no ".." segment. Pure.
//
// This is the first of two checks: the text. The second runs in the workload (see
// src/gateway/files/scripts.ts): the path with every symlink resolved must still be
// inside the workspace. A path is refused rather than normalised when it has "..":
// "/sandbox/a/../b" may mean something else once "a" is a symlink, and a clear
// refusal beats a guess.

/** The workload's workspace: every remote path is confined to it. */
export const WORKSPACE = "/sandbox";
/** Linux PATH_MAX and NAME_MAX, in bytes (names are bytes, not characters). */
export const PATH_MAX_BYTES = 4096;
export const NAME_MAX_BYTES = 255;

export type SandboxPath =
  | {
      ok: true;
      /** Normalised: "/sandbox" or "/sandbox/a/b" (no trailing "/", no "." or empty segments). */
      path: string;
      /** The text ended in "/" or "/.": it names a directory (`docker cp` semantics). */
      dirOnly: boolean;
      /** The text ended in "/.": the directory's contents, not the directory (`docker cp` semantics). */
      contents: boolean;
    }
  | { ok: false; error: string };

/** A path as a user gave it, for an error message: quoted, control characters escaped, at most ~200 characters. */
export function shownPath(p: string): string {
  const q = JSON.stringify(p.length > 200 ? `${p.slice(0, 200)}…` : p);
  // JSON leaves U+2028/2029 alone; they break lines in some terminals.
  return q.replace(/[\u2028\u2029\u007f-\u009f]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`);
}

const bytes = (s: string): number => Buffer.byteLength(s, "utf8");

/**
 * Checks a remote path's text. `root` is the workspace (a parameter for tests of the
 * rule itself; callers use WORKSPACE). The error names the path and the rule.
 */
export function checkSandboxPath(raw: string, root: string = WORKSPACE): SandboxPath {
  const where = `an absolute path inside ${root}`;
  if (raw === "") return { ok: false, error: `the path is empty; expected ${where} (e.g. ${root}/file)` };
  if (raw.includes("\0")) return { ok: false, error: `path ${shownPath(raw)} contains a NUL byte; expected ${where}` };
  if (bytes(raw) > PATH_MAX_BYTES) return { ok: false, error: `path ${shownPath(raw)} is ${bytes(raw)} bytes; a path is at most ${PATH_MAX_BYTES} bytes` };
  if (!raw.startsWith("/")) return { ok: false, error: `path ${shownPath(raw)} is relative; expected ${where} (e.g. ${shownPath(`${root}/${raw}`)})` };
  const segments: string[] = [];
  for (const s of raw.split("/")) {
    if (s === "" || s === ".") continue;
    if (s === "..") return { ok: false, error: `path ${shownPath(raw)} contains "..": a path must stay inside ${root} without ".." segments` };
    if (bytes(s) > NAME_MAX_BYTES) return { ok: false, error: `path ${shownPath(raw)} has a name of ${bytes(s)} bytes; a name is at most ${NAME_MAX_BYTES} bytes` };
    segments.push(s);
  }
  const path = `/${segments.join("/")}`;
  if (path !== root && !path.startsWith(`${root}/`)) {
    return { ok: false, error: `path ${shownPath(raw)} is outside ${root}: sandbox cp reaches only the workspace` };
  }
  const contents = /\/\.$/.test(raw);
  return { ok: true, path, dirOnly: contents || raw.endsWith("/"), contents };
}

/** The parent of a normalised path ("/sandbox/a" → "/sandbox"; "/sandbox" → "/"). */
export function parentOf(path: string): string {
  const i = path.lastIndexOf("/");
  return i <= 0 ? "/" : path.slice(0, i);
}

/** The last name of a normalised path ("/sandbox/a" → "a"). */
export function baseOf(path: string): string {
  return path.slice(path.lastIndexOf("/") + 1);
}
