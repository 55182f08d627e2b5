// The API's listeners, one request handler behind them all: the home's Unix socket (always;
// fastify's own server), more sockets, and TCP listeners that serve only TLS with the home's
// API certificate (listen-address.ts says why). Upgrades (exec, port-forward) and malformed
// requests of every listener go to the main server's handlers, so each is written once.

import { connect } from "node:net";
import { chmodSync, lstatSync, unlinkSync } from "node:fs";
import http, { type RequestListener, type Server } from "node:http";
import https from "node:https";
import type { AddressInfo } from "node:net";
import { StartupError, isAddrInUse, portInUse } from "../startup.js";
import { UNIX_PATH_MAX, clientUrl, type ListenAddress } from "./listen-address.js";

export interface TlsIdentity {
  certPem: string;
  keyPem: string;
}

/** Before the slow parts of start-up: a path that cannot hold a socket fails at once. */
export function checkSocketPath(path: string): void {
  if (Buffer.byteLength(path) > UNIX_PATH_MAX) {
    throw new StartupError(`the API socket ${path} is over ${UNIX_PATH_MAX} bytes, the longest a Unix socket path may be; choose a shorter --home (env SANDGATE_HOME)`);
  }
}

/**
 * A socket path left by a gateway that died is removed; one a process still answers on
 * is another gateway's, and this one must not start. Anything else there is not ours to remove.
 */
export async function claimSocketPath(path: string): Promise<void> {
  checkSocketPath(path);
  let isSocket: boolean;
  try {
    isSocket = lstatSync(path).isSocket();
  } catch {
    return; // nothing there
  }
  if (!isSocket) throw new StartupError(`${path} exists and is not a socket; move it away and start again`);
  if (await answers(path)) throw new StartupError(`a process already listens on ${path} (another gateway of this home?); stop it first: sandgate gateway stop`);
  unlinkSync(path);
}

function answers(path: string): Promise<boolean> {
  return new Promise((resolve) => {
    const s = connect({ path });
    s.once("connect", () => {
      s.destroy();
      resolve(true);
    });
    s.once("error", () => resolve(false));
  });
}

/** Listen on a Unix socket readable and writable by its owner only (connect needs write). */
export async function listenUnix(server: Server, path: string): Promise<void> {
  await claimSocketPath(path);
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen({ path, exclusive: true }, () => {
      server.off("error", reject);
      resolve();
    });
  });
  chmodSync(path, 0o600);
}

async function listenTcp(server: Server, host: string, port: number): Promise<number> {
  try {
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen({ host, port, exclusive: true }, () => {
        server.off("error", reject);
        resolve();
      });
    });
  } catch (err) {
    throw isAddrInUse(err) ? portInUse("the API", host, port) : err;
  }
  return (server.address() as AddressInfo).port;
}

export interface ExtraListeners {
  /** Client URLs of the extra listeners, in the order given (TCP with the port it got). */
  readonly urls: string[];
  readonly servers: readonly Server[];
  close(): Promise<void>;
}

/**
 * Opens every extra listener on `handler`, forwarding upgrades and client errors to `main`
 * (whose handlers answer them). On a failure the ones already open are closed.
 */
export async function openExtraListeners(main: Server, handler: RequestListener, addresses: readonly ListenAddress[], tls: () => Promise<TlsIdentity>, o: { serverOptions?: http.ServerOptions; onServer?: (server: Server) => void } = {}): Promise<ExtraListeners> {
  const servers: Server[] = [];
  const urls: string[] = [];
  const close = async (): Promise<void> => {
    await Promise.all(
      servers.map(
        (s) =>
          new Promise<void>((resolve) => {
            if (!s.listening) return resolve();
            s.close(() => resolve());
            s.closeAllConnections();
          }),
      ),
    );
  };
  try {
    for (const a of addresses) {
      const id = a.kind === "tcp" ? await tls() : null;
      const options = o.serverOptions ?? {};
      const server = id === null ? http.createServer(options, handler) : https.createServer({ ...options, cert: id.certPem, key: id.keyPem, minVersion: "TLSv1.2" }, handler);
      o.onServer?.(server);
      server.on("upgrade", (...args) => main.emit("upgrade", ...args));
      server.on("clientError", (...args) => main.emit("clientError", ...args));
      servers.push(server);
      if (a.kind === "unix") {
        await listenUnix(server, a.path);
        urls.push(clientUrl(a));
      } else {
        urls.push(clientUrl({ ...a, port: await listenTcp(server, a.host, a.port) }));
      }
    }
  } catch (err) {
    await close();
    throw err;
  }
  return { urls, servers, close };
}
