// The SDK's errors: the one family of src/util/errors.ts. Every failure of the SDK is a
// SandgateError: `code` says what went wrong (the gateway's API error code, or one of the
// client's own) and `exitCode` is what `sandgate` exits with for it, so a script and a
// program branch alike. The codes and exit codes are the one list's (ERRORS), not copies.

import { SandgateError, isApiErrorCode, type ErrorCode } from "../util/errors.js";

export { EXIT, ERRORS, SandgateError, type ApiErrorCode, type ClientErrorCode, type SandgateErrorOptions } from "../util/errors.js";

/** Every code a SandgateError may carry (ERRORS). */
export type SandgateErrorCode = ErrorCode;

/** An error body of the API (`{"error":{"code","message"}}`) as a SandgateError; `fallback` when it is not one. */
export function fromApiBody(body: unknown, fallback: string): SandgateError {
  const err = (body as { error?: { code?: unknown; message?: unknown } } | null | undefined)?.error;
  const given = err?.code;
  const code = isApiErrorCode(given) ? given : "internal";
  const message = typeof err?.message === "string" ? err.message : fallback;
  return new SandgateError(message, code);
}
