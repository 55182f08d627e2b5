// Start a server listening; resolves with its address, rejects on a listen error (e.g. EADDRINUSE).

import type { Server } from "node:http";
import type { AddressInfo } from "node:net";

export function listen(server: Server, port: number, host: string): Promise<AddressInfo> {
  return new Promise((resolve, reject) => {
    const onError = (err: Error): void => reject(err);
    server.once("error", onError);
    server.listen(port, host, () => {
      server.off("error", onError);
      resolve(server.address() as AddressInfo);
    });
  });
}
