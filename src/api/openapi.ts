// The OpenAPI 3.1 document of the API, generated from the route table (routes.ts) and the
// zod schemas it names: request schemas as the gateway accepts them (zod's input side),
// answers as it sends them (the output side), JSON Schema draft 2020-12, which is
// OpenAPI 3.1's dialect. Nothing here is written by hand but words. Served at
// GET /v1/openapi.json; test/unit/api/openapi.test.ts checks it against the live routes.

import { z } from "zod";
import { VERSION } from "../version.js";
import { API_ERRORS, SCHEMA_COMPONENTS, type ApiErrorCode } from "./responses.js";
import { COMMON_ERRORS, routeList, TAGS, type RouteContract, type Tag } from "./routes.js";

type Json = Record<string, unknown>;

export type OpenApiDocument = {
  openapi: "3.1.0";
  jsonSchemaDialect: string;
  info: { title: string; version: string; description: string; license: { name: string; identifier: string } };
  servers: { url: string; description: string }[];
  security: Record<string, string[]>[];
  tags: { name: string; description: string }[];
  paths: Record<string, Record<string, Json>>;
  components: { schemas: Record<string, Json>; responses: Record<string, Json>; securitySchemes: Record<string, Json> };
};

const SCHEMA_REF = "#/components/schemas/";
const RESPONSE_REF = "#/components/responses/";

const TAG_TEXT: Record<Tag, string> = {
  gateway: "The gateway itself: status, metrics, this document",
  sandboxes: "Create, read, start, stop and delete sandboxes; their event log and phase changes",
  policy: "A sandbox's network policy: read, set, check, and review a change before making it",
  audit: "The egress decisions a sandbox's supervisor recorded",
  execs: "Commands in a sandbox (attached over WebSocket, or detached) and port forwarding",
  files: "Files in and out of a sandbox's workspace (`sandbox cp`)",
  logs: "What a sandbox's containers wrote",
  secrets: "Secrets the supervisors inject into requests; never shown",
  stats: "What Ready sandboxes use now",
};

const ERROR_NAMES: Record<number, string> = { 400: "BadRequest", 401: "Unauthorized", 403: "Forbidden", 404: "NotFound", 409: "Conflict", 413: "TooLarge", 500: "Internal", 503: "Unavailable" };
const ERROR_TEXT: Record<number, string> = {
  400: "Invalid input: the message names the value and what is allowed.",
  401: "Missing or wrong bearer token.",
  403: "The token is right but does not carry the capability (deciding a policy proposal needs the approver token).",
  404: "No such sandbox, secret, exec or route.",
  409: "Not allowed in the sandbox's current phase, the name is taken, or the sandbox is not at the generation the request expects.",
  413: "The request is over a size limit, named in the message.",
  500: "The gateway failed; its log says why.",
  503: "The gateway cannot do it now (the runtime is not ready, a limit of open streams is reached, the listener holds its --max-connections authenticated connections, it is shutting down); try again.",
};

/** Drops what only a JSON Schema document carries (`$schema`, `$id`). */
function tidy(schema: Json): Json {
  return Object.fromEntries(Object.entries(schema).filter(([k]) => k !== "$schema" && k !== "$id"));
}
/** Leaves out what says nothing: zod's long date-time pattern (`format` says it) and an integer's safe-integer bounds. */
const override = (ctx: { jsonSchema: Json }): void => {
  const s = ctx.jsonSchema;
  if (s.format === "date-time") delete s.pattern;
  if (s.minimum === Number.MIN_SAFE_INTEGER) delete s.minimum;
  if (s.maximum === Number.MAX_SAFE_INTEGER) delete s.maximum;
};

/** Request schemas: what the gateway accepts, each inlined where used. */
function inputSchema(schema: z.ZodType): Json {
  return tidy(z.toJSONSchema(schema, { io: "input", unrepresentable: "any", override }));
}

function parameters(r: RouteContract): Json[] {
  const out: Json[] = [];
  for (const [name, schema] of Object.entries(r.params)) {
    const { description, ...s } = inputSchema(schema);
    out.push({ name, in: "path", required: true, ...(description === undefined ? {} : { description }), schema: s });
  }
  if (r.query !== undefined) {
    const q = inputSchema(r.query);
    const required = new Set((q.required as string[] | undefined) ?? []);
    for (const [name, prop] of Object.entries((q.properties ?? {}) as Record<string, Json>)) {
      const { description, ...s } = prop;
      out.push({ name, in: "query", required: required.has(name), ...(description === undefined ? {} : { description }), schema: s });
    }
  }
  return out;
}

function requestBody(r: RouteContract): Json | undefined {
  if (r.body === undefined) return undefined;
  if ("schema" in r.body) return { required: true, content: { "application/json": { schema: inputSchema(r.body.schema) } } };
  const kinds = Object.entries(r.body.content);
  return {
    required: true,
    description: kinds.map(([type, text]) => `\`${type}\`: ${text}`).join("\n\n"),
    content: Object.fromEntries(kinds.map(([type]) => [type, {}])),
  };
}

export function buildOpenApi(): OpenApiDocument {
  const routes = routeList();

  // Answers: one registry holds the named components and every operation's own schema, so a
  // component used inside an answer becomes a $ref and the rest is inlined.
  const registry = z.registry<{ id: string }>();
  const idOf = new Map<z.ZodType, string>();
  for (const [id, schema] of Object.entries(SCHEMA_COMPONENTS)) {
    registry.add(schema, { id });
    idOf.set(schema, id);
  }
  for (const r of routes) {
    for (const [status, res] of Object.entries(r.responses)) {
      if (!("schema" in res) || idOf.has(res.schema)) continue;
      const id = `${r.operationId}.${status}`;
      registry.add(res.schema, { id });
      idOf.set(res.schema, id);
    }
  }
  const converted = z.toJSONSchema(registry, { io: "output", unrepresentable: "any", override, uri: (id) => `${SCHEMA_REF}${id}` }).schemas as Record<string, Json>;
  const components = new Set(Object.keys(SCHEMA_COMPONENTS));
  const answer = (schema: z.ZodType): Json => {
    const id = idOf.get(schema)!;
    return components.has(id) ? { $ref: `${SCHEMA_REF}${id}` } : tidy(converted[id]!);
  };

  const paths: OpenApiDocument["paths"] = {};
  for (const r of routes) {
    const responses: Record<string, Json> = {};
    for (const [status, res] of Object.entries(r.responses)) {
      if ("schema" in res) responses[status] = { description: res.description, content: { "application/json": { schema: answer(res.schema) } } };
      else if ("content" in res) responses[status] = { description: res.description, content: { [res.content]: {} } };
      else responses[status] = { description: res.description };
    }
    for (const status of [...COMMON_ERRORS, ...r.errors].sort((a, b) => a - b)) {
      if (status === 401 && r.public) continue;
      responses[String(status)] = { $ref: `${RESPONSE_REF}${ERROR_NAMES[status]!}` };
    }
    const body = requestBody(r);
    const params = parameters(r);
    (paths[r.path] ??= {})[r.method.toLowerCase()] = {
      operationId: r.operationId,
      summary: r.summary,
      ...(r.description === undefined ? {} : { description: r.description }),
      tags: [r.tag],
      ...(r.public ? { security: [] } : {}),
      ...(params.length === 0 ? {} : { parameters: params }),
      ...(body === undefined ? {} : { requestBody: body }),
      responses,
    };
  }

  const codesOf = (status: number): ApiErrorCode[] => (Object.keys(API_ERRORS) as ApiErrorCode[]).filter((c) => API_ERRORS[c] === status);
  const errorResponses = Object.fromEntries(
    Object.entries(ERROR_NAMES).map(([status, name]) => [
      name,
      {
        description: `${ERROR_TEXT[Number(status)]!} Codes: ${codesOf(Number(status)).map((c) => `\`${c}\``).join(", ")}.`,
        content: { "application/json": { schema: { $ref: `${SCHEMA_REF}ApiError` } } },
      },
    ]),
  );

  return {
    openapi: "3.1.0",
    jsonSchemaDialect: "https://json-schema.org/draft/2020-12/schema",
    info: {
      title: "Sandgate gateway API",
      version: VERSION,
      description:
        "The REST API of the Sandgate gateway, which the `sandgate` CLI drives. It listens on loopback only; every route but `GET /healthz`, this document included, needs the bearer token in the gateway's home (`~/.sandgate/token`). Every GET also answers HEAD. Errors are `{\"error\": {\"code\", \"message\"}}`. Generated from the gateway's own schemas (docs/api.md).",
      license: { name: "Apache-2.0", identifier: "Apache-2.0" },
    },
    servers: [
      {
        url: "https://127.0.0.1:7420",
        description:
          "A TCP listener (`gateway start --listen tcp://127.0.0.1:7420`): TLS only, with the home's `api-cert.pem`, which a client pins. Local clients use the Unix socket `<home>/api.sock`; `gateway.json` in the gateway's home names every listener.",
      },
    ],
    security: [{ bearerAuth: [] }],
    tags: TAGS.map((name) => ({ name, description: TAG_TEXT[name] })),
    paths,
    components: {
      schemas: Object.fromEntries([...components].map((id) => [id, tidy(converted[id]!)])),
      responses: errorResponses,
      securitySchemes: { bearerAuth: { type: "http", scheme: "bearer", description: "The token in the gateway's home (`token`, mode 0600), made on its first start." } },
    },
  };
}
