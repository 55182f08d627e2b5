// The reference child of bench/tls-cpu.ts: the floor of any terminator written in node.
// It answers the CONNECT, ends the client's TLS with the same leaf and cipher order as the
// supervisor, and pipes the plaintext to its own TLS connection to the origin: two TLS
// legs and nothing else (no HTTP parsing, no policy, no audit). Config: argv[2].
import { readFileSync } from "node:fs";
import net from "node:net";
import tls from "node:tls";
import { CIPHERS_FAST_FIRST } from "../../src/supervisor/tls/ciphers.js";
import { LeafCertificates } from "../../src/supervisor/tls/leaf-certs.js";

const cfg = JSON.parse(readFileSync(process.argv[2]!, "utf8")) as { originPort: number; sandboxCa: { certPem: string; keyPem: string }; originCaPem: string };
const leaves = new LeafCertificates(cfg.sandboxCa);
const server = net.createServer((client) => {
  client.setNoDelay(true);
  client.once("data", () => {
    // The bench's client sends one CONNECT and waits for the answer before its ClientHello.
    client.pause();
    client.write("HTTP/1.1 200 Connection established\r\n\r\n");
    void leaves.context("origin.test").then((secureContext) => {
      const down = new tls.TLSSocket(client, { isServer: true, secureContext, ALPNProtocols: ["http/1.1"] });
      const up = tls.connect({ host: "127.0.0.1", port: cfg.originPort, servername: "origin.test", ca: cfg.originCaPem, ALPNProtocols: ["http/1.1"], ciphers: CIPHERS_FAST_FIRST });
      up.setNoDelay(true);
      down.pipe(up).pipe(down);
    });
  });
});
server.listen(0, "127.0.0.1", () => {
  process.once("SIGTERM", () => process.exit(0));
  process.stdout.write(`${(server.address() as net.AddressInfo).port}\n`);
});
