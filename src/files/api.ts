// The files API as the gateway and the CLI share it: media types, the trailer
// that ends a download, and the shapes of answers. Types and constants only.
//
//   GET  /v1/sandboxes/:name/files?path=P        → 200 application/x-tar (chunked); the
//        trailer `sandgate-result` says how it ended: {"ok":true,...} or {"ok":false,"error":{...}}.
//        The end-of-archive marker is sent only when the copy succeeded.
//   GET  /v1/sandboxes/:name/files/stat?path=P   → 200 FileStatView
//   PUT  /v1/sandboxes/:name/files?path=DIR      application/x-tar: extracted into DIR
//   PUT  /v1/sandboxes/:name/files?path=F&mode=0644  application/octet-stream (with a
//        Content-Length): the file F, replaced only once complete
//        → 200 TransferResultView

export const TAR_MEDIA_TYPE = "application/x-tar";
export const FILE_MEDIA_TYPE = "application/octet-stream";
export const RESULT_TRAILER = "sandgate-result";

export interface TransferCounts {
  /** The normalised remote path. */
  path: string;
  /** Members copied (files, directories, links). */
  entries: number;
  /** Members not copied: FIFOs, device nodes, an archive's "./" entry. */
  skipped: number;
  /** Data bytes of the files copied. */
  bytes: number;
}

export type TransferResultView = ({ ok: true } & TransferCounts) | ({ ok: false; error: { code: string; message: string } } & Partial<TransferCounts>);

export interface FileStatView {
  path: string;
  type: "file" | "directory" | "symlink" | "other";
  mode: number;
  size: number;
}

/** JSON in printable ASCII (\u escapes for the rest): a valid HTTP header or trailer value. */
export function asciiJson(value: unknown): string {
  return JSON.stringify(value).replace(/[\u007f-\uffff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`);
}
