// Exit codes scripts can rely on, and the error type that carries them.

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

export class CliError extends Error {
  override readonly name = "CliError";
  constructor(
    message: string,
    readonly exitCode: number = EXIT.failed,
  ) {
    super(message);
  }
}

const BY_API_CODE: Record<string, number> = {
  invalid_request: EXIT.usage,
  too_large: EXIT.usage,
  unauthorized: EXIT.unauthorized,
  forbidden: EXIT.unauthorized,
  not_found: EXIT.notFound,
  already_exists: EXIT.conflict,
  not_allowed: EXIT.conflict,
  stale_generation: EXIT.conflict,
  stale_revision: EXIT.conflict,
};

export function exitCodeForApi(code: string): number {
  return BY_API_CODE[code] ?? EXIT.failed;
}
