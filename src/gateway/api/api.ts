// The gateway's REST/JSON API under /v1, on loopback, behind a bearer token.

import Fastify, { type FastifyReply, type FastifyRequest } from "fastify";
import type { ServerResponse } from "node:http";
import type { Logger } from "pino";
import type { z } from "zod";
import { CheckPolicyBody, CreateSandboxBody, EventsQuery, SetPolicyBody, WatchQuery, formatZodError } from "./schemas.js";
import { tokenMatches } from "./auth.js";
import { ApiError } from "../errors.js";
import type { SandboxReadModel } from "../sandboxes/read-model.js";
import type { SandboxService } from "../sandboxes/service.js";
import { eventView, sandboxView } from "./views.js";

export interface ApiContext {
  /** Writes: intents and policy changes. */
  service: SandboxService;
  /** Reads. */
  read: SandboxReadModel;
  token: string;
  log: Logger;
  status: () => Record<string, unknown>;
}

function parse<T extends z.ZodType>(schema: T, value: unknown): z.infer<T> {
  const r = schema.safeParse(value ?? {});
  if (!r.success) throw new ApiError("invalid_request", formatZodError(r.error));
  return r.data;
}

const nameParam = (req: FastifyRequest): string => (req.params as { name: string }).name;

export function buildApi(ctx: ApiContext) {
  const { service, read } = ctx;
  const app = Fastify({
    loggerInstance: ctx.log,
    // Our own one-line request log (below) replaces fastify's two lines per request.
    logController: new Fastify.LogController({ disableRequestLogging: true }),
    bodyLimit: 1 << 20,
    // Bytes that are not HTTP get our error shape too, and the socket is closed.
    clientErrorHandler: (err, socket) => {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === "ECONNRESET" || !socket.writable) {
        socket.destroy();
        return;
      }
      const body = JSON.stringify({ error: { code: "invalid_request", message: `malformed HTTP request (${code ?? err.message})` } });
      socket.end(`HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`);
    },
  });
  app.addHook("onResponse", async (req, reply) => {
    req.log.debug({ method: req.method, url: req.url.replace(/\?.*/, ""), status: reply.statusCode, ms: Math.round(reply.elapsedTime) }, "request");
  });

  app.addHook("onRequest", async (req) => {
    if (!tokenMatches(req.headers.authorization, ctx.token)) {
      throw new ApiError("unauthorized", "missing or wrong bearer token");
    }
  });

  app.setErrorHandler((err: Error & { statusCode?: number; code?: string }, req, reply) => {
    if (err instanceof ApiError) {
      return reply.code(err.status).send({ error: { code: err.code, message: err.message } });
    }
    // Fastify's own 4xx (malformed JSON, wrong content type, body too large).
    if (err.statusCode && err.statusCode >= 400 && err.statusCode < 500) {
      return reply.code(err.statusCode).send({ error: { code: "invalid_request", message: err.message } });
    }
    req.log.error({ err }, "request failed");
    return reply.code(500).send({ error: { code: "internal", message: "internal error; see the gateway log" } });
  });

  app.setNotFoundHandler((req, reply) =>
    reply.code(404).send({ error: { code: "not_found", message: `no route ${req.method} ${req.url}` } }),
  );

  app.get("/v1/status", async () => ctx.status());

  app.get("/v1/sandboxes", async () => ({ sandboxes: read.list().map((s) => sandboxView(s, read.boundaryOf(s.id))) }));

  app.post("/v1/sandboxes", async (req, reply) => {
    const body = parse(CreateSandboxBody, req.body);
    const s = service.create(body);
    return reply.code(201).send(sandboxView(s));
  });

  app.get("/v1/sandboxes/:name", async (req) => {
    const s = read.get(nameParam(req));
    return sandboxView(s, read.boundaryOf(s.id));
  });

  app.get("/v1/sandboxes/:name/policy", async (req) => {
    const p = read.policyOf(nameParam(req));
    return { sandbox: p.sandbox.name, revision: p.revision, hash: p.hash, createdAt: p.createdAt, policy: p.policy, boundary: p.boundary };
  });

  app.put("/v1/sandboxes/:name/policy", async (req) => {
    const body = parse(SetPolicyBody, req.body);
    const { revision, pushed } = service.setPolicy(nameParam(req), body.policy);
    const s = read.get(nameParam(req));
    if (!body.wait) return { revision, pushed, enforced: null, boundary: read.boundaryOf(s.id) };
    const w = await service.waitForPolicy(s.id, revision, body.wait * 1000);
    return { revision, pushed, enforced: w.enforced, boundary: w.boundary };
  });

  app.post("/v1/sandboxes/:name/policy/check", async (req) => {
    const body = parse(CheckPolicyBody, req.body);
    return service.checkPolicy(nameParam(req), body.url, body.method);
  });

  for (const intent of ["start", "stop"] as const) {
    app.post(`/v1/sandboxes/:name/${intent}`, async (req, reply) =>
      reply.code(202).send(sandboxView(service.request(nameParam(req), intent))),
    );
  }

  app.delete("/v1/sandboxes/:name", async (req, reply) =>
    reply.code(202).send(sandboxView(service.request(nameParam(req), "delete"))),
  );

  app.get("/v1/sandboxes/:name/events", async (req) => {
    const q = parse(EventsQuery, req.query);
    const s = read.get(nameParam(req));
    return { events: read.events(s.id, { afterSeq: q.after, limit: q.limit }).map(eventView) };
  });

  // Watch streams are hijacked from fastify: end them ourselves on close.
  const streams = new Set<ServerResponse>();
  app.addHook("preClose", async () => {
    for (const res of streams) res.end();
  });
  app.get("/v1/watch", (req, reply) => watch(ctx, req, reply, streams));

  return app;
}

/** Server-Sent Events: one `event: sandbox` per committed event, optionally for one sandbox. */
function watch(ctx: ApiContext, req: FastifyRequest, reply: FastifyReply, streams: Set<ServerResponse>): void {
  const q = parse(WatchQuery, req.query);
  const only = q.sandbox === undefined ? undefined : ctx.read.get(q.sandbox).id;
  reply.hijack();
  const res = reply.raw;
  streams.add(res);
  res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-store", connection: "keep-alive" });
  res.write(": sandgate watch\n\n");
  const off = ctx.read.onEvent((e) => {
    if (only !== undefined && e.sandboxId !== only) return;
    const s = ctx.read.find(e.sandboxId);
    res.write(`event: sandbox\nid: ${e.seq}\ndata: ${JSON.stringify({ event: eventView(e), sandbox: s ? sandboxView(s) : null })}\n\n`);
  });
  // Comments keep idle proxies and clients from timing the stream out.
  const beat = setInterval(() => res.write(": keep-alive\n\n"), 15_000);
  const stop = (): void => {
    clearInterval(beat);
    off();
    streams.delete(res);
  };
  res.on("close", stop);
  req.raw.on("close", stop);
}
