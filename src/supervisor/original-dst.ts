// The original destination of a connection the supervisor's network namespace redirected to
// its transparent listener (nftables REDIRECT rewrites the destination; the kernel keeps the
// original in conntrack): getsockopt(SO_ORIGINAL_DST), through the Node-API addon built from
// native/orig-dst.c, shipped beside the bundle in the supervisor's image.
import { createRequire } from "node:module";
import type { Socket } from "node:net";

export interface Destination {
  address: string;
  port: number;
}

export type OriginalDst = (socket: Socket) => Destination;

/**
 * Loads the addon at `path`; the function it gives reads a socket's original destination.
 * Throws (with the loader's reason) when the addon cannot be loaded: the transparent
 * listener is then not started and the health report says so.
 */
export function loadOriginalDst(path: string): OriginalDst {
  const addon = createRequire(import.meta.url)(path) as { originalDst(fd: number): Destination };
  return (socket) => {
    // Node has no public fd of a socket; its TCP handle carries it on POSIX.
    const fd = (socket as Socket & { _handle?: { fd?: number } })._handle?.fd;
    if (typeof fd !== "number" || fd < 0) throw Object.assign(new Error("the socket has no file descriptor (closed?)"), { code: "EBADF" });
    return addon.originalDst(fd);
  };
}
