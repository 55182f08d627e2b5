// Errors the API turns into 4xx/5xx answers with a stable code and a one-line message.

import { API_ERRORS, SandgateError, type ApiErrorCode } from "../util/errors.js";

export type { ApiErrorCode };

/** An API code (src/util/errors.ts ERRORS) and the HTTP status it is answered with. */
export class ApiError extends SandgateError {
  override readonly name = "ApiError";
  declare readonly code: ApiErrorCode;
  readonly status: number;
  constructor(code: ApiErrorCode, message: string, options?: ErrorOptions) {
    super(message, code, options);
    this.status = API_ERRORS[code];
  }
}

/** The body the API answers an error with (responses.ts ApiErrorBody). */
export const errorBody = (e: ApiError): { error: { code: ApiErrorCode; message: string } } => ({ error: { code: e.code, message: e.message } });

/** An error as the raw HTTP answer of a socket no framework serves (an upgrade refused): the code's status, the body, and the connection closed. */
export function rawErrorAnswer(e: ApiError): string {
  const body = JSON.stringify(errorBody(e));
  return `HTTP/1.1 ${e.status} ${e.code}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`;
}

/** Limits of what one request may carry. */
export const POLICY_MAX_BYTES = 1 << 20;
export const BODY_MAX_BYTES = 2 << 20;

/** "5.0 MB" (decimal, one place), the size a user sees in `ls -l --si`. */
export const megabytes = (bytes: number): string => `${(bytes / 1e6).toFixed(1)} MB`;

export const tooLarge = (what: string, bytes: number, limit: string): ApiError =>
  new ApiError("too_large", `${what} is ${megabytes(bytes)}; the limit is ${limit}`);

export const notFound = (nameOrId: string): ApiError =>
  new ApiError("not_found", `no sandbox named "${nameOrId}"`);
