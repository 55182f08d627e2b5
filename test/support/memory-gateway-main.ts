// A gateway process on the in-memory driver (TEST DOUBLE), for tests that measure
// the gateway alone (its RSS) or kill it. Usage: node --import tsx memory-gateway-main.ts HOME [WATCH_MAX_BUFFERED_BYTES]
// Prints "ready <url>" once listening; exits on SIGTERM. Run with --expose-gc, a
// line "rss" on stdin collects garbage and answers "rss <bytes>" (what is retained).
import { pino } from "pino";
import { startGateway } from "../../src/gateway/gateway.js";
import { resolveHome } from "../../src/home.js";
import { MemoryDriver } from "./memory-driver.js";

const [home, maxBuffered] = process.argv.slice(2);
const gw = await startGateway({
  home: resolveHome(home),
  driver: new MemoryDriver(),
  log: pino({ level: "silent" }),
  ...(maxBuffered ? { watch: { maxBufferedBytes: Number(maxBuffered) } } : {}),
});
process.stdout.write(`ready ${gw.url}\n`);
process.once("SIGTERM", () => void gw.close().then(() => process.exit(0)));
process.stdin.setEncoding("utf8");
process.stdin.on("data", (line: string) => {
  if (!line.startsWith("rss")) return;
  (globalThis as { gc?: () => void }).gc?.();
  const m = process.memoryUsage();
  process.stdout.write(`rss ${m.rss}\n`);
});
