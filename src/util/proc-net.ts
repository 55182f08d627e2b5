// The kernel's TCP socket table (/proc/net/tcp and tcp6), parsed once for every reader:
// who listens on a port (gateway start), which connections a process holds (benchmarks).

import { readFileSync } from "node:fs";

export interface TcpSocket {
  /** Local and remote address as the kernel writes them (hex, host byte order per word). */
  localHex: string;
  localPort: number;
  remoteHex: string;
  remotePort: number;
  /** The kernel's state code: "0A" LISTEN, "01" ESTABLISHED, ... */
  state: string;
  /** The socket's inode ("0" for a socket in TIME_WAIT). */
  inode: string;
}

/**
 * Every TCP socket of a network namespace, IPv4 and IPv6 (an unreadable table is skipped):
 * this process's by default, another's with `/proc/PID/net`.
 */
export function tcpSockets(procNet = "/proc/net"): TcpSocket[] {
  const out: TcpSocket[] = [];
  for (const table of [`${procNet}/tcp`, `${procNet}/tcp6`]) {
    let text: string;
    try {
      text = readFileSync(table, "utf8");
    } catch {
      continue;
    }
    for (const line of text.split("\n").slice(1)) {
      // sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode
      const f = line.trim().split(/\s+/);
      if (f.length < 10) continue;
      const [localHex = "", localPort = ""] = f[1]!.split(":");
      const [remoteHex = "", remotePort = ""] = f[2]!.split(":");
      out.push({ localHex, localPort: Number.parseInt(localPort, 16), remoteHex, remotePort: Number.parseInt(remotePort, 16), state: f[3]!, inode: f[9]! });
    }
  }
  return out;
}

/** Whether a kernel hex address is a loopback one (127.0.0.1, ::1 or ::ffff:127.0.0.1). */
export const isLoopbackHex = (hex: string): boolean => hex === "0100007F" || hex === "00000000000000000000000001000000" || hex.endsWith("0100007F");

/** A kernel hex address as text: "0200C90A" → "10.201.0.2"; 32 hex digits → IPv6 (uncompressed groups). */
export function addressOfHex(hex: string): string {
  // Each 32-bit word is in host (little-endian) byte order.
  const bytes = (hex.match(/.{8}/g) ?? []).flatMap((w) => [6, 4, 2, 0].map((i) => Number.parseInt(w.slice(i, i + 2), 16)));
  if (bytes.length === 4) return bytes.join(".");
  const groups: string[] = [];
  for (let i = 0; i < bytes.length; i += 2) groups.push(((bytes[i]! << 8) | bytes[i + 1]!).toString(16));
  return groups.join(":");
}
