// files_read, files_write, files_list: a sandbox's files under /sandbox (a relative path
// is under it). The gateway confines every path (symlinks out of /sandbox refused); a
// refusal comes back as a tool error with its message.

import { z } from "zod";
import { SandgateError } from "../sdk/index.js";
import { sandbox, type ToolContext } from "./context.js";
import { FILES_LIST_DEFAULT_ENTRIES, FILES_LIST_MAX_ENTRIES, FILES_READ_DEFAULT_BYTES, FILES_READ_MAX_BYTES, FILES_WRITE_MAX_CHARS, NAME_MAX_CHARS, PATH_MAX_CHARS } from "./limits.js";
import { ok } from "./results.js";

const target = {
  sandbox: z.string().min(1).max(NAME_MAX_CHARS).describe("the sandbox's name (or id)"),
  path: z.string().min(1).max(PATH_MAX_CHARS).describe("a path in /sandbox (a relative one is under it)"),
};
const encodings = z.enum(["utf8", "base64"]);
const encoding = encodings.default("utf8").describe('"utf8" text (default) or "base64" bytes');
const count = z.number().int().min(0);

export function registerFilesTools(ctx: ToolContext): void {
  ctx.server.registerTool(
    "files_read",
    {
      title: "Read a file",
      description: `Reads one file of a sandbox, as UTF-8 text or base64. A file larger than maxBytes (default ${FILES_READ_DEFAULT_BYTES}, max ${FILES_READ_MAX_BYTES}) is refused (too_large), not cut.`,
      inputSchema: z.strictObject({
        ...target,
        encoding,
        maxBytes: z.number().int().min(1).max(FILES_READ_MAX_BYTES).default(FILES_READ_DEFAULT_BYTES).describe(`the largest file read (default ${FILES_READ_DEFAULT_BYTES}, max ${FILES_READ_MAX_BYTES})`),
      }),
      outputSchema: z.strictObject({ path: z.string(), bytes: count, encoding: encodings, content: z.string() }),
      annotations: { title: "Read a file", readOnlyHint: true, openWorldHint: false },
    },
    (a, extra) =>
      ctx.run(async () => {
        const sb = await sandbox(ctx, a.sandbox);
        const bytes = await sb.files.read(a.path, { maxBytes: a.maxBytes, signal: extra.signal });
        let content: string;
        if (a.encoding === "base64") content = bytes.toString("base64");
        else {
          try {
            content = new TextDecoder("utf-8", { fatal: true }).decode(bytes);
          } catch {
            throw new SandgateError(`${a.path} is not valid UTF-8 text; read it with encoding "base64"`, "invalid_request");
          }
        }
        return ok(content, { path: a.path, bytes: bytes.length, encoding: a.encoding, content });
      }),
  );

  ctx.server.registerTool(
    "files_write",
    {
      title: "Write a file",
      description: `Writes one file of a sandbox (its directory must exist), replacing any file there once the new one is complete. content is UTF-8 text or base64 (encoding), at most ${FILES_WRITE_MAX_CHARS} characters.`,
      inputSchema: z.strictObject({
        ...target,
        content: z.string().max(FILES_WRITE_MAX_CHARS).describe("the file's content"),
        encoding,
        mode: z.number().int().min(0).max(0o777).optional().describe("permission bits as a number, e.g. 493 for 0755 (default 420, 0644)"),
      }),
      outputSchema: z.strictObject({ path: z.string().describe("the file's absolute path"), bytes: count }),
      // It overwrites: a client should ask first.
      annotations: { title: "Write a file", readOnlyHint: false, destructiveHint: true, idempotentHint: true, openWorldHint: false },
    },
    (a, extra) =>
      ctx.run(async () => {
        if (a.encoding === "base64" && !/^[A-Za-z0-9+/]*={0,2}$/.test(a.content)) throw new SandgateError("content: not base64 (A-Z, a-z, 0-9, +, / and = padding)", "invalid_request");
        const data = a.encoding === "base64" ? Buffer.from(a.content, "base64") : Buffer.from(a.content, "utf8");
        const sb = await sandbox(ctx, a.sandbox);
        const r = await sb.files.write(a.path, data, { ...(a.mode === undefined ? {} : { mode: a.mode }), signal: extra.signal });
        return ok(`wrote ${data.length} bytes to ${r.path}`, { path: r.path, bytes: data.length });
      }),
  );

  ctx.server.registerTool(
    "files_list",
    {
      title: "List a directory",
      description: `Lists a directory of a sandbox (default /sandbox): path, type, size, mode. More than maxEntries (default ${FILES_LIST_DEFAULT_ENTRIES}, max ${FILES_LIST_MAX_ENTRIES}) is refused (too_large).`,
      inputSchema: z.strictObject({
        sandbox: target.sandbox,
        path: target.path.default("/sandbox"),
        recursive: z.boolean().default(false).describe("every entry below it, not only its own"),
        maxEntries: z.number().int().min(1).max(FILES_LIST_MAX_ENTRIES).default(FILES_LIST_DEFAULT_ENTRIES),
      }),
      outputSchema: z.strictObject({
        path: z.string(),
        entries: z.array(
          z.strictObject({
            path: z.string().describe("relative to the listed directory"),
            type: z.enum(["file", "directory", "symlink", "hardlink", "fifo", "char", "block"]),
            size: count,
            mode: count.describe("permission bits"),
            mtime: z.number().describe("seconds since the epoch"),
            linkname: z.string().optional().describe("a symlink's target or a hard link's source"),
          }),
        ),
      }),
      annotations: { title: "List a directory", readOnlyHint: true, openWorldHint: false },
    },
    (a, extra) =>
      ctx.run(async () => {
        const sb = await sandbox(ctx, a.sandbox);
        const entries = await sb.files.list(a.path, { recursive: a.recursive, maxEntries: a.maxEntries, signal: extra.signal });
        const text = entries.length === 0 ? `${a.path} is empty` : entries.map((e) => `${e.type === "directory" ? "d" : e.type === "symlink" ? "l" : "-"} ${e.size} ${JSON.stringify(e.path)}${e.linkname ? ` -> ${JSON.stringify(e.linkname)}` : ""}`).join("\n");
        return ok(text, { path: a.path, entries: entries.map((e) => ({ path: e.path, type: e.type, size: e.size, mode: e.mode, mtime: e.mtime, ...(e.linkname ? { linkname: e.linkname } : {}) })) });
      }),
  );
}
