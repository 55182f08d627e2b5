// The kernel's TCP tables: another namespace's by its /proc/PID/net, and addresses as text.
import { createServer } from "node:net";
import { describe, expect, it } from "vitest";
import { addressOfHex, tcpSockets } from "../../../src/util/proc-net.js";

describe("proc-net", () => {
  it("addressOfHex reads the kernel's host-order words", () => {
    expect(addressOfHex("0200C90A")).toBe("10.201.0.2");
    expect(addressOfHex("00000000")).toBe("0.0.0.0");
    expect(addressOfHex("0100007F")).toBe("127.0.0.1");
    expect(addressOfHex("00000000000000000000000001000000")).toBe("0:0:0:0:0:0:0:1");
    expect(addressOfHex("0000000000000000FFFF00000200C90A")).toBe("0:0:0:0:0:ffff:ac9:2");
    expect(addressOfHex("000080FE000000000000000001000000")).toBe("fe80:0:0:0:0:0:0:1");
  });

  it("reads a namespace's table through /proc/PID/net: a listener of this process is there, in LISTEN", async () => {
    const srv = createServer();
    await new Promise<void>((r) => srv.listen(0, "127.0.0.1", r));
    const port = (srv.address() as { port: number }).port;
    try {
      const mine = tcpSockets(`/proc/${process.pid}/net`).filter((s) => s.localPort === port && s.state === "0A");
      expect(mine.map((s) => addressOfHex(s.localHex))).toEqual(["127.0.0.1"]);
      expect(tcpSockets().some((s) => s.localPort === port && s.state === "0A")).toBe(true);
    } finally {
      await new Promise<void>((r) => srv.close(() => r()));
    }
  });
});
