// /v1/secrets: create or replace, list (names, versions, sizes, where bound: never values),
// delete. A value travels from the client to the gateway, and from there only to the
// supervisors whose policy references it; a change reaches them at once (optionally waited for).

import type { FastifyRequest } from "fastify";
import { checkSecretName, type SecretStore } from "../secrets/secret-store.js";
import { ApiError } from "../errors.js";
import { MAX_SECRET_BYTES } from "../../api/schemas.js";
import { route, type RouteGroup } from "./register.js";
import type { BoundIn, Delivery } from "../secrets/secret-delivery.js";

const nameOf = (req: FastifyRequest): string => {
  const name = (req.params as { name: string }).name;
  const bad = checkSecretName(name);
  if (bad) throw new ApiError("invalid_request", bad);
  return name;
};

/** Where secrets are used and how a change reaches the supervisors (SecretDelivery). */
export interface SecretPlaces {
  usedBy(name: string): Promise<string[]>;
  bindings(name: string): Promise<BoundIn[]>;
  deliver(name: string, waitMs: number | null): Promise<Delivery>;
}

export const secretRoutes: RouteGroup<{ store: SecretStore; delivery: SecretPlaces }> = async (app, { store: secrets, delivery: places }) => {
  route(app, "setSecret", async (req, _reply, input) => {
    const name = nameOf(req);
    const body = input.body();
    const value = body.value !== undefined ? Buffer.from(body.value, "utf8") : Buffer.from(body.valueBase64!, "base64");
    if (value.length === 0 || value.length > MAX_SECRET_BYTES) throw new ApiError("invalid_request", `a secret value is 1 to ${MAX_SECRET_BYTES} bytes; this one is ${value.length}`);
    const version = await secrets.set(name, value);
    const delivery = await places.deliver(name, body.wait === undefined ? null : body.wait * 1000);
    return { name, version, bytes: value.length, usedBy: await places.usedBy(name), bindings: await places.bindings(name), ...delivery };
  });

  route(app, "listSecrets", async () => {
    const out = [];
    for (const s of await secrets.list()) out.push({ ...s, usedBy: await places.usedBy(s.name), bindings: await places.bindings(s.name) });
    return { secrets: out };
  });

  route(app, "deleteSecret", async (req) => {
    const name = nameOf(req);
    if (!await secrets.delete(name)) throw new ApiError("not_found", `no secret named "${name}"`);
    // The supervisors drop it: its placeholders fail closed from now on.
    const { pushed } = await places.deliver(name, null);
    return { name, deleted: true, usedBy: await places.usedBy(name), pushed };
  });
};
