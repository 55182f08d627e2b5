// logs_read: the last lines of a sandbox's output (what its main process wrote, or the
// supervisor's log). At most `tail` lines and LOGS_MAX_CHARS of text are held: past
// the latter the oldest lines are dropped and counted.

import { z } from "zod";
import type { LogRecord } from "../sdk/index.js";
import { sandbox, type ToolContext } from "./context.js";
import { LOGS_MAX_CHARS, LOGS_TAIL_DEFAULT, LOGS_TAIL_MAX, NAME_MAX_CHARS } from "./limits.js";
import { ok } from "./results.js";

export function registerLogsTool(ctx: ToolContext): void {
  ctx.server.registerTool(
    "logs_read",
    {
      title: "Read a sandbox's logs",
      description: `The last lines (tail, default ${LOGS_TAIL_DEFAULT}, max ${LOGS_TAIL_MAX}) of a sandbox's output: its main process's stdout and stderr, or the supervisor's log (its egress decisions). At most ${LOGS_MAX_CHARS} characters; older lines past it are dropped.`,
      inputSchema: z.strictObject({
        sandbox: z.string().min(1).max(NAME_MAX_CHARS).describe("the sandbox's name (or id)"),
        tail: z.number().int().min(1).max(LOGS_TAIL_MAX).default(LOGS_TAIL_DEFAULT),
        stream: z.enum(["workload", "supervisor"]).default("workload"),
      }),
      outputSchema: z.strictObject({
        lines: z.array(z.strictObject({ t: z.string().describe("when it was read, RFC 3339"), stream: z.enum(["out", "err"]), text: z.string(), partial: z.literal(true).optional().describe("no newline ended it") })),
        droppedLines: z.number().int().min(0).describe(`older lines dropped past ${LOGS_MAX_CHARS} characters`),
      }),
      annotations: { title: "Read a sandbox's logs", readOnlyHint: true, openWorldHint: false },
    },
    (a, extra) =>
      ctx.run(async () => {
        const sb = await sandbox(ctx, a.sandbox);
        const kept: LogRecord[] = [];
        let chars = 0;
        let dropped = 0;
        for await (const r of sb.logs({ tail: a.tail, stream: a.stream, signal: extra.signal })) {
          kept.push(r);
          chars += r.l.length;
          while (chars > LOGS_MAX_CHARS && kept.length > 0) {
            chars -= kept.shift()!.l.length;
            dropped++;
          }
        }
        const text = kept.map((r) => `${r.s === "err" ? "err" : "out"}  ${r.l}`).join("\n");
        const head = dropped > 0 ? `(${dropped} older lines dropped past ${LOGS_MAX_CHARS} characters)\n` : "";
        return ok(kept.length === 0 && dropped === 0 ? "no log lines" : head + text, { lines: kept.map((r) => ({ t: r.t, stream: r.s, text: r.l, ...(r.p ? { partial: true } : {}) })), droppedLines: dropped });
      }),
  );
}
