// Structured JSON logs (pino). Secrets are redacted by path wherever they may appear.

import { pino, type Logger } from "pino";

export function createLogger(opts: { level?: string; destination?: string | number } = {}): Logger {
  return pino(
    {
      level: opts.level ?? process.env.SANDGATE_LOG_LEVEL ?? "info",
      base: { component: "gateway", pid: process.pid },
      redact: { paths: ["token", "*.token", "req.headers.authorization", "headers.authorization"], censor: "[redacted]" },
    },
    pino.destination({ dest: opts.destination ?? 1, sync: true }),
  );
}
