// The API's WebSocket upgrades (exec-ws.ts, port-forward-ws.ts): one `upgrade` listener on
// the server, one auth hook, then the handler whose path matches.
//
// Why one dispatcher: with a listener per route, each route ran its own token check and
// had to know every other route's path (to stay silent for it, or to answer an unknown one
// with 404); a route added later could skip the check, or two could both answer one socket.
// Here the token check (auth.ts's authorize, the same as the HTTP routes' hook in api.ts)
// runs first for every upgrade, known path or not, and no handler is reached before it
// passed. An unknown path is then refused with 404, as an unknown HTTP route is.

import type { IncomingMessage, Server } from "node:http";
import type { Duplex } from "node:stream";
import type { Logger } from "pino";
import { ApiError, rawErrorAnswer } from "../errors.js";
import { authorize, type Authenticated } from "./auth.js";

/** A WebSocket route: its path and its handler, reached only by an authenticated upgrade. */
export interface UpgradeRoute {
  /** The route's path (routes.ts's pathPattern), the sandbox captured. */
  readonly pattern: RegExp;
  /** Answers the upgrade or refuses it (refuseUpgrade); never rejects. */
  handle(req: IncomingMessage, socket: Duplex, head: Buffer, match: RegExpExecArray): Promise<void>;
  /** The gateway closes: its open sessions end. */
  close(): void;
}

/** Answers an upgrade with the API's error shape (an HTTP response, not a WebSocket) and ends the socket. */
export function refuseUpgrade(socket: Duplex, err: ApiError): void {
  socket.end(rawErrorAnswer(err));
}

/**
 * Takes the server's upgrades (the extra listeners' too: listeners.ts forwards theirs to
 * it). close() closes every route.
 */
export function attachUpgrades(server: Server, ctx: { token: string; log: Logger; authenticated?: Authenticated }, routes: readonly UpgradeRoute[]): { close(): void } {
  server.on("upgrade", (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    // A client may vanish or send garbage at any point: its socket's errors are its own.
    socket.on("error", (err) => ctx.log.debug({ err: err.message }, "socket error before the upgrade"));
    // The one auth hook: before anything looks at the path.
    const refused = authorize(req.headers.authorization, socket, ctx.token, ctx.authenticated);
    if (refused !== null) return refuseUpgrade(socket, refused);
    const url = req.url ?? "";
    for (const route of routes) {
      const m = route.pattern.exec(url);
      if (m === null) continue;
      void route.handle(req, socket, head, m).catch((err: unknown) => {
        ctx.log.error({ err }, "upgrade handler failed");
        socket.destroy();
      });
      return;
    }
    refuseUpgrade(socket, new ApiError("not_found", `no route for upgrade ${url}`));
  });
  return {
    close() {
      for (const route of routes) route.close();
    },
  };
}
