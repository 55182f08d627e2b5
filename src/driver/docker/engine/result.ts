// Typed outcomes of Engine API calls. Callers must be able to tell a broken channel
// (TransportFailure) from an answer of the daemon (DockerError / Ok) without catching.

export type TransportFailure = { kind: "transport"; code: string; message: string };
export type DockerError = { kind: "docker"; status: number; message: string };
export type Ok<T> = { kind: "ok"; status: number; body: T };
export type EngineResult<T> = Ok<T> | DockerError | TransportFailure;

/** Our own transport codes, next to undici's/Node's codes which are passed through as-is. */
export const TransportCode = {
  /** Our overall deadline for a call fired. */
  TIMEOUT: "TIMEOUT",
  /** A body that should be JSON was partial or not JSON. */
  BAD_BODY: "BAD_BODY",
  /** A body that should carry a JSON result was empty. */
  EMPTY_BODY: "EMPTY_BODY",
  /** The caller's AbortSignal fired. */
  ABORTED: "ABORTED",
  /** The onEvent callback threw; the stream was closed. */
  HANDLER_ERROR: "HANDLER_ERROR",
  /** An error without a code (should not happen; kept so nothing is thrown). */
  UNKNOWN: "UNKNOWN",
} as const;


export function transport(code: string, message: string): TransportFailure {
  return { kind: "transport", code, message };
}

export function dockerError(status: number, message: string): DockerError {
  return { kind: "docker", status, message };
}

export function ok<T>(status: number, body: T): Ok<T> {
  return { kind: "ok", status, body };
}

/** One line for logs and CLI output. */
export function describe(r: EngineResult<unknown> | { kind: "eof" } | { kind: "aborted" }): string {
  switch (r.kind) {
    case "ok":
      return `ok (HTTP ${r.status})`;
    case "docker":
      return `docker error HTTP ${r.status}: ${oneLine(r.message)}`;
    case "transport":
      return `transport failure ${r.code}: ${oneLine(r.message)}`;
    case "eof":
      return "stream ended (EOF)";
    case "aborted":
      return "stream aborted by caller";
  }
}


function oneLine(s: string): string {
  return s.replace(/\s+/g, " ").trim();
}

/** Maps anything thrown by undici/Node into a TransportFailure, keeping their code. */
export function failureFromError(err: unknown): TransportFailure {
  if (err instanceof Error) {
    const code = (err as { code?: unknown }).code;
    const message = err.message || err.name;
    return transport(typeof code === "string" && code !== "" ? code : TransportCode.UNKNOWN, message);
  }
  return transport(TransportCode.UNKNOWN, String(err));
}

/** The body of an answer that succeeded; else an Error naming the step and what went wrong. */
export function must<T>(step: string, r: EngineResult<T>): T {
  if (r.kind === "ok") return r.body;
  throw new Error(`${step}: ${describe(r)}`);
}
