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

/** Every TCP socket of this network namespace, IPv4 and IPv6 (an unreadable table is skipped). */
export function tcpSockets(): TcpSocket[] {
  const out: TcpSocket[] = [];
  for (const table of ["/proc/net/tcp", "/proc/net/tcp6"]) {
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
