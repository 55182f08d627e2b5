// /v1/secrets: create or replace, list (names, versions, sizes: never values), delete.
// A value travels in one direction only: from the client to the gateway.

import type { FastifyRequest } from "fastify";
import { z } from "zod";
import { MAX_SECRET_BYTES, checkSecretName, type SecretStore } from "../secrets/secret-store.js";
import { ApiError } from "../errors.js";
import { formatZodError } from "./schemas.js";

export const SetSecretBody = z
  .object({
    /** The value as text (UTF-8)... */
    value: z.string().min(1).max(MAX_SECRET_BYTES).optional(),
    /** ...or as base64, for binary values. */
    valueBase64: z.string().min(1).max(Math.ceil(MAX_SECRET_BYTES / 3) * 4).optional(),
  })
  .strict()
  .refine((b) => (b.value === undefined) !== (b.valueBase64 === undefined), { error: "give exactly one of value and valueBase64" });

const nameOf = (req: FastifyRequest): string => {
  const name = (req.params as { name: string }).name;
  const bad = checkSecretName(name);
  if (bad) throw new ApiError("invalid_request", bad);
  return name;
};

type Handler = (req: FastifyRequest) => Promise<unknown>;
/** The part of a fastify instance these routes need. */
interface Routes {
  put(path: string, handler: Handler): unknown;
  get(path: string, handler: Handler): unknown;
  delete(path: string, handler: Handler): unknown;
}

export function registerSecretRoutes(app: Routes, secrets: SecretStore, usedBy: (name: string) => string[]): void {
  app.put("/v1/secrets/:name", async (req) => {
    const name = nameOf(req);
    const parsed = SetSecretBody.safeParse(req.body ?? {});
    if (!parsed.success) throw new ApiError("invalid_request", formatZodError(parsed.error));
    const value = parsed.data.value !== undefined ? Buffer.from(parsed.data.value, "utf8") : Buffer.from(parsed.data.valueBase64!, "base64");
    if (value.length === 0 || value.length > MAX_SECRET_BYTES) throw new ApiError("invalid_request", `a secret value is 1 to ${MAX_SECRET_BYTES} bytes; this one is ${value.length}`);
    const version = secrets.set(name, value);
    return { name, version, bytes: value.length, usedBy: usedBy(name) };
  });

  app.get("/v1/secrets", async () => ({ secrets: secrets.list().map((s) => ({ ...s, usedBy: usedBy(s.name) })) }));

  app.delete("/v1/secrets/:name", async (req) => {
    const name = nameOf(req);
    if (!secrets.delete(name)) throw new ApiError("not_found", `no secret named "${name}"`);
    return { name, deleted: true, usedBy: usedBy(name) };
  });
}
