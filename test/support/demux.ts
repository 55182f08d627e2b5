// Collect a hijacked exec stream's stdout and stderr (Docker's multiplexed framing) until it ends.

import type { Duplex } from "node:stream";
import { createDemuxer } from "../../src/driver/docker/engine/demux.js";

export function collectDemuxed(sock: Duplex): Promise<{ out: string; err: string }> {
  return new Promise((resolve, reject) => {
    let out = "";
    let err = "";
    const d = createDemuxer((b) => (out += b.toString()), (b) => (err += b.toString()), { onError: (m) => reject(new Error(m)) });
    sock.on("data", (c: Buffer) => d.push(c));
    sock.on("error", reject);
    sock.on("end", () => {
      d.end();
      resolve({ out, err });
    });
  });
}
