// Tool answers: a result as text (and as structured content), and a failure as a tool
// error result (isError: true) the model can read and act on: the one-line message and
// its code. An unexpected failure says so without a stack trace; the server stays up.

import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { SandgateError } from "../sdk/index.js";
import { errorMessage } from "../util/error-message.js";

/** One line: control characters (newlines included) as spaces. */
const oneLine = (s: string): string => s.replace(/[\u0000-\u001f\u007f-\u009f\u2028\u2029]+/gu, " ").trim();

/** A result; `isError` for a refusal the tool itself makes (its text says why). */
export function ok(text: string, structured?: Record<string, unknown>, isError = false): CallToolResult {
  return { content: [{ type: "text", text }], ...(structured === undefined ? {} : { structuredContent: structured }), ...(isError ? { isError: true } : {}) };
}

export function failed(err: unknown): CallToolResult {
  const text =
    err instanceof SandgateError ? `${oneLine(err.message)} (code: ${err.code})` : `internal error: ${oneLine(errorMessage(err))} (code: internal)`;
  return { isError: true, content: [{ type: "text", text }] };
}

/** Runs a tool's body; any failure becomes a tool error result. */
export async function guarded(body: () => Promise<CallToolResult>): Promise<CallToolResult> {
  try {
    return await body();
  } catch (err) {
    return failed(err);
  }
}

/**
 * `guarded`, at most `max` at once: a client that sends calls faster than they end gets
 * a refusal past `max` (each call may hold megabytes of output or file), never a queue.
 */
export function boundedCalls(max: number): (body: () => Promise<CallToolResult>) => Promise<CallToolResult> {
  let running = 0;
  return async (body) => {
    if (running >= max) return failed(new SandgateError(`busy: ${running} tool calls are running, at most ${max} at once; wait for one to end`, "unavailable"));
    running++;
    try {
      return await guarded(body);
    } finally {
      running--;
    }
  };
}
