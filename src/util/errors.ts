// One error family, as undici's lib/core/errors.js: every error Sandgate throws is a
// SandgateError with a stable `code` from ERRORS, its `cause` chained (the standard
// ErrorOptions), and `exitCode`, what the CLI exits with for it. ERRORS is the one list
// of codes: per code, the HTTP status the API answers it with (the API's codes) and the
// CLI's exit code. The gateway's error answers (src/api/vocabulary.ts API_ERRORS),
// the SDK (src/sdk/errors.ts), the CLI's exit codes (src/cli/errors.ts, README "Exit
// codes") and the MCP server's tool errors (src/mcp/results.ts) all take it from here.
// Pure: importable by every part, the supervisor and the driver's contract included.

/** The CLI's exit codes, as README documents them (a unit test checks the table). */
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

/** A wait the user stopped with Ctrl-C: 128 + SIGINT, as a shell reports a command SIGINT ended. */
export const EXIT_INTERRUPTED = 130;

/**
 * Who gives a code: `api` the gateway's API (answered with `status` and a body
 * `{"error":{"code","message"}}`), `client` the SDK's client (no answer, or none it can
 * read), `cli` the CLI's own failures (one per exit code), `internal` a part inside the
 * gateway, its driver or its supervisor (turned into an API code before any answer).
 */
export type ErrorScope = "api" | "client" | "cli" | "internal";

interface ErrorEntry {
  scope: ErrorScope;
  /** The HTTP status of an API code. */
  status?: number;
  /** What the CLI exits with. */
  exit: number;
}

/** Every error code, with its HTTP status (API codes) and its CLI exit code. Codes are stable API. */
export const ERRORS = {
  // The API's, in the order of its OpenAPI document.
  invalid_request: { scope: "api", status: 400, exit: EXIT.usage },
  unauthorized: { scope: "api", status: 401, exit: EXIT.unauthorized },
  // The token is right but does not carry this capability (deciding a policy proposal).
  forbidden: { scope: "api", status: 403, exit: EXIT.unauthorized },
  not_found: { scope: "api", status: 404, exit: EXIT.notFound },
  already_exists: { scope: "api", status: 409, exit: EXIT.conflict },
  not_allowed: { scope: "api", status: 409, exit: EXIT.conflict },
  stale_generation: { scope: "api", status: 409, exit: EXIT.conflict },
  // The policy changed since what the request was based on (a proposal's base revision).
  stale_revision: { scope: "api", status: 409, exit: EXIT.conflict },
  too_large: { scope: "api", status: 413, exit: EXIT.usage },
  internal: { scope: "api", status: 500, exit: EXIT.failed },
  unavailable: { scope: "api", status: 503, exit: EXIT.failed },

  // The client's: nothing answers where the gateway should be; what answers is not the
  // gateway (a socket another user could have made, a TLS server without the pinned
  // certificate: no token was sent); no answer, or a wait, in time; the gateway cut a
  // request or stream; an answer the client cannot read; a wait ended in a phase other
  // than the one waited for; an exec's command could not be signalled (the CLI exits
  // 128 + the signal's number).
  not_running: { scope: "client", exit: EXIT.unreachable },
  untrusted_server: { scope: "client", exit: EXIT.unreachable },
  timeout: { scope: "client", exit: EXIT.timeout },
  connection_lost: { scope: "client", exit: EXIT.failed },
  bad_response: { scope: "client", exit: EXIT.failed },
  sandbox_failed: { scope: "client", exit: EXIT.failed },
  signal_failed: { scope: "client", exit: EXIT.failed },

  // The CLI's own, for the exit codes no code above names.
  failed: { scope: "cli", exit: EXIT.failed },
  usage: { scope: "cli", exit: EXIT.usage },
  conflict: { scope: "cli", exit: EXIT.conflict },
  denied: { scope: "cli", exit: EXIT.denied },
  interrupted: { scope: "cli", exit: EXIT_INTERRUPTED },

  // Inside: the gateway cannot start (a busy port, an unreadable state.db); the driver
  // could not provision a generation, run an exec, read a log frame, or found a process
  // gone; a tar stream that is not one; a program that stopped reading a copy; a TLS
  // ClientHello cut short or malformed (the supervisor).
  startup_failed: { scope: "internal", exit: EXIT.usage },
  provision_failed: { scope: "internal", exit: EXIT.failed },
  exec_failed: { scope: "internal", exit: EXIT.failed },
  bad_log_frame: { scope: "internal", exit: EXIT.failed },
  process_gone: { scope: "internal", exit: EXIT.failed },
  bad_tar: { scope: "internal", exit: EXIT.failed },
  stopped_reading: { scope: "internal", exit: EXIT.failed },
  client_hello_truncated: { scope: "internal", exit: EXIT.failed },
  client_hello_malformed: { scope: "internal", exit: EXIT.failed },
} as const satisfies Record<string, ErrorEntry>;

export type ErrorCode = keyof typeof ERRORS;
type CodeOf<S extends ErrorScope> = { [K in ErrorCode]: (typeof ERRORS)[K]["scope"] extends S ? K : never }[ErrorCode];
/** The codes the API answers with. */
export type ApiErrorCode = CodeOf<"api">;
/** The SDK client's own codes. */
export type ClientErrorCode = CodeOf<"client">;
/** The CLI's own codes. */
export type CliErrorCode = CodeOf<"cli">;

const entries = Object.entries(ERRORS) as [ErrorCode, ErrorEntry][];

/** Every API code with its HTTP status, in the list's order. */
export const API_ERRORS = Object.fromEntries(entries.filter(([, e]) => e.scope === "api").map(([c, e]) => [c, e.status!])) as Readonly<Record<ApiErrorCode, number>>;

export const isErrorCode = (code: unknown): code is ErrorCode => typeof code === "string" && Object.hasOwn(ERRORS, code);
export const isApiErrorCode = (code: unknown): code is ApiErrorCode => isErrorCode(code) && ERRORS[code].scope === "api";

/** The CLI's exit code for an error code (1 for one not in the list, e.g. from a newer gateway). */
export const exitCodeOf = (code: string): number => (isErrorCode(code) ? ERRORS[code].exit : EXIT.failed);

/** The code of a failure that has only an exit code (the CLI's): one per exit code. */
export const CODE_OF_EXIT: Readonly<Record<number, ErrorCode>> = {
  [EXIT.failed]: "failed",
  [EXIT.usage]: "usage",
  [EXIT.unreachable]: "not_running",
  [EXIT.notFound]: "not_found",
  [EXIT.conflict]: "conflict",
  [EXIT.timeout]: "timeout",
  [EXIT.unauthorized]: "unauthorized",
  [EXIT.denied]: "denied",
  [EXIT_INTERRUPTED]: "interrupted",
};

export interface SandgateErrorOptions extends ErrorOptions {
  /** What the CLI exits with, when not the code's (an exec's signal: 128 + n). */
  exitCode?: number;
}

/** Every Sandgate failure: a stable `code` from ERRORS, its `exitCode`, and a one-line `message`. */
export class SandgateError extends Error {
  override readonly name: string = "SandgateError";
  /** Stable: one of ERRORS (a subclass may declare a narrower type). */
  readonly code: ErrorCode;
  /** What `sandgate` exits with for this failure. */
  readonly exitCode: number;
  constructor(message: string, code: ErrorCode, options: SandgateErrorOptions = {}) {
    super(message, "cause" in options ? { cause: options.cause } : undefined);
    this.code = code;
    this.exitCode = options.exitCode ?? ERRORS[code].exit;
  }
}
