// WebSocket upgrades through the proxy: the Upgrade request was decided like any request;
// this relays it to the origin and, on 101, both sockets to each other. Only `websocket` is
// relayed: another upgrade (h2c) would carry requests the proxy could no longer see.
import type http from "node:http";
import type { Duplex } from "node:stream";
import { PROXY_ERROR, otherUpgrade } from "./refusals.js";
import { endRawJson } from "./respond.js";
import { splice } from "./splice.js";

/** The one upgrade protocol relayed. */
export const WEBSOCKET = "websocket";

/** Whether the request asks to upgrade to WebSocket; else the Upgrade value it asked for. */
export function websocketUpgrade(req: http.IncomingMessage): { ok: true } | { ok: false; asked: string } {
  const asked = req.headers.upgrade ?? "";
  const tokens = asked.split(",").map((t) => t.trim().toLowerCase());
  return tokens.length === 1 && tokens[0] === WEBSOCKET && req.method === "GET" ? { ok: true } : { ok: false, asked };
}

/** Answers 400 to an Upgrade other than WebSocket on GET; true when it is one. */
export function refuseOtherUpgrade(req: http.IncomingMessage, socket: Duplex): boolean {
  const u = websocketUpgrade(req);
  if (u.ok) return true;
  endRawJson(socket, 400, PROXY_ERROR, otherUpgrade(req.method, u.asked));
  return false;
}

/**
 * An Upgrade request's headers as sent upstream: `headers`, its end-to-end ones (placeholders
 * already swapped where that applies), then the authority checked and the upgrade asked for.
 */
export function upgradeHeaders(headers: readonly string[], authority: string): string[] {
  return [...headers, "Host", authority, "Connection", "Upgrade", "Upgrade", WEBSOCKET];
}

/** An HTTP/1.1 response head written on a raw socket. */
function rawHead(status: number, message: string | undefined, headers: readonly string[]): string {
  let head = `HTTP/1.1 ${String(status)} ${message ?? ""}\r\n`;
  for (let i = 0; i < headers.length; i += 2) head += `${headers[i]!}: ${headers[i + 1]!}\r\n`;
  return `${head}\r\n`;
}

export interface UpgradeRelay {
  /** The workload's socket (after its Upgrade request) and the bytes read past that request. */
  client: Duplex;
  head: Buffer;
  /** The Upgrade request to the origin, not yet ended. */
  upstream: http.ClientRequest;
  /** The headers of a refused upgrade's response as passed on (hop-by-hop ones removed). */
  responseHeaders: (raw: readonly string[]) => string[];
  /** The origin answered 101: its socket, now relayed (register it, for revocation). */
  onUpgraded: (socket: Duplex) => void;
  /** The origin was not reached (no response): the caller answers the client. */
  onError: (err: NodeJS.ErrnoException) => void;
}

/**
 * Sends the Upgrade request and relays what comes back. Until the 101 the client is not read:
 * bytes it sends early wait in its socket (TCP back-pressure, nothing buffered here) and go
 * upstream, in order, after the 101, or are dropped with the connection when the origin
 * answers anything else (that answer is passed on, then the connection closed).
 */
export function relayUpgrade(r: UpgradeRelay): void {
  const { client, upstream } = r;
  client.pause();
  let answered = false;
  const abandon = (): void => void upstream.destroy();
  client.once("close", abandon);
  upstream.once("upgrade", (res: http.IncomingMessage, socket: Duplex, upHead: Buffer) => {
    answered = true;
    client.off("close", abandon);
    r.onUpgraded(socket);
    if (client.destroyed) {
      socket.destroy();
      return;
    }
    client.write(rawHead(101, res.statusMessage, res.rawHeaders));
    if (upHead.length > 0) client.write(upHead);
    if (r.head.length > 0) socket.write(r.head);
    splice(client, socket);
  });
  upstream.once("response", (res: http.IncomingMessage) => {
    answered = true;
    client.write(rawHead(res.statusCode ?? 502, res.statusMessage, [...r.responseHeaders(res.rawHeaders), "Connection", "close"]));
    res.pipe(client);
    res.once("error", () => client.destroy());
    res.once("close", () => {
      if (!res.complete) client.destroy();
    });
  });
  upstream.on("error", (err: NodeJS.ErrnoException) => {
    if (answered) {
      client.destroy();
      return;
    }
    r.onError(err);
  });
  upstream.end();
}
