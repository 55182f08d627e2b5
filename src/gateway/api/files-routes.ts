// The files API (src/files/api.ts has the contract): a tar stream out of a Ready
// sandbox, a tar or one file into it, and what a path is. Bodies are streams in
// both directions; every bound is FileTransfers'.

import type { ServerResponse } from "node:http";
import type { Readable } from "node:stream";
import type { FastifyReply } from "fastify";
import { FILE_MEDIA_TYPE, RESULT_TRAILER, TAR_MEDIA_TYPE, asciiJson, type TransferResultView } from "../../files/api.js";
import { ApiError, errorBody } from "../errors.js";
import type { FileTransfers, UploadBody } from "../files/transfers.js";
import { route, type RouteGroup } from "./register.js";

const nameOf = (params: unknown): string => (params as { name: string }).name;

function sendError(reply: FastifyReply, e: ApiError): FastifyReply {
  // The body may be unread: the connection is not reused.
  return reply.code(e.status).header("connection", "close").send(errorBody(e));
}

/** Resolves when `res` can take more, or has closed; an IdleTimeout-like error after `ms`. */
function writable(res: ServerResponse, ms: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      cleanup();
      res.destroy();
      reject(new ApiError("unavailable", `the client read nothing for ${ms / 1000} s`));
    }, ms);
    const done = (): void => {
      cleanup();
      resolve();
    };
    const cleanup = (): void => {
      clearTimeout(timer);
      res.off("drain", done);
      res.off("close", done);
    };
    res.on("drain", done).on("close", done);
  });
}

async function* nothing(): AsyncGenerator<Buffer> {
  /* an empty body */
}

export const fileRoutes: RouteGroup<{ files: FileTransfers }> = async (scope, { files }) => {
  // Bodies here are streams, never buffered by a parser (and never limited by bodyLimit:
  // FileTransfers bounds them). Only here: the group's own plugin scope keeps it from the others.
  scope.removeAllContentTypeParsers();
  scope.addContentTypeParser("*", (_req, payload, done) => done(null, payload));

  route(scope, "statFile", async (req, _reply, input) => files.stat(nameOf(req.params), input.query().path));

  route(scope, "downloadFiles", async (req, reply, input) => {
    const q = input.query();
    if (q.mode !== undefined) throw new ApiError("invalid_request", "mode: applies to a single-file upload (PUT), not to a download");
    const dl = await files.download(nameOf(req.params), q.path);
    reply.hijack();
    const res = reply.raw;
    res.writeHead(200, { "content-type": TAR_MEDIA_TYPE, trailer: RESULT_TRAILER, "cache-control": "no-store", "x-content-type-options": "nosniff" });
    let result: TransferResultView;
    try {
      for await (const chunk of dl.stream) {
        if (res.destroyed) break;
        if (!res.write(chunk)) await writable(res, files.limits.idleTimeoutMs);
      }
      result = { ok: true, ...dl.summary() };
    } catch (e) {
      const err = e instanceof ApiError ? e : new ApiError("internal", "internal error; see the gateway log");
      if (!(e instanceof ApiError)) req.log.error({ err: e }, "download failed");
      result = { ok: false, error: { code: err.code, message: err.message }, ...dl.summary() };
    }
    if (res.destroyed) return undefined;
    res.addTrailers({ [RESULT_TRAILER]: asciiJson(result) });
    res.end();
    return undefined;
  });

  route(scope, "uploadFiles", async (req, reply, input) => {
    try {
      const q = input.query();
      const type = (req.headers["content-type"] ?? "").split(";")[0]!.trim().toLowerCase();
      const lengthHeader = req.headers["content-length"];
      const length = lengthHeader === undefined ? undefined : Number(lengthHeader);
      const stream = req.body as Readable | undefined;
      // Not destroyed when we stop reading early: the error answer must still reach the client.
      const body: AsyncIterable<Buffer> = stream ? stream.iterator({ destroyOnReturn: false }) : nothing();
      let kind: UploadBody;
      if (type === FILE_MEDIA_TYPE) {
        if (length === undefined || !Number.isSafeInteger(length)) {
          throw new ApiError("invalid_request", `a single-file upload (${FILE_MEDIA_TYPE}) needs a Content-Length; send a tar (${TAR_MEDIA_TYPE}) to stream without one`);
        }
        kind = { kind: "file", size: length, mode: q.mode === undefined ? 0o644 : parseInt(q.mode, 8) };
      } else if (type === TAR_MEDIA_TYPE) {
        if (q.mode !== undefined) throw new ApiError("invalid_request", `mode: applies to a single-file upload (${FILE_MEDIA_TYPE}); a tar carries each member's mode`);
        kind = { kind: "tar", ...(length === undefined ? {} : { contentLength: length }) };
      } else {
        throw new ApiError("invalid_request", `content-type must be ${TAR_MEDIA_TYPE} (a tar, extracted into the directory path) or ${FILE_MEDIA_TYPE} (one file written at path); got ${JSON.stringify(type)}`);
      }
      const summary = await files.upload(nameOf(req.params), q.path, body, kind);
      return { ok: true, ...summary };
    } catch (e) {
      if (e instanceof ApiError) return sendError(reply, e);
      throw e;
    }
  });
};
