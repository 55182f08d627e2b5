// Small network helpers for tests on loopback.

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
