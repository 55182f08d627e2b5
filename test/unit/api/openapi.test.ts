// The OpenAPI document against the live gateway (memory driver): every route fastify
// serves is documented and every documented route is served, WebSocket upgrades included;
// the document is OpenAPI 3.1 in structure (required fields, unique operationIds, path
// parameters, every $ref resolving, JSON Schema 2020-12 keywords only); GET
// /v1/openapi.json serves it behind the token. And the answer check the gateway fixture
// runs on every api() call (openapi-check.ts) refuses what the contract does not allow.

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildOpenApi, type OpenApiDocument } from "../../../src/api/openapi.js";
import { ROUTES, fastifyPath, routeList } from "../../../src/api/routes.js";
import { VERSION } from "../../../src/version.js";
import { checkAnswer, routeFor } from "../../support/openapi-check.js";
import { MemoryDriver } from "../../support/memory-driver.js";
import { startTestGateway, type TestGateway } from "../../support/gateway-fixture.js";
import { upgradeAnswer } from "../../support/ws-upgrade.js";

let t: TestGateway;
let doc: OpenApiDocument;

beforeAll(async () => {
  t = await startTestGateway(new MemoryDriver());
  doc = buildOpenApi();
});
afterAll(async () => {
  await t.close();
});

const HTTP_METHODS = ["get", "put", "post", "delete", "options", "head", "patch", "trace"];
type Op = { operationId: string; parameters?: { name: string; in: string; required?: boolean }[]; responses: Record<string, unknown>; tags: string[] };
const operations = (d: OpenApiDocument): { path: string; method: string; op: Op }[] =>
  Object.entries(d.paths).flatMap(([path, item]) => Object.entries(item).map(([method, op]) => ({ path, method, op: op as unknown as Op })));
const isWebSocket = (path: string, method: string): boolean => routeList().some((r) => r.path === path && r.method.toLowerCase() === method && r.websocket === true);

/** The answer to a WebSocket upgrade: 101, or the refusal's status and JSON body. */
function upgrade(path: string, token = t.token): Promise<{ status: number; body: unknown }> {
  return upgradeAnswer(t.wsUrl(path), { authorization: `Bearer ${token}` });
}

describe("the document and the live routes", () => {
  it("every route fastify serves is documented, and every documented HTTP route is served", () => {
    const served = new Set(t.gw.routes().filter((r) => r.method !== "HEAD").map((r) => `${r.method} ${r.url}`));
    const documented = new Set(operations(doc).filter((o) => !isWebSocket(o.path, o.method)).map((o) => `${o.method.toUpperCase()} ${fastifyPath(o.path)}`));
    expect([...served].filter((r) => !documented.has(r)), "served but not documented: add an entry to src/api/routes.ts").toEqual([]);
    expect([...documented].filter((r) => !served.has(r)), "documented but not served").toEqual([]);
    expect(served.size).toBeGreaterThan(25);
    // fastify's own HEAD routes answer for GETs only.
    for (const r of t.gw.routes().filter((x) => x.method === "HEAD")) expect(served.has(`GET ${r.url}`)).toBe(true);
  });

  it("every documented WebSocket route is upgraded (the sandbox is looked up), and an undocumented one is not", async () => {
    const ws = routeList().filter((r) => r.websocket === true);
    expect(ws.map((r) => r.operationId).sort()).toEqual(["execSession", "portForward"]);
    for (const r of ws) {
      const a = await upgrade(`${r.path.replace("{name}", "nosuch")}?${r.operationId === "execSession" ? "cmd=true" : "port=80"}`);
      expect(a.status, r.operationId).toBe(404);
      expect(a.body, r.operationId).toEqual({ error: { code: "not_found", message: 'no sandbox named "nosuch"' } });
      expect(r.errors).toContain(404);
    }
    const none = await upgrade("/v1/sandboxes/nosuch/undocumented");
    expect(none.status).toBe(404);
    expect((none.body as { error: { message: string } }).error.message).toMatch(/^no route for upgrade/);
    expect((await upgrade("/v1/sandboxes/nosuch/exec?cmd=true", "wrong")).status).toBe(401);
  });

  it("GET /v1/openapi.json serves the document, behind the token", async () => {
    const r = await t.api("GET", "/v1/openapi.json");
    expect(r.status).toBe(200);
    expect(r.body).toEqual(JSON.parse(JSON.stringify(doc)));
    const none = await t.fetch(`/v1/openapi.json`);
    expect(none.status).toBe(401);
    expect((await t.api("GET", "/v1/openapi.json", undefined, "wrong")).status).toBe(401);
  });
});

/** Every object reachable from `v`, with its JSON pointer. */
function* walk(v: unknown, at = "#"): Generator<[string, Record<string, unknown>]> {
  if (Array.isArray(v)) for (const [i, x] of v.entries()) yield* walk(x, `${at}/${i}`);
  else if (typeof v === "object" && v !== null) {
    yield [at, v as Record<string, unknown>];
    for (const [k, x] of Object.entries(v)) yield* walk(x, `${at}/${k.replace(/~/g, "~0").replace(/\//g, "~1")}`);
  }
}

function resolvePointer(d: unknown, ref: string): unknown {
  if (!ref.startsWith("#/")) return undefined;
  let cur: unknown = d;
  for (const raw of ref.slice(2).split("/")) {
    const key = raw.replace(/~1/g, "/").replace(/~0/g, "~");
    if (typeof cur !== "object" || cur === null || !(key in cur)) return undefined;
    cur = (cur as Record<string, unknown>)[key];
  }
  return cur;
}

/** JSON Schema 2020-12 keywords (and OpenAPI 3.1's additions) a schema here may use. */
const SCHEMA_KEYWORDS = new Set([
  "$ref", "type", "enum", "const", "properties", "required", "additionalProperties", "propertyNames", "items", "prefixItems",
  "anyOf", "oneOf", "allOf", "not", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf",
  "minLength", "maxLength", "pattern", "format", "minItems", "maxItems", "uniqueItems", "description", "default", "title", "examples",
]);
const SUBSCHEMA_MAPS = ["properties"];
const SUBSCHEMAS = ["items", "additionalProperties", "propertyNames", "not"];
const SUBSCHEMA_LISTS = ["anyOf", "oneOf", "allOf", "prefixItems"];

/** Problems of one schema and its subschemas: unknown keywords, `type` not a JSON type. */
function schemaProblems(s: unknown, at: string): string[] {
  if (typeof s === "boolean") return [];
  if (typeof s !== "object" || s === null) return [`${at}: not a schema`];
  const o = s as Record<string, unknown>;
  const out = Object.keys(o).filter((k) => !SCHEMA_KEYWORDS.has(k)).map((k) => `${at}: unknown keyword ${k}`);
  for (const ty of [o.type].flat()) if (ty !== undefined && !["string", "number", "integer", "boolean", "object", "array", "null"].includes(ty as string)) out.push(`${at}: type ${JSON.stringify(ty)}`);
  for (const k of SUBSCHEMA_MAPS) for (const [name, sub] of Object.entries((o[k] ?? {}) as Record<string, unknown>)) out.push(...schemaProblems(sub, `${at}/${k}/${name}`));
  for (const k of SUBSCHEMAS) if (o[k] !== undefined) out.push(...schemaProblems(o[k], `${at}/${k}`));
  for (const k of SUBSCHEMA_LISTS) for (const [i, sub] of ((o[k] ?? []) as unknown[]).entries()) out.push(...schemaProblems(sub, `${at}/${k}/${i}`));
  return out;
}

describe("the document is OpenAPI 3.1", () => {
  it("has the required top-level fields, the package version and bearer security", () => {
    expect(doc.openapi).toBe("3.1.0");
    expect(doc.info.title).toBeTruthy();
    expect(doc.info.version).toBe(VERSION);
    expect(doc.security).toEqual([{ bearerAuth: [] }]);
    expect(doc.components.securitySchemes.bearerAuth).toMatchObject({ type: "http", scheme: "bearer" });
    for (const s of doc.servers) expect(new URL(s.url).hostname).toBe("127.0.0.1");
    expect(Object.keys(doc.paths).length).toBeGreaterThan(20);
  });

  it("operations: valid methods, unique operationIds, known tags, described responses, every path parameter declared", () => {
    const tags = new Set(doc.tags.map((x) => x.name));
    const ids = operations(doc).map((o) => o.op.operationId);
    expect(new Set(ids).size).toBe(ids.length);
    expect(ids.sort()).toEqual(Object.keys(ROUTES).sort());
    for (const { path, method, op } of operations(doc)) {
      const where = `${method} ${path}`;
      expect(path, where).toMatch(/^\//);
      expect(HTTP_METHODS, where).toContain(method);
      for (const tag of op.tags) expect(tags, where).toContain(tag);
      expect(Object.keys(op.responses).length, where).toBeGreaterThan(0);
      for (const [status, res] of Object.entries(op.responses)) {
        expect(status, where).toMatch(/^[1-5]\d\d$/);
        const r = (res as { $ref?: string }).$ref ? resolvePointer(doc, (res as { $ref: string }).$ref) : res;
        expect((r as { description?: string }).description, `${where} ${status}`).toBeTruthy();
      }
      const inPath = [...path.matchAll(/\{(\w+)\}/g)].map((m) => m[1]).sort();
      const declared = (op.parameters ?? []).filter((p) => p.in === "path");
      expect(declared.map((p) => p.name).sort(), where).toEqual(inPath);
      for (const p of declared) expect(p.required, `${where} ${p.name}`).toBe(true);
      const names = (op.parameters ?? []).map((p) => `${p.in} ${p.name}`);
      expect(new Set(names).size, where).toBe(names.length);
    }
  });

  it("every $ref resolves inside the document", () => {
    const refs = [...walk(doc)].flatMap(([at, o]) => (typeof o.$ref === "string" ? [[at, o.$ref] as const] : []));
    expect(refs.length).toBeGreaterThan(50);
    const broken = refs.filter(([, ref]) => resolvePointer(doc, ref) === undefined);
    expect(broken).toEqual([]);
  });

  it("every schema uses JSON Schema 2020-12 keywords only, and no schema carries $schema or $id", () => {
    const problems: string[] = [];
    for (const [name, s] of Object.entries(doc.components.schemas)) problems.push(...schemaProblems(s, `#/components/schemas/${name}`));
    for (const [at, o] of walk(doc.paths, "#/paths")) if (at.endsWith("/schema")) problems.push(...schemaProblems(o, at));
    expect(problems).toEqual([]);
  });

  it("errors are ApiError answers, with the codes their status carries", () => {
    expect(doc.components.responses.Conflict).toMatchObject({ content: { "application/json": { schema: { $ref: "#/components/schemas/ApiError" } } } });
    expect(doc.components.responses.Conflict!.description).toMatch(/`already_exists`, `not_allowed`, `stale_generation`/);
    for (const { path, method, op } of operations(doc)) for (const s of ["400", "500"]) expect(op.responses[s], `${method} ${path} ${s}`).toBeDefined();
    // 401 on every route but the one answered without the token.
    for (const { path, method, op } of operations(doc)) expect([`${method} ${path}`, op.responses["401"] !== undefined]).toEqual([`${method} ${path}`, path !== "/healthz"]);
    expect(operations(doc).find((o) => o.path === "/healthz")!.op).toMatchObject({ security: [] });
  });
});

describe("the answer check the fixture runs on every api() call", () => {
  const view = { sandboxes: [], next: null };
  it("finds the route fastify would (static segments first), HEAD as GET", () => {
    expect(routeFor("GET", "/v1/sandboxes/x/files/stat?path=/sandbox")?.operationId).toBe("statFile");
    expect(routeFor("GET", "/v1/sandboxes/x/files?path=/sandbox")?.operationId).toBe("downloadFiles");
    expect(routeFor("HEAD", "/v1/sandboxes/x/logs")?.operationId).toBe("getLogs");
    expect(routeFor("GET", "/v1/sandboxes/x/exec")).toBeNull(); // a WebSocket, not an HTTP answer
    expect(routeFor("PATCH", "/v1/sandboxes/x")).toBeNull();
  });

  it("passes a documented answer", () => {
    expect(checkAnswer("GET", "/v1/sandboxes?limit=5", 200, "application/json; charset=utf-8", view)).toBeNull();
    expect(checkAnswer("GET", "/v1/sandboxes/x", 404, "application/json", { error: { code: "not_found", message: "no sandbox" } })).toBeNull();
    expect(checkAnswer("GET", "/v1/nowhere", 404, "application/json", { error: { code: "not_found", message: "no route" } })).toBeNull();
  });

  it("refuses a missing field, an extra field, a wrong type, an undocumented status, a wrong error code and a wrong media type", () => {
    expect(checkAnswer("GET", "/v1/sandboxes", 200, "application/json", { sandboxes: [] })).toMatch(/listSandboxes .* refuses/);
    expect(checkAnswer("GET", "/v1/sandboxes", 200, "application/json", { ...view, total: 0 })).toMatch(/refuses/);
    expect(checkAnswer("GET", "/v1/sandboxes", 200, "application/json", { sandboxes: "none", next: null })).toMatch(/refuses/);
    expect(checkAnswer("GET", "/v1/sandboxes", 404, "application/json", { error: { code: "not_found", message: "x" } })).toMatch(/answered 404, which it does not document/);
    expect(checkAnswer("GET", "/v1/sandboxes", 201, "application/json", view)).toMatch(/answered 201, which it does not document/);
    expect(checkAnswer("GET", "/v1/sandboxes/x", 404, "application/json", { error: { code: "not_allowed", message: "x" } })).toMatch(/not_allowed is answered with 409, not 404/);
    expect(checkAnswer("GET", "/v1/sandboxes/x", 404, "application/json", { message: "x" })).toMatch(/not an ApiError/);
    expect(checkAnswer("GET", "/v1/sandboxes", 200, "text/plain", view)).toMatch(/not application\/json/);
    expect(checkAnswer("GET", "/metrics", 200, "application/json", {})).toMatch(/not text\/plain/);
    expect(checkAnswer("GET", "/v1/nowhere", 200, "application/json", {})).toMatch(/no documented route/);
  });
});
