// The words every answer of the gateway API is made of: times, counts, page cursors, a
// sandbox's phase, and the error body every route may answer with. Its own module so the
// answer schemas, split by resource (responses.ts, sandbox-responses.ts,
// policy-responses.ts), share one definition of each. Contract only: zod and pure vocabulary.

import { z } from "zod";
import { PHASES } from "../lifecycle/phases.js";
import { API_ERRORS, type ApiErrorCode } from "../util/errors.js";

/** An RFC 3339 time, as the gateway writes them (UTC, `Z`). */
export const Time = z.iso.datetime({ offset: true });
export const count = z.number().int().min(0);
export const nullableString = z.string().nullable();

/** Every error code, with the HTTP status it is answered with: the one list's (src/util/errors.ts ERRORS). Codes are stable API. */
export { API_ERRORS, type ApiErrorCode };
const API_ERROR_CODES = Object.keys(API_ERRORS) as [ApiErrorCode, ...ApiErrorCode[]];

/** Every error answer: a stable code and one line for people. */
export const ApiErrorBody = z
  .strictObject({ error: z.strictObject({ code: z.enum(API_ERROR_CODES), message: z.string() }) })
  .describe("An error: `code` is stable (one per HTTP status family, see the status), `message` one line naming the value and what is allowed.");
export type ApiErrorBody = z.infer<typeof ApiErrorBody>;

export const Phase = z.enum(PHASES);

/** The cursor of a page in name order (sandboxes, stats). */
export const next = nullableString.describe("the cursor of the following page (pass it as `after`); null on the last page");
/** The cursor of a page of a log in sequence order (events, audit). */
export const seqCursor = z.number().int().nullable().describe("the sequence number to pass as `after` for the following page; null when this page reached the end");
