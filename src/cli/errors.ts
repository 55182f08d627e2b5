// Exit codes scripts can rely on (the one list's, src/util/errors.ts), and the error type that carries them.

import { CODE_OF_EXIT, EXIT, EXIT_INTERRUPTED, SandgateError, exitCodeOf, type ErrorCode } from "../util/errors.js";

export { EXIT, EXIT_INTERRUPTED };

/** The CLI's exit code for an error code (1 for any code it does not single out). */
export const exitCodeForApi = exitCodeOf;

export interface CliErrorOptions extends ErrorOptions {
  /** The failure's code, when it has one (an SDK failure's); else the one of the exit code. */
  code?: ErrorCode;
}

/** A failure of the CLI: its one line (`sandgate: …`) and the exit code it ends with. */
export class CliError extends SandgateError {
  override readonly name = "CliError";
  constructor(message: string, exitCode: number = EXIT.failed, options: CliErrorOptions = {}) {
    super(message, options.code ?? CODE_OF_EXIT[exitCode] ?? "failed", { ...options, exitCode });
  }
}

/** The CLI's form of any other failure of the family (the SDK's): the same one line, code and exit code; anything else as it is. */
export function cliErrorOf(err: unknown): unknown {
  return err instanceof SandgateError && !(err instanceof CliError) ? new CliError(err.message, err.exitCode, { code: err.code, cause: err }) : err;
}
