// exec: runs a command in a sandbox and answers with its exit code and output. The
// timeout is sent as the exec's own (the gateway ends the command: SIGTERM, SIGKILL,
// exit 124), output is kept per stream up to maxOutputBytes (the rest counted and
// dropped as it comes), and a client that cancels the call ends the command. A client
// that asks for progress gets it while the command runs (progress.ts), so a command may
// outlive the client's request timeout when the client resets it on progress.

import { z } from "zod";
import { BoundedCapture } from "./capture.js";
import { sandbox, type ToolContext } from "./context.js";
import { EXEC_ARGV_MAX_CHARS, EXEC_OUTPUT_DEFAULT_BYTES, EXEC_OUTPUT_MAX_BYTES, EXEC_PROGRESS_TAIL_BYTES, EXEC_STDIN_MAX_CHARS, EXEC_TIMEOUT_DEFAULT_S, EXEC_TIMEOUT_MAX_S, NAME_MAX_CHARS, PATH_MAX_CHARS, VALUE_MAX_CHARS } from "./limits.js";
import { OutputTail, startProgress } from "./progress.js";
import { ok } from "./results.js";

const bytes = z.number().int().min(0);

/** Past the timeout, how long the server waits for the gateway's exit code before it sends SIGKILL itself. */
const BACKSTOP_S = 30;

export function registerExecTool(ctx: ToolContext): void {
  ctx.server.registerTool(
    "exec",
    {
      title: "Run a command in a sandbox",
      description: `Runs a command (argv, no shell unless you run one: ["sh", "-c", "..."]) in a Ready sandbox, by default in /sandbox, and answers with its exit code, stdout and stderr. Each stream keeps at most maxOutputBytes (default ${EXEC_OUTPUT_DEFAULT_BYTES}); more is dropped and counted. After timeout seconds (default ${EXEC_TIMEOUT_DEFAULT_S}) the command is ended and its exit code is 124. A call with a progressToken gets a progress notification every second or so while the command runs, its message the newest output (at most ${EXEC_PROGRESS_TAIL_BYTES} bytes).`,
      inputSchema: z.strictObject({
        sandbox: z.string().min(1).max(NAME_MAX_CHARS).describe("the sandbox's name (or id)"),
        cmd: z.array(z.string().max(EXEC_ARGV_MAX_CHARS)).min(1).max(1000).describe('the command and its arguments, e.g. ["python3", "main.py"]'),
        stdin: z.string().max(EXEC_STDIN_MAX_CHARS).optional().describe("the command's input (UTF-8); without it stdin is closed"),
        cwd: z.string().max(PATH_MAX_CHARS).optional().describe("absolute working directory (default /sandbox)"),
        env: z.record(z.string().max(NAME_MAX_CHARS), z.string().max(VALUE_MAX_CHARS)).optional().describe("extra environment variables"),
        timeout: z.number().int().min(1).max(EXEC_TIMEOUT_MAX_S).default(EXEC_TIMEOUT_DEFAULT_S).describe(`seconds before the command is ended (default ${EXEC_TIMEOUT_DEFAULT_S}, max ${EXEC_TIMEOUT_MAX_S})`),
        maxOutputBytes: z.number().int().min(1).max(EXEC_OUTPUT_MAX_BYTES).default(EXEC_OUTPUT_DEFAULT_BYTES).describe(`bytes kept per stream (default ${EXEC_OUTPUT_DEFAULT_BYTES}, max ${EXEC_OUTPUT_MAX_BYTES})`),
      }),
      outputSchema: z.strictObject({
        exitCode: z.number().int().describe("the command's exit code; 124: ended by the timeout"),
        stdout: z.string(),
        stderr: z.string(),
        truncated: z.boolean().describe("output was dropped past maxOutputBytes"),
        stdoutDroppedBytes: bytes,
        stderrDroppedBytes: bytes,
      }),
      // It runs code: a client should ask before each call. Its network is the sandbox's policy, not the open world.
      annotations: { title: "Run a command in a sandbox", readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: false },
    },
    (a, extra) =>
      ctx.run(async () => {
        const argvChars = a.cmd.reduce((n, c) => n + c.length, 0);
        if (argvChars > EXEC_ARGV_MAX_CHARS) {
          return ok(`cmd: ${argvChars} characters in all, at most ${EXEC_ARGV_MAX_CHARS} allowed; write a script with files_write and run it`, undefined, true);
        }
        const sb = await sandbox(ctx, a.sandbox);
        const out = new BoundedCapture(a.maxOutputBytes);
        const err = new BoundedCapture(a.maxOutputBytes);
        const tail = new OutputTail(EXEC_PROGRESS_TAIL_BYTES);
        // The client cancelled, or the gateway did not end it in time: SIGKILL.
        const stop = AbortSignal.any([extra.signal, AbortSignal.timeout((a.timeout + BACKSTOP_S) * 1000)]);
        const progressDone = startProgress(extra, ctx.progressIntervalMs, tail);
        let exitCode: number;
        try {
          exitCode = await sb.exec(a.cmd, {
            timeout: a.timeout,
            ...(a.stdin === undefined ? {} : { stdin: a.stdin }),
            ...(a.cwd === undefined ? {} : { cwd: a.cwd }),
            ...(a.env === undefined ? {} : { env: a.env }),
            onStdout: (c) => {
              out.push(c);
              tail.push(c);
            },
            onStderr: (c) => {
              err.push(c);
              tail.push(c);
            },
            signal: stop,
            abortSignal: "KILL",
          });
        } finally {
          progressDone();
        }
        const stdout = out.text();
        const stderr = err.text();
        const truncated = out.dropped > 0 || err.dropped > 0;
        const lines = [`exit code ${exitCode}${exitCode === 124 ? ` (the timeout's exit code: ended after ${a.timeout} s, unless the command exits 124 itself)` : ""}`];
        lines.push(`--- stdout${out.dropped > 0 ? ` (truncated: ${out.dropped} bytes dropped past ${a.maxOutputBytes})` : ""} ---`, stdout);
        lines.push(`--- stderr${err.dropped > 0 ? ` (truncated: ${err.dropped} bytes dropped past ${a.maxOutputBytes})` : ""} ---`, stderr);
        return ok(lines.join("\n"), { exitCode, stdout, stderr, truncated, stdoutDroppedBytes: out.dropped, stderrDroppedBytes: err.dropped });
      }),
  );
}
