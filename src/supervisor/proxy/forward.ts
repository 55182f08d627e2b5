// Plain-HTTP forwarding: an allowed request goes to its checked address over the registry's
// keep-alive agent (each upstream socket remembers what it carried, for revocation), with a
// connect deadline, and is retried once on a fresh connection when a pooled socket turns
// out closed and the request has no body.
import http from "node:http";
import { TimeoutError } from "../../util/timeout.js";
import type { ProxyContext } from "./context.js";
import { endToEndHeaders, hasBody } from "./headers.js";
import { UPSTREAM_ERROR, unreachable, unreachableBody } from "./refusals.js";
import { grantOf } from "./registry.js";
import { sendJson } from "./respond.js";
import type { HttpTarget } from "./target.js";

/**
 * `endToEnd`: the request's end-to-end headers (headers.ts requestHeaders), left as they are
 * (a retry passes them again). `watch`: given each upstream request made (auditor.ts atEnd).
 */
export function forward(ctx: ProxyContext, req: http.IncomingMessage, res: http.ServerResponse, t: HttpTarget, address: string, endToEnd: readonly string[], mayRetry: boolean, watch?: (upReq: http.ClientRequest) => void): void {
  const { registry, logger } = ctx;
  const bodyless = !hasBody(req);
  const headers = [...endToEnd, "Host", t.authority];
  // Node decoded the client's chunked framing; re-frame the body upstream.
  if (req.headers["transfer-encoding"] !== undefined) headers.push("Transfer-Encoding", "chunked");

  const upReq = http.request({
    host: address,
    port: t.port,
    method: t.method,
    path: t.requestPath,
    headers,
    setHost: false,
    agent: registry.agent,
  });
  watch?.(upReq);
  let responded = false;

  upReq.on("socket", (socket) => {
    registry.carries(socket, grantOf(t, address));
    if (!socket.connecting) return;
    const timer = setTimeout(() => upReq.destroy(new TimeoutError(`connect to ${address}:${t.port} timed out`)), ctx.connectTimeoutMs);
    const clear = (): void => clearTimeout(timer);
    socket.once("connect", clear);
    socket.once("close", clear);
  });

  upReq.on("response", (upRes) => {
    responded = true;
    const headers = endToEndHeaders(upRes.rawHeaders);
    // While shutting down, tell keep-alive clients to go elsewhere.
    if (ctx.closing()) headers.push("Connection", "close");
    res.writeHead(upRes.statusCode ?? 502, upRes.statusMessage, headers);
    // pipe(), not pipeline(): pipeline allocates an AbortController per call,
    // measurable at proxy request rates. A cut upstream body is passed on as a
    // cut client connection, never as a clean end.
    upRes.pipe(res);
    upRes.once("error", () => res.destroy());
    upRes.once("close", () => {
      if (!upRes.complete) res.destroy();
    });
  });

  upReq.on("error", (err: NodeJS.ErrnoException) => {
    if (responded) return; // the response side reports it by destroying res
    // A pooled keep-alive socket may have been closed by the origin just now;
    // retry once on a fresh connection, but only for a request without a body.
    if (mayRetry && upReq.reusedSocket && err.code === "ECONNRESET" && bodyless && !res.destroyed) {
      forward(ctx, req, res, t, address, endToEnd, false, watch);
      return;
    }
    req.unpipe(upReq);
    const o = unreachable(err);
    logger.warn("upstream unreachable", { host: t.host, port: t.port, address, code: o.code });
    sendJson(res, o.status, UPSTREAM_ERROR, unreachableBody(t, o, address), ctx.closing() || !bodyless);
  });

  res.once("close", () => {
    if (!res.writableFinished) upReq.destroy();
  });

  if (bodyless) upReq.end();
  else req.pipe(upReq);
}
