// The shell programs `sandbox cp` runs inside the workload (an exec as the
// workload's own user: whatever they read or write, the workload could have read
// or written itself), and what their exit codes mean. Pure: text and tables.
//
// Each program gets the workspace root as $1 and the path (already checked by
// src/files/sandbox-path.ts) as $2. It resolves every symlink of the path
// (realpath) and refuses one that ends outside the root: an honest mistake
// (`/sandbox/evil -> /etc`) gets a clear error, and a path swapped after the check
// reaches only what the workload's user reaches, never the host. Paths travel as
// arguments, never inside the script text; names ending in newlines survive the
// command substitution (the trailing "x"); GNU realpath (a custom image) accepts a
// missing last name, hence the -e test. Once its checks pass, a program
// writes the marker line SGOK to stdout, and only then streams.

/** Written to stdout when the checks passed, before any data. */
export const MARKER = "SGOK\n";

const PRELUDE = `
root=$1
inside() { case $1 in "$root"|"$root"/*) return 0;; esac; return 1; }
resolve() { r=$(realpath "$1" 2>/dev/null && echo x) || return 1; r=\${r%x}; r=\${r%?}; [ -e "$r" ]; }
existing() {
  if ! resolve "$1"; then
    p=$1
    while :; do
      p=\${p%/*}; [ -n "$p" ] || p=/
      if resolve "$p"; then inside "$r" || { printf '%s' "$r" >&2; exit 4; }; exit 3; fi
      [ "$p" = / ] && exit 3
    done
  fi
  inside "$r" || { printf '%s' "$r" >&2; exit 4; }
}
`;

/** Download: the resolved path as a tar stream whose one top-level name is its last name. */
export const DOWNLOAD = `${PRELUDE}
existing "$2"
d=\${r%/*}; b=\${r##*/}; [ -n "$d" ] || d=/
cd "$d" || exit 7
printf 'SGOK\\n'
exec tar -cf - -- "$b"
`;

/** Stat: "<raw mode in hex> <size>" of the resolved path. */
export const STAT = `${PRELUDE}
existing "$2"
printf 'SGOK\\n'
exec stat -c '%f %s' "$r"
`;

/** Upload of a tar: extracted into the existing directory $2 (owner never restored). */
export const UPLOAD_TAR = `${PRELUDE}
existing "$2"
[ -d "$r" ] || exit 5
cd "$r" || exit 7
printf 'SGOK\\n'
exec tar -xof -
`;

/**
 * Upload of one file ($2; mode $3, size $4): written to a temporary file beside it
 * and renamed over it only when all $4 bytes arrived, so an interrupted upload
 * leaves the old file (or none). An existing symlink is followed only to a file
 * inside the root; a dangling one is replaced.
 */
export const UPLOAD_FILE = `${PRELUDE}
p=$2; d=\${p%/*}; b=\${p##*/}; [ -n "$d" ] || d=/
existing "$d"
[ -d "$r" ] || exit 5
t=$r/$b
if [ -L "$t" ] && resolve "$t"; then inside "$r" || { printf '%s' "$r" >&2; exit 4; }; t=$r; fi
[ -d "$t" ] && exit 6
tmp=$(mktemp "\${t%/*}/.sandgate-cp.XXXXXX") || exit 7
printf 'SGOK\\n'
if cat > "$tmp" && [ "$(stat -c %s "$tmp")" = "$4" ] && chmod "$3" "$tmp" && mv -f "$tmp" "$t"; then exit 0; fi
rm -f "$tmp"
exit 8
`;

/** The argv of an exec running `script` with its arguments. */
export function scriptArgv(script: string, root: string, args: string[]): string[] {
  return ["sh", "-c", script, "sandgate-cp", root, ...args];
}

export type ScriptFailure =
  | { code: "not_found"; message: string }
  | { code: "invalid_request"; message: string }
  | { code: "not_allowed"; message: string }
  | { code: "internal"; message: string };

/** Text from the workload for a message: one line, printable, long words cut in the middle, at most `max` characters. */
export function oneLine(text: string, max = 300): string {
  const flat = text
    .replace(/[\u0000-\u001f\u007f-\u009f\u2028\u2029]+/g, " ")
    .replace(/\s+/g, " ")
    .trim()
    // A path of thousands of characters keeps its ends: "tar: deep/a/a/a…/b/b: File name too long".
    .replace(/\S{81,}/g, (w) => `${w.slice(0, 40)}…${w.slice(-30)}`);
  return flat.length > max ? `${flat.slice(0, max)}…` : flat;
}

/**
 * What a program's exit means when it ended before its marker (or, for uploads,
 * after). `path` is the checked path; `stderr` and `stdout` what it wrote (bounded,
 * hostile: shown only through oneLine).
 */
export function explainExit(exit: number, ctx: { sandbox: string; path: string; shown: string; stderr: string; stdout: string; op: "download" | "upload" | "stat" }): ScriptFailure {
  const where = `in sandbox "${ctx.sandbox}"`;
  const said = oneLine(`${ctx.stderr} ${ctx.stdout}`);
  switch (exit) {
    case 3:
      return { code: "not_found", message: `no such file or directory ${where}: ${ctx.shown}` };
    case 4:
      return { code: "invalid_request", message: `path ${ctx.shown} resolves to ${JSON.stringify(oneLine(ctx.stderr, 200))}, outside /sandbox: a symlink may not lead out of the workspace` };
    case 5:
      return {
        code: "invalid_request",
        message: ctx.op === "upload" ? `${ctx.shown} is not a directory ${where}; a tar is extracted into an existing directory` : `${ctx.shown} is not a directory ${where}`,
      };
    case 6:
      return { code: "invalid_request", message: `${ctx.shown} is a directory ${where}; a single-file upload names the file to write` };
    case 7:
      return { code: "internal", message: `cannot use ${ctx.shown} ${where}${said ? `: ${said}` : " (permission denied?)"}` };
    case 8:
      return { code: "internal", message: `the file ${ctx.shown} was not written ${where}: the upload ended early or the workspace is full${said ? ` (${said})` : ""}` };
    case 126:
    case 127:
      return { code: "not_allowed", message: `sandbox cp needs sh, realpath, stat and tar in the workload's image (the default image has them)${said ? `: ${said}` : ""}` };
    default:
      return { code: "internal", message: `tar ${where} failed (exit ${exit})${said ? `: ${said}` : ""}` };
  }
}

/** Parses STAT's output: "<hex mode> <size>\n". Null when it is not that (a hostile or broken answer). */
export function parseStat(text: string): { type: "file" | "directory" | "symlink" | "other"; mode: number; size: number } | null {
  const m = /^([0-9a-f]{1,8}) ([0-9]{1,16})\n?$/.exec(text);
  if (!m) return null;
  const raw = parseInt(m[1]!, 16);
  const fmt = raw & 0o170000;
  const type = fmt === 0o100000 ? "file" : fmt === 0o040000 ? "directory" : fmt === 0o120000 ? "symlink" : "other";
  return { type, mode: raw & 0o7777, size: Number(m[2]) };
}
