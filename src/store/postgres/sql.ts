// What the PostgreSQL store's table modules share: the one thing they query through (a
// pool, or the client a transaction holds), the column types as the gateway reads them,
// and the errors that mean "the database cannot be reached" rather than "this is wrong".

import pg from "pg";
import { SandgateError } from "../../util/errors.js";

/** A pool or one client: the table modules do not care which (a transaction passes its client). */
export interface Queryable {
  query<R extends pg.QueryResultRow = pg.QueryResultRow>(text: string, values?: unknown[]): Promise<pg.QueryResult<R>>;
}

const INT8 = 20;

/**
 * Column types as the records hold them: int8 (BIGSERIAL, count(*), sums cast to bigint)
 * as a number (a sequence number or a byte count stays far below 2^53); the rest as pg
 * reads them (json parsed). Only text-format results are asked for.
 */
const parserOf = (oid: number): ((text: string) => unknown) =>
  // eslint-disable-next-line @typescript-eslint/no-unsafe-enum-assignment -- an OID the server sent: pg's own table covers any
  oid === INT8 ? Number : (pg.types.getTypeParser(oid) as (text: string) => unknown);
export const TYPES: pg.CustomTypesConfig = { getTypeParser: parserOf as pg.CustomTypesConfig["getTypeParser"] };

/** The database cannot be reached (or went away mid-operation): the API answers 503. */
export class StoreUnavailableError extends SandgateError {
  override readonly name = "StoreUnavailableError";
  constructor(why: string, options?: ErrorOptions) {
    super(`the state database (PostgreSQL) cannot be reached: ${why}; try again when it is back`, "unavailable", options);
  }
}

// Class 08 (connection exception), 57P01-57P03 (shutdown, cannot connect now), 53300 (too many connections).
const UNAVAILABLE_SQLSTATE = /^(08|57P0[123]$|53300$)/;
const UNAVAILABLE_ERRNO = new Set(["ECONNREFUSED", "ECONNRESET", "ENOENT", "ETIMEDOUT", "EPIPE", "EHOSTUNREACH", "ENETUNREACH"]);

/** True when `err` says the database is out of reach, not that the operation was wrong. */
export function isUnavailable(err: unknown): boolean {
  if (!(err instanceof Error)) return false;
  const code = (err as { code?: unknown }).code;
  if (typeof code === "string" && (UNAVAILABLE_SQLSTATE.test(code) || UNAVAILABLE_ERRNO.has(code))) return true;
  return /Connection terminated|timeout exceeded when trying to connect|Client has encountered a connection error|Cannot use a pool after calling end/i.test(err.message);
}

/** `err` as the store throws it: an unreachable database as StoreUnavailableError (without the URL or its password), anything else as it is. */
export function storeError(err: unknown): Error {
  if (err instanceof SandgateError) return err;
  if (isUnavailable(err)) return new StoreUnavailableError((err as Error).message.split("\n")[0]!.slice(0, 200));
  return err instanceof Error ? err : new Error(String(err));
}

/** The SQLSTATE of a PostgreSQL error, or "". */
export function sqlState(err: unknown): string {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === "string" ? code : "";
}
