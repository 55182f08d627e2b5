// Structured JSON logs (pino). Secrets are redacted by path wherever they may appear.

import { pino, type Logger } from "pino";
import { DEFAULT_SETTINGS } from "./settings.js";

/** `level`: gateway start's --log-level (SANDGATE_LOG_LEVEL), which the settings table resolves; absent: its default. */
export function createLogger(opts: { level?: string; destination?: string | number } = {}): Logger {
  return pino(
    {
      level: opts.level ?? DEFAULT_SETTINGS.logLevel,
      base: { pid: process.pid },
      // A line names its component once: a child's own (audit, monitor, control…) or else
      // "gateway". (A component in the base would be repeated in every child's line.)
      mixin: (_object, _level, logger) => ((logger.bindings() as { component?: unknown }).component === undefined ? { component: "gateway" } : {}),
      redact: { paths: ["token", "*.token", "req.headers.authorization", "headers.authorization"], censor: "[redacted]" },
    },
    pino.destination({ dest: opts.destination ?? 1, sync: true }),
  );
}
