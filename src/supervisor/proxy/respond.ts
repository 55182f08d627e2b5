// Writes the proxy's own answers (refusals.ts words them): a JSON response on an HTTP
// exchange, or a whole response on a raw socket (a CONNECT or an Upgrade), then closed.
import type http from "node:http";
import type { Duplex } from "node:stream";
import { rawJsonResponse } from "./refusals.js";

/** A complete HTTP response written on a raw (CONNECT) socket, which is then closed. */
export function endRawJson(socket: Duplex, status: number, proxyError: string, body: object): void {
  socket.end(rawJsonResponse(status, proxyError, body));
  // The client should close after reading; don't let a silent one hold the socket.
  setTimeout(() => socket.destroy(), 5000).unref();
}

export function sendJson(res: http.ServerResponse, status: number, proxyError: string, body: object, close: boolean): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const json = JSON.stringify(body);
  const headers: http.OutgoingHttpHeaders = {
    "content-type": "application/json",
    "content-length": Buffer.byteLength(json),
    "x-proxy-error": proxyError,
  };
  // An unread request body would otherwise have to be drained to keep the connection.
  if (close) headers.connection = "close";
  // Set, not passed to writeHead: the audit record reads X-Proxy-Error back (auditor.ts).
  for (const [name, value] of Object.entries(headers)) res.setHeader(name, value!);
  res.writeHead(status);
  res.end(json);
}

/** How a tunnel's client hears, before any byte is relayed, whether it was established. */
export interface TunnelAnswer {
  /** Allowed and connected: from now on the socket carries the tunnel's bytes. */
  established(socket: Duplex): void;
  /** Refused (or unreachable) before it was established; the socket is closed after. */
  refuse(socket: Duplex, status: number, proxyError: string, body: object): void;
}

/** A CONNECT's client: the 200 line, or a whole JSON response saying why not. */
export const CONNECT_ANSWER: TunnelAnswer = {
  established: (socket) => void socket.write("HTTP/1.1 200 Connection Established\r\n\r\n"),
  refuse: endRawJson,
};
