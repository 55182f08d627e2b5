// Where the supervisor's namespace sends the workload's UDP (other than DNS): nothing of it
// goes anywhere. Each datagram is counted and reported as a `udp_dropped` decision, which the
// audit aggregator folds into one record with a count (so a flood costs one record a window).
// The original destination is not known here (the kernel keeps it only for a socket that asks
// with IP_RECVORIGDSTADDR, which node cannot), so the record names none.
import dgram from "node:dgram";
import type { AuditEvent } from "../proxy/types.js";

export interface UdpSink {
  listen(port: number, host: string): Promise<number>;
  readonly dropped: number;
  close(): Promise<void>;
}

export function createUdpSink(onAudit: (event: AuditEvent) => void): UdpSink {
  const socket = dgram.createSocket({ type: "udp4" });
  let dropped = 0;
  socket.on("message", () => {
    dropped++;
    onAudit({ type: "egress", time: new Date().toISOString(), decision: "deny", reason: "udp_dropped", host: "", port: 0, protocol: "udp", via: "transparent" });
  });
  socket.on("error", () => undefined);
  return {
    listen: (port, host) =>
      new Promise((resolve, reject) => {
        socket.once("error", reject);
        socket.bind(port, host, () => {
          socket.off("error", reject);
          resolve(socket.address().port);
        });
      }),
    get dropped() {
      return dropped;
    },
    close: () => new Promise<void>((r) => socket.close(() => r())).catch(() => undefined),
  };
}
