// `sandgate sandbox cp SRC NAME:PATH` and `sandgate sandbox cp NAME:PATH DEST`:
// files and directories in and out of a Ready sandbox, with `docker cp`'s rules
// for what lands where, streamed both ways (never held), through the gateway's
// files API (src/files/api.ts). `-` is a tar on stdin or stdout.

import type { IncomingMessage } from "node:http";
import { lstatSync, realpathSync, statSync, type Stats } from "node:fs";
import { basename, dirname, resolve } from "node:path";
import { Command } from "commander";
import { RESULT_TRAILER, TAR_MEDIA_TYPE, type FileStatView, type TransferResultView } from "../files/api.js";
import { CopyRefused } from "../files/members.js";
import { WORKSPACE, baseOf, checkSandboxPath, parentOf, shownPath } from "../files/sandbox-path.js";
import { TarFormatError, toBytes } from "../files/tar-format.js";
import { formatBytes } from "../lifecycle/disk-size.js";
import { GatewayClient, asCliAsync } from "./client.js";
import { errnoText, packLocal, unpackLocal, type Progress } from "./cp-local.js";
import { CliError, EXIT, cliErrorOf, exitCodeForApi } from "./errors.js";
import { printJson } from "./format.js";
import { drained } from "../util/drained.js";

interface Common {
  home?: string;
  url?: string;
}

interface CpOptions {
  followLink?: boolean;
  json?: boolean;
  progress?: boolean;
}

export interface RemoteSpec {
  sandbox: string;
  /** Normalised, inside /sandbox. */
  path: string;
  dirOnly: boolean;
  contents: boolean;
  /** As the user wrote it, for messages. */
  text: string;
}

const SANDBOX_REF = /^([a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?|sbx_[0-9a-f]{16}):(.*)$/s;

/**
 * "NAME:PATH" is a sandbox's path (a relative PATH is under /sandbox); anything else
 * (and anything starting with "/" or ".") is local. Pure.
 */
export function parseCpArg(arg: string): { remote: RemoteSpec } | { local: string } | { error: string } {
  if (arg === "-" || arg.startsWith("/") || arg.startsWith(".")) return { local: arg };
  const m = SANDBOX_REF.exec(arg);
  if (!m) return { local: arg };
  const raw = m[2]!;
  const abs = raw.startsWith("/") ? raw : raw === "" ? WORKSPACE : `${WORKSPACE}/${raw}`;
  const p = checkSandboxPath(abs);
  if (!p.ok) return { error: p.error };
  return { remote: { sandbox: m[1]!, path: p.path, dirOnly: p.dirOnly, contents: p.contents, text: arg } };
}

const filesPath = (sandbox: string, path: string): string => `/v1/sandboxes/${encodeURIComponent(sandbox)}/files?path=${encodeURIComponent(path)}`;

async function apiError(res: IncomingMessage): Promise<CliError> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const c of res) {
    if (size < 64 * 1024) chunks.push(c as Buffer);
    size += (c as Buffer).length;
  }
  try {
    const err = (JSON.parse(Buffer.concat(chunks).toString()) as { error: { code: string; message: string } }).error;
    return new CliError(err.message, exitCodeForApi(err.code));
  } catch {
    return new CliError(`the gateway answered ${res.statusCode ?? "?"} without an explanation`);
  }
}

/** Bytes so far on stderr, when it is a terminal (or --progress), at most 5 times a second. */
function progressLine(enabled: boolean, label: string): { progress: Progress; stop(): void } {
  const progress: Progress = { bytes: 0 };
  if (!enabled) return { progress, stop: () => undefined };
  const draw = (): void => {
    process.stderr.write(`\r${label} ${formatBytes(progress.bytes)}\u001b[K`);
  };
  const timer = setInterval(draw, 200);
  timer.unref();
  return {
    progress,
    stop() {
      clearInterval(timer);
      // Always the final count, also when the copy ended before the first tick.
      draw();
      process.stderr.write("\n");
    },
  };
}

function cliError(err: unknown): Error {
  if (err instanceof CopyRefused) return new CliError(err.message, EXIT.failed);
  if (err instanceof TarFormatError) return new CliError(`not a valid tar stream: ${err.message}`, EXIT.failed);
  // A local file the copy reads or writes: one line, the path shortened.
  const e = err as NodeJS.ErrnoException;
  if (typeof e.code === "string" && /^E[A-Z]+$/.test(e.code) && e.syscall !== undefined) {
    const path = e.path === undefined ? "" : `: ${shownPath(e.path)}`;
    return new CliError(`${e.syscall} failed, ${errnoText(e.code)} (${e.code})${path}`, e.code === "ENOENT" ? EXIT.notFound : EXIT.failed);
  }
  return err instanceof Error ? err : new Error(String(err));
}

const localStat = (p: string, follow: boolean): Stats | null => {
  try {
    return follow ? statSync(p) : lstatSync(p);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return null;
    throw err;
  }
};

interface Summary {
  direction: "upload" | "download";
  source: string;
  destination: string;
  entries: number;
  bytes: number;
  skipped: number;
}

function report(s: Summary, o: CpOptions, toStdout: boolean): void {
  if (o.json) return printJson(s);
  const line = `copied ${s.entries} ${s.entries === 1 ? "entry" : "entries"} (${formatBytes(s.bytes)}) to ${s.destination}${s.skipped > 0 ? `; skipped ${s.skipped} (FIFOs, sockets, device nodes)` : ""}\n`;
  (toStdout ? process.stdout : process.stderr).write(line);
}

// ---- out of a sandbox ----------------------------------------------------------

async function download(client: GatewayClient, src: RemoteSpec, dest: string, o: CpOptions): Promise<void> {
  if (!client.url) await client.request("GET", "/v1/status"); // raises "not running"
  const toStdout = dest === "-";
  if (toStdout && o.json) throw new CliError("--json prints to stdout, where `-` sends the tar; drop one of them", EXIT.usage);
  if (toStdout && process.stdout.isTTY) throw new CliError("refusing to write a tar to a terminal; redirect stdout or name a destination", EXIT.usage);
  // Where it lands, by `docker cp`'s rules, decided before anything moves.
  let root = "";
  let rename = toBytes(baseOf(src.path));
  let fileOnly = false;
  if (!toStdout) {
    const st = localStat(dest, true);
    if (st?.isDirectory()) {
      root = realpathSync(dest);
      if (src.contents) rename = "";
    } else {
      if (dest.endsWith("/")) throw new CliError(`no such directory: ${JSON.stringify(dest)}`, EXIT.notFound);
      const parent = dirname(resolve(dest));
      if (!localStat(parent, true)?.isDirectory()) throw new CliError(`no such directory: ${JSON.stringify(parent)} (the destination's parent must exist)`, EXIT.notFound);
      root = realpathSync(parent);
      rename = toBytes(basename(resolve(dest)));
      fileOnly = st !== null;
    }
  }
  const res = await asCliAsync(client.transport.stream("GET", filesPath(src.sandbox, src.path), { what: "the copy" }));
  if (res.statusCode !== 200) throw await apiError(res);
  const show = progressLine(o.progress ?? process.stderr.isTTY, `copying from ${src.text}:`);
  let aborted = false;
  res.on("aborted", () => (aborted = true));
  const trailer = (): TransferResultView | undefined => {
    const t = res.trailers[RESULT_TRAILER];
    if (t === undefined) return undefined;
    try {
      return JSON.parse(t) as TransferResultView;
    } catch {
      return undefined;
    }
  };
  const failure = (): CliError | null => {
    const t = trailer();
    if (t && !t.ok) return new CliError(t.error.message, exitCodeForApi(t.error.code));
    if (aborted || !res.complete) return new CliError("the gateway cut the copy short (it stopped, or the connection broke); nothing is complete");
    return null;
  };
  let result: { entries: number; bytes: number; skipped: number };
  try {
    if (toStdout) {
      let bytes = 0;
      for await (const c of res) {
        const chunk = c as Buffer;
        bytes += chunk.length;
        show.progress.bytes = bytes;
        if (!process.stdout.write(chunk)) await drained(process.stdout);
      }
      const f = failure();
      if (f) throw f;
      const t = trailer();
      result = t?.ok ? { entries: t.entries, bytes: t.bytes, skipped: t.skipped } : { entries: 0, bytes, skipped: 0 };
    } else {
      try {
        const u = await unpackLocal(res, { root, rename, fileOnly, progress: show.progress });
        result = { entries: u.entries, bytes: u.bytes, skipped: u.skipped };
      } catch (err) {
        res.destroy();
        // The gateway's own reason (in the trailer) when it ended the stream; a stream cut
        // short without one is the connection's doing; anything else is this side's refusal.
        const t = trailer();
        if (t && !t.ok) throw new CliError(t.error.message, exitCodeForApi(t.error.code));
        if (err instanceof TarFormatError && (aborted || !res.complete)) throw failure() ?? cliError(err);
        throw cliError(err);
      }
      const f = failure();
      if (f) throw f;
      const t = trailer();
      if (t?.ok) result.skipped = t.skipped;
    }
  } finally {
    show.stop();
  }
  report({ direction: "download", source: src.text, destination: toStdout ? "-" : dest, ...result }, o, !toStdout);
}

// ---- into a sandbox --------------------------------------------------------------

async function remoteStat(client: GatewayClient, dst: RemoteSpec): Promise<FileStatView | null> {
  try {
    return await client.request<FileStatView>("GET", `/v1/sandboxes/${encodeURIComponent(dst.sandbox)}/files/stat?path=${encodeURIComponent(dst.path)}`);
  } catch (err) {
    if (err instanceof CliError && err.exitCode === EXIT.notFound && /^no such file or directory/.test(err.message)) return null;
    throw err;
  }
}

async function upload(client: GatewayClient, src: string, dst: RemoteSpec, o: CpOptions): Promise<void> {
  const fromStdin = src === "-";
  let dir: string;
  let source: AsyncIterable<Buffer>;
  let counts: () => { entries: number; bytes: number; skipped: number } | null = () => null;
  const show = progressLine(o.progress ?? process.stderr.isTTY, `copying to ${dst.text}:`);
  if (fromStdin) {
    if (process.stdin.isTTY) throw new CliError("`-` reads a tar from stdin, which is a terminal; pipe one in", EXIT.usage);
    const st = await remoteStat(client, dst);
    if (st?.type !== "directory") throw new CliError(`${dst.text} is not an existing directory; a tar from stdin is extracted into one`, st === null ? EXIT.notFound : EXIT.usage);
    dir = dst.path;
    source = (async function* () {
      for await (const c of process.stdin) {
        show.progress.bytes += (c as Buffer).length;
        yield c as Buffer;
      }
    })();
  } else {
    const st = localStat(src, o.followLink ?? false);
    if (st === null) throw new CliError(`no such file or directory: ${JSON.stringify(src)}`, EXIT.notFound);
    const contents = /(^|\/)\.$/.test(src);
    if (contents && !st.isDirectory()) throw new CliError(`${JSON.stringify(src)} is not a directory ("/." copies a directory's contents)`, EXIT.usage);
    const remote = await remoteStat(client, dst);
    let top: string | null;
    if (remote?.type === "directory") {
      dir = dst.path;
      top = contents ? null : toBytes(basename(resolve(src)));
    } else {
      if (dst.dirOnly) throw new CliError(`${dst.text}: no such directory in the sandbox`, EXIT.notFound);
      if (remote !== null && st.isDirectory()) throw new CliError(`cannot copy a directory onto the file ${dst.text}`, EXIT.usage);
      dir = parentOf(dst.path);
      top = toBytes(baseOf(dst.path));
    }
    const packed = packLocal(src, top, { follow: o.followLink ?? false, progress: show.progress });
    source = packed.stream;
    counts = () => ({ entries: packed.stats.entries, bytes: packed.stats.bytes, skipped: packed.stats.skipped.length });
  }
  let answer: TransferResultView;
  try {
    let res: IncomingMessage;
    try {
      res = await client.transport.stream("PUT", filesPath(dst.sandbox, dir), { headers: { "content-type": TAR_MEDIA_TYPE, "transfer-encoding": "chunked" }, body: source, what: "the copy" });
    } catch (err) {
      throw cliErrorOf(cliError(err));
    }
    // An early answer is a refusal: the transport stopped sending.
    if (res.statusCode !== 200) throw await apiError(res);
    const chunks: Buffer[] = [];
    for await (const c of res) chunks.push(c as Buffer);
    answer = JSON.parse(Buffer.concat(chunks).toString()) as TransferResultView;
  } finally {
    show.stop();
  }
  if (!answer.ok) throw new CliError(answer.error.message, exitCodeForApi(answer.error.code));
  const local = counts();
  const skipped = (local?.skipped ?? 0) + answer.skipped;
  report({ direction: "upload", source: src, destination: dst.text, entries: answer.entries, bytes: answer.bytes, skipped }, o, true);
}

export function cpCommand(sandbox: Command, global: () => Common): void {
  sandbox
    .command("cp")
    .description("copy files and directories into or out of a Ready sandbox (like docker cp); streamed, modes kept")
    .argument("<src>", "a local path, NAME:PATH, or - (a tar on stdin)")
    .argument("<dest>", "a local path, NAME:PATH, or - (a tar on stdout)")
    .option("-L, --follow-link", "follow a local SRC that is a symlink (symlinks inside directories are always copied as symlinks)")
    .option("--progress", "show bytes copied on stderr even when it is not a terminal")
    .option("--json", "print a summary as JSON")
    .addHelpText(
      "after",
      `
PATH is inside /sandbox (a relative PATH is under /sandbox); ".." and symlinks that lead out
of /sandbox are refused. As with docker cp: a directory DEST that exists receives SRC under
its own name; one that does not exist is created with SRC's contents; SRC/. copies a
directory's contents. Files inside belong to the workload's user; modes are kept (set-uid and
set-gid are dropped); symlinks are copied as symlinks and never followed on either side.

Examples:
  sandgate sandbox cp ./src demo:/sandbox/src
  sandgate sandbox cp demo:/sandbox/out.txt ./out.txt
  sandgate sandbox cp demo:/sandbox/results - | tar -tv`,
    )
    .action(async (srcArg: string, destArg: string, o: CpOptions) => {
      const src = parseCpArg(srcArg);
      const dest = parseCpArg(destArg);
      for (const a of [src, dest]) if ("error" in a) throw new CliError(a.error, EXIT.usage);
      const client = new GatewayClient(global());
      try {
        if ("remote" in src && "remote" in dest) throw new CliError("copying from one sandbox to another is not supported; copy to a local path first", EXIT.usage);
        if ("remote" in src && "local" in dest) return await download(client, src.remote, dest.local, o);
        if ("local" in src && "remote" in dest) return await upload(client, src.local, dest.remote, o);
        throw new CliError(`one of SRC and DEST must be NAME:PATH (a sandbox's path); got ${JSON.stringify(srcArg)} and ${JSON.stringify(destArg)} (write ./${srcArg} for a local path with a colon)`, EXIT.usage);
      } catch (err) {
        throw cliError(err);
      }
    });
}
