// The SDK's one error type, and the exit codes the CLI gives the same failures.
// Every failure of the SDK is a SandgateError: `code` says what went wrong (the
// gateway's API error code, or one of the client's own below) and `exitCode` is
// what `sandgate` exits with for it, so a script and a program branch alike.

export const EXIT = {
  ok: 0,
  failed: 1, // the gateway reported an error, or the sandbox ended in Error
  usage: 2, // bad arguments or invalid input
  unreachable: 3, // no gateway answering
  notFound: 4,
  conflict: 5, // not allowed in the current phase, or the name is taken
  timeout: 6,
  unauthorized: 7, // bad token, or a token without the capability (policy approve without the approver token)
  denied: 8, // `policy check`: the policy denies the request
} as const;

/** The gateway's API error codes (src/gateway/errors.ts ApiErrorCode; a unit test keeps the two equal). */
const API_ERROR_CODES = ["invalid_request", "too_large", "unauthorized", "forbidden", "not_found", "already_exists", "not_allowed", "stale_generation", "stale_revision", "unavailable", "internal"] as const;
export type ApiErrorCode = (typeof API_ERROR_CODES)[number];

/**
 * The client's own: `not_running` (nothing answers where the gateway should be),
 * `timeout` (no answer, or a wait, in time), `connection_lost` (the gateway cut a
 * request or stream), `bad_response` (an answer this client cannot read),
 * `sandbox_failed` (a wait ended in a phase other than the one waited for),
 * `signal_failed` (an exec's command could not be signalled), `untrusted_server` (what
 * answers is not the gateway: a socket another user could have made, or a TLS server
 * without the pinned certificate; no token was sent).
 */
export type ClientErrorCode = "not_running" | "timeout" | "connection_lost" | "bad_response" | "sandbox_failed" | "signal_failed" | "untrusted_server";

export type SandgateErrorCode = ApiErrorCode | ClientErrorCode;

const BY_CODE: Partial<Record<string, number>> = {
  invalid_request: EXIT.usage,
  too_large: EXIT.usage,
  unauthorized: EXIT.unauthorized,
  forbidden: EXIT.unauthorized,
  not_found: EXIT.notFound,
  already_exists: EXIT.conflict,
  not_allowed: EXIT.conflict,
  stale_generation: EXIT.conflict,
  stale_revision: EXIT.conflict,
  not_running: EXIT.unreachable,
  untrusted_server: EXIT.unreachable,
  timeout: EXIT.timeout,
};

/** The CLI's exit code for an error code (1 for any code it does not single out). */
export function exitCodeForApi(code: string): number {
  return BY_CODE[code] ?? EXIT.failed;
}

export class SandgateError extends Error {
  override readonly name = "SandgateError";
  readonly code: SandgateErrorCode;
  /** What `sandgate` exits with for this failure. */
  readonly exitCode: number;
  constructor(message: string, code: SandgateErrorCode, exitCode: number = exitCodeForApi(code)) {
    super(message);
    this.code = code;
    this.exitCode = exitCode;
  }
}

const API_CODES: ReadonlySet<string> = new Set<string>(API_ERROR_CODES);

/** An error body of the API (`{"error":{"code","message"}}`) as a SandgateError; `fallback` when it is not one. */
export function fromApiBody(body: unknown, fallback: string): SandgateError {
  const err = (body as { error?: { code?: unknown; message?: unknown } } | null | undefined)?.error;
  const code = typeof err?.code === "string" && API_CODES.has(err.code) ? (err.code as ApiErrorCode) : "internal";
  const message = typeof err?.message === "string" ? err.message : fallback;
  return new SandgateError(message, code);
}
