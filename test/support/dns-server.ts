// A tiny UDP DNS responder for tests: records every question it is asked and
// answers from a table of A records (NXDOMAIN for anything else). Enough of RFC
// 1035 to serve Docker's embedded resolver, node's dns module and busybox.
import { createSocket, type Socket } from "node:dgram";

export interface DnsQuestion {
  name: string;
  type: number;
  from: string;
}

export class TestDnsServer {
  readonly questions: DnsQuestion[] = [];

  private constructor(
    private readonly socket: Socket,
    readonly address: string,
    readonly port: number,
    private readonly records: Map<string, string>,
  ) {}

  /** Listen on address:port (port 53 needs root); `records` maps lower-case names to IPv4 addresses. */
  static async start(address: string, port = 53, records: Record<string, string> = {}): Promise<TestDnsServer> {
    const socket = createSocket("udp4");
    await new Promise<void>((resolve, reject) => {
      socket.once("error", reject);
      socket.bind(port, address, () => resolve());
    });
    const server = new TestDnsServer(socket, address, socket.address().port, new Map(Object.entries(records).map(([k, v]) => [k.toLowerCase(), v])));
    socket.on("message", (msg, rinfo) => server.answer(msg, `${rinfo.address}:${rinfo.port}`, rinfo.address, rinfo.port));
    return server;
  }

  /**
   * start() on port 53 of a loopback address of 127.P.0.0/16 nobody else holds: another copy
   * of the suite may be serving the one this one would have picked (EADDRINUSE), so addresses
   * are tried at random until one binds.
   */
  static async startOnFreeLoopback(prefix: string, records: Record<string, string> = {}): Promise<TestDnsServer> {
    for (let attempt = 0; ; attempt++) {
      const address = `${prefix}.${String(1 + Math.floor(Math.random() * 254))}.${String(1 + Math.floor(Math.random() * 254))}`;
      try {
        return await TestDnsServer.start(address, 53, records);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== "EADDRINUSE" || attempt >= 50) throw err;
      }
    }
  }

  /** Names asked so far (lower case). */
  names(): string[] {
    return this.questions.map((q) => q.name);
  }

  private answer(msg: Buffer, from: string, host: string, port: number): void {
    if (msg.length < 12) return;
    let at = 12;
    const labels: string[] = [];
    while (at < msg.length && msg[at] !== 0) {
      const len = msg[at]!;
      if (len > 63 || at + 1 + len > msg.length) return;
      labels.push(msg.subarray(at + 1, at + 1 + len).toString("latin1"));
      at += 1 + len;
    }
    if (at + 5 > msg.length) return;
    const qEnd = at + 5; // zero label, QTYPE, QCLASS
    const type = msg.readUInt16BE(at + 1);
    const name = labels.join(".").toLowerCase();
    this.questions.push({ name, type, from });
    const ip = type === 1 ? this.records.get(name) : undefined;
    const header = Buffer.alloc(12);
    msg.copy(header, 0, 0, 2); // id
    header.writeUInt16BE(0x8180 | (ip === undefined && !this.records.has(name) ? 3 : 0), 2); // response, RD+RA, NXDOMAIN unless known
    header.writeUInt16BE(1, 4); // QDCOUNT
    header.writeUInt16BE(ip === undefined ? 0 : 1, 6); // ANCOUNT
    const question = msg.subarray(12, qEnd);
    const parts = [header, question];
    if (ip !== undefined) {
      const rr = Buffer.alloc(16);
      rr.writeUInt16BE(0xc00c, 0); // name: pointer to the question
      rr.writeUInt16BE(1, 2); // A
      rr.writeUInt16BE(1, 4); // IN
      rr.writeUInt32BE(5, 6); // TTL 5 s
      rr.writeUInt16BE(4, 10);
      ip.split(".").forEach((o, i) => rr.writeUInt8(Number(o), 12 + i));
      parts.push(rr);
    }
    this.socket.send(Buffer.concat(parts), port, host);
  }

  close(): Promise<void> {
    return new Promise((resolve) => this.socket.close(() => resolve()));
  }
}
