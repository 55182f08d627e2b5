// Small network helpers for tests on loopback.

import net, { type AddressInfo } from "node:net";

/** A TCP port on 127.0.0.1 that nothing listens on (bound, then released). */
export async function freePort(): Promise<number> {
  const s = net.createServer();
  await new Promise<void>((r) => s.listen(0, "127.0.0.1", r));
  const { port } = s.address() as AddressInfo;
  await new Promise<void>((r) => s.close(() => r()));
  return port;
}
