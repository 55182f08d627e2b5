// The SandgateError a promise rejects with (the test fails if it fulfils or rejects
// with anything else), for tests of the SDK's errors.
import { expect } from "vitest";
import { SandgateError } from "../../src/sdk/index.js";

export async function failure(p: Promise<unknown>): Promise<SandgateError> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(SandgateError);
  return err as SandgateError;
}
