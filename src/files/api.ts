// The files API as the gateway and the CLI share it: media types, the trailer
// that ends a download, and the shapes of answers (zod schemas, their types inferred).
// Contract only: no implementation.
//
//   GET  /v1/sandboxes/:name/files?path=P        → 200 application/x-tar (chunked); the
//        trailer `sandgate-result` says how it ended: {"ok":true,...} or {"ok":false,"error":{...}}.
//        The end-of-archive marker is sent only when the copy succeeded.
//   GET  /v1/sandboxes/:name/files/stat?path=P   → 200 FileStatView
//   PUT  /v1/sandboxes/:name/files?path=DIR      application/x-tar: extracted into DIR
//   PUT  /v1/sandboxes/:name/files?path=F&mode=0644  application/octet-stream (with a
//        Content-Length): the file F, replaced only once complete
//        → 200 TransferResultView

import { z } from "zod";

export const TAR_MEDIA_TYPE = "application/x-tar";
export const FILE_MEDIA_TYPE = "application/octet-stream";
export const RESULT_TRAILER = "sandgate-result";

export const TransferCounts = z.strictObject({
  /** The normalised remote path. */
  path: z.string(),
  /** Members copied (files, directories, links). */
  entries: z.number().int().min(0),
  /** Members not copied: FIFOs, device nodes, an archive's "./" entry. */
  skipped: z.number().int().min(0),
  /** Data bytes of the files copied. */
  bytes: z.number().int().min(0),
});
export type TransferCounts = z.infer<typeof TransferCounts>;

/** How a transfer ended: the upload's answer, and the download's trailer. */
export const TransferResultView = z.union([
  TransferCounts.extend({ ok: z.literal(true) }),
  TransferCounts.partial().extend({ ok: z.literal(false), error: z.strictObject({ code: z.string(), message: z.string() }) }),
]);
export type TransferResultView = z.infer<typeof TransferResultView>;

export const FileStatView = z
  .strictObject({
    path: z.string(),
    type: z.enum(["file", "directory", "symlink", "other"]),
    mode: z.number().int().min(0),
    size: z.number().int().min(0),
  })
  .describe("What a path inside /sandbox is.");
export type FileStatView = z.infer<typeof FileStatView>;

/** JSON in printable ASCII (\u escapes for the rest): a valid HTTP header or trailer value. */
export function asciiJson(value: unknown): string {
  return JSON.stringify(value).replace(/[\u007f-\uffff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`);
}
