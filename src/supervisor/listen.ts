// Start a server listening; resolves once it listens, rejects on a listen error (e.g. EADDRINUSE).

import type { Server } from "node:http";
import type { AddressInfo } from "node:net";
import { networkInterfaces, type NetworkInterfaceInfo } from "node:os";
import { cidrContains, parseCidr, parseIp } from "../policy/core.js";

function listening(server: Server, start: (done: () => void) => void): Promise<void> {
  return new Promise((resolve, reject) => {
    const onError = (err: Error): void => reject(err);
    server.once("error", onError);
    start(() => {
      server.off("error", onError);
      resolve();
    });
  });
}

/** On a TCP address; resolves with the address (the port chosen for 0). */
export async function listen(server: Server, port: number, host: string): Promise<AddressInfo> {
  await listening(server, (done) => server.listen(port, host, done));
  return server.address() as AddressInfo;
}

/** On a Unix socket at `path`. */
export function listenUnix(server: Server, path: string): Promise<void> {
  return listening(server, (done) => server.listen(path, done));
}

/** The first IPv4 address of this host's interfaces inside `cidr`, or null. */
export function addressIn(cidr: string, interfaces: NodeJS.Dict<NetworkInterfaceInfo[]> = networkInterfaces()): string | null {
  const parsed = parseCidr(cidr);
  if (!parsed.ok) return null;
  for (const list of Object.values(interfaces)) {
    for (const a of list ?? []) {
      const ip = a.family === "IPv4" ? parseIp(a.address) : null;
      if (ip && cidrContains(parsed.cidr, ip)) return a.address;
    }
  }
  return null;
}
