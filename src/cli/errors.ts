// Exit codes scripts can rely on (the SDK's, src/sdk/errors.ts), and the error type that carries them.

import { EXIT, SandgateError, exitCodeForApi } from "../sdk/errors.js";

export { EXIT, exitCodeForApi };

/** A wait the user stopped with Ctrl-C: 128 + SIGINT, as a shell reports a command SIGINT ended. */
export const EXIT_INTERRUPTED = 130;

export class CliError extends Error {
  override readonly name = "CliError";
  constructor(
    message: string,
    readonly exitCode: number = EXIT.failed,
  ) {
    super(message);
  }
}

/** The CLI's form of an SDK failure: the same one line and exit code; anything else as it is. */
export function cliErrorOf(err: unknown): unknown {
  return err instanceof SandgateError ? new CliError(err.message, err.exitCode) : err;
}
