// Small network helpers for tests on loopback and Unix sockets.

import http from "node:http";
import net, { type AddressInfo } from "node:net";

/** Listens on a free port of `host`; closing it (an http server's connections too) goes on `cleanups`. */
export async function listenOn(server: net.Server, cleanups: (() => unknown)[], host = "127.0.0.1"): Promise<number> {
  await new Promise<void>((r) => server.listen(0, host, r));
  cleanups.push(
    () =>
      new Promise<void>((r) => {
        if (server instanceof http.Server) server.closeAllConnections();
        server.close(() => r());
      }),
  );
  return (server.address() as AddressInfo).port;
}

/** A TCP port on 127.0.0.1 that nothing listens on (bound, then released). */
export async function freePort(): Promise<number> {
  const s = net.createServer();
  await new Promise<void>((r) => s.listen(0, "127.0.0.1", r));
  const { port } = s.address() as AddressInfo;
  await new Promise<void>((r) => s.close(() => r()));
  return port;
}

/** GET `path` over the Unix socket at `socketPath` (a supervisor's health endpoint); the body as JSON. */
export function getOverUnix(socketPath: string, path = "/healthz"): Promise<{ status: number; body: Record<string, unknown> }> {
  return new Promise((resolve, reject) => {
    http
      .get({ socketPath, path, agent: false }, (res) => {
        let text = "";
        res.setEncoding("utf8");
        res.on("data", (c: string) => (text += c));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, body: JSON.parse(text) as Record<string, unknown> }));
      })
      .on("error", reject);
  });
}
