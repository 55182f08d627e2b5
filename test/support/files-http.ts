// Raw HTTP for the files API in tests: node:http, so that a download's trailer
// (`sandgate-result`) can be read and an upload's body streamed.
import { request } from "node:http";
import { drained } from "../../src/util/drained.js";
import { socketOf } from "./api-client.js";

export interface HttpAnswer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: Buffer;
  trailers: Record<string, string | undefined>;
  /** The trailer `sandgate-result`, parsed, when there is one. */
  result: any;
  json: any;
}

export function filesRequest(
  /** The gateway's unix:// URL. */
  base: string,
  token: string,
  method: "GET" | "PUT",
  path: string,
  opts: { body?: Buffer | AsyncIterable<Buffer>; headers?: Record<string, string>; onChunk?: (c: Buffer) => void; keep?: boolean } = {},
): Promise<HttpAnswer> {
  return new Promise((resolve, reject) => {
    const u = new URL(path, "http://sandgate");
    const headers: Record<string, string> = { authorization: `Bearer ${token}`, ...opts.headers };
    if (Buffer.isBuffer(opts.body) && headers["content-length"] === undefined && headers["transfer-encoding"] === undefined) headers["content-length"] = String(opts.body.length);
    const req = request({ socketPath: socketOf(base), path: u.pathname + u.search, method, headers });
    let answered = false;
    req.on("response", (res) => {
      answered = true;
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => {
        opts.onChunk?.(c);
        if (opts.keep !== false) chunks.push(c);
      });
      res.on("error", reject);
      res.on("end", () => {
        const body = Buffer.concat(chunks);
        const trailers = res.trailers;
        let json: any;
        try {
          json = JSON.parse(body.toString());
        } catch {
          json = undefined;
        }
        resolve({ status: res.statusCode ?? 0, headers: res.headers, body, trailers, result: trailers["sandgate-result"] ? JSON.parse(trailers["sandgate-result"]) : undefined, json });
      });
    });
    req.on("error", (err) => {
      if (!answered) reject(err);
    });
    if (opts.body === undefined) req.end();
    else if (Buffer.isBuffer(opts.body)) req.end(opts.body);
    else {
      const source = opts.body;
      void (async () => {
        try {
          for await (const c of source) {
            if (answered || req.destroyed) break;
            if (!req.write(c)) await drained(req);
          }
          req.end();
        } catch (err) {
          req.destroy(err as Error);
        }
      })();
    }
  });
}
