// Errors the API turns into 4xx/5xx answers with a stable code and a one-line message.

export type ApiErrorCode =
  | "invalid_request"
  | "too_large"
  | "unauthorized"
  | "forbidden"
  | "not_found"
  | "already_exists"
  | "not_allowed"
  | "stale_generation"
  | "stale_revision"
  | "unavailable"
  | "internal";

const STATUS: Record<ApiErrorCode, number> = {
  invalid_request: 400,
  too_large: 413,
  unauthorized: 401,
  // The token is right but does not carry this capability (approving a policy proposal).
  forbidden: 403,
  not_found: 404,
  already_exists: 409,
  not_allowed: 409,
  stale_generation: 409,
  // The policy changed since what the request was based on (a proposal's base revision).
  stale_revision: 409,
  unavailable: 503,
  internal: 500,
};

export class ApiError extends Error {
  override readonly name = "ApiError";
  readonly status: number;
  constructor(
    readonly code: ApiErrorCode,
    message: string,
  ) {
    super(message);
    this.status = STATUS[code];
  }
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
