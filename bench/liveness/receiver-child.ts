// The receiving end of bench/liveness.ts, alone in its process so its CPU is its own: one
// way of hearing N sandboxes' liveness beats. argv[2] = mode, argv[3] = config file.
// It counts what it heard and prints its port (0 for the file sweep) on stdout.
import { createHmac, timingSafeEqual } from "node:crypto";
import dgram from "node:dgram";
import { readFileSync, readdirSync, statSync } from "node:fs";
import https from "node:https";
import { join } from "node:path";
import { WebSocketServer } from "ws";

const mode = process.argv[2]!;
const cfg = JSON.parse(readFileSync(process.argv[3]!, "utf8")) as { certPem: string; keyPem: string; key: string; dir: string; sweepMs: number };
let heard = 0;
process.on("message", () => process.send!({ heard }));
process.once("SIGTERM", () => process.exit(0));
const ready = (port: number): void => void process.stdout.write(`${port}\n`);

if (mode === "ws-idle" || mode === "ws-ping-pong" || mode === "ws-ping") {
  const server = https.createServer({ cert: cfg.certPem, key: cfg.keyPem });
  const wss = new WebSocketServer({ server, autoPong: mode === "ws-ping-pong" });
  wss.on("connection", (ws) => {
    ws.on("ping", () => heard++);
    ws.on("message", () => heard++);
  });
  server.listen(0, "127.0.0.1", () => ready((server.address() as { port: number }).port));
} else if (mode === "udp-hmac") {
  // One socket for every sandbox; a beat is `id seq` and an HMAC-SHA256 under that sandbox's key.
  const key = Buffer.from(cfg.key, "hex");
  const socket = dgram.createSocket("udp4");
  socket.on("message", (m) => {
    if (m.length <= 32) return;
    const mac = createHmac("sha256", key).update(m.subarray(0, m.length - 32)).digest();
    if (timingSafeEqual(mac, m.subarray(m.length - 32))) heard++;
  });
  socket.bind(0, "127.0.0.1", () => ready(socket.address().port));
} else if (mode === "file-sweep") {
  // Each sandbox touches its own file; one timer reads every file's mtime per sweep.
  const files = readdirSync(cfg.dir).map((f) => join(cfg.dir, f));
  const last = new Map<string, number>();
  setInterval(() => {
    for (const f of files) {
      const t = statSync(f).mtimeMs;
      if (last.get(f) !== t) {
        last.set(f, t);
        heard++;
      }
    }
  }, cfg.sweepMs);
  ready(0);
} else {
  process.stderr.write(`unknown mode ${mode}\n`);
  process.exit(2);
}
