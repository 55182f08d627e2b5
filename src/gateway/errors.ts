// Errors the API turns into 4xx/5xx answers with a stable code and a one-line message.

export type ApiErrorCode =
  | "invalid_request"
  | "unauthorized"
  | "not_found"
  | "already_exists"
  | "not_allowed"
  | "stale_generation"
  | "unavailable"
  | "internal";

const STATUS: Record<ApiErrorCode, number> = {
  invalid_request: 400,
  unauthorized: 401,
  not_found: 404,
  already_exists: 409,
  not_allowed: 409,
  stale_generation: 409,
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

export const notFound = (nameOrId: string): ApiError =>
  new ApiError("not_found", `no sandbox named "${nameOrId}"`);
