// Tool answers: a result as text (and as structured content), and a failure as a tool
// error result (isError: true) the model can read and act on: the one-line message and
// its code. An unexpected failure says so without a stack trace; the server stays up.

import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { SandgateError } from "../sdk/index.js";

/** One line: control characters (newlines included) as spaces. */
const oneLine = (s: string): string => s.replace(/[\u0000-\u001f\u007f-\u009f\u2028\u2029]+/gu, " ").trim();

/** A result; `isError` for a refusal the tool itself makes (its text says why). */
export function ok(text: string, structured?: Record<string, unknown>, isError = false): CallToolResult {
  return { content: [{ type: "text", text }], ...(structured === undefined ? {} : { structuredContent: structured }), ...(isError ? { isError: true } : {}) };
}

export function failed(err: unknown): CallToolResult {
  const text =
    err instanceof SandgateError ? `${oneLine(err.message)} (code: ${err.code})` : `internal error: ${oneLine(err instanceof Error ? err.message : String(err))} (code: internal)`;
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
