// Start a server listening; resolves with its address, rejects on a listen error (e.g. EADDRINUSE).

import type { Server } from "node:http";
import type { AddressInfo } from "node:net";
import { networkInterfaces, type NetworkInterfaceInfo } from "node:os";
import { cidrContains, parseCidr, parseIp } from "../policy/core.js";

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
