// Sandboxes: list, create, get, the lifecycle intents (start, stop, delete), and each
// sandbox's records (its events and its audit log), read in pages by cursor.

import type { FastifyRequest } from "fastify";
import { LIST_PAGE_MAX } from "../../api/schemas.js";
import { sinceTime } from "../sandboxes/policy-tools.js";
import { toOcsf } from "../audit/ocsf.js";
import type { SandboxReadModel } from "../sandboxes/read-model.js";
import type { SandboxService } from "../sandboxes/service.js";
import { eventView, sandboxSummaryView, sandboxView } from "./views.js";
import { checkPolicySize } from "./policy-routes.js";
import { route, type RouteGroup } from "./register.js";

const nameParam = (req: FastifyRequest): string => (req.params as { name: string }).name;

export const sandboxRoutes: RouteGroup<{ service: SandboxService; read: SandboxReadModel }> = async (app, { service, read }) => {
  // Paged by name; without `limit` a page is LIST_PAGE_MAX (every sandbox up to that many,
  // as before paging), without `view` the full view (as before). `sandbox list` asks for
  // lean pages: one indexed read per page, nothing per row.
  route(app, "listSandboxes", async (_req, _reply, input) => {
    const q = input.query();
    const page = { after: q.after, limit: q.limit ?? LIST_PAGE_MAX, phase: q.phase, labels: q.label };
    if (q.view === "lean") {
      const p = await read.listSummaries(page);
      return { sandboxes: p.sandboxes.map(sandboxSummaryView), next: p.next };
    }
    const p = await read.listPage(page);
    return { sandboxes: p.sandboxes.map((s) => sandboxView(s, read.boundaryOf(s.id))), next: p.next };
  });

  route(app, "createSandbox", async (_req, reply, input) => {
    const body = input.body();
    checkPolicySize(body.policy);
    const s = await service.create(body);
    return reply.code(201).send(sandboxView(s));
  });

  route(app, "getSandbox", async (req) => {
    const s = await read.get(nameParam(req));
    return { ...sandboxView(s, read.boundaryOf(s.id), read.diskOf(s)), expiry: await read.expiryOf(s) };
  });

  for (const [op, intent] of [["startSandbox", "start"], ["stopSandbox", "stop"]] as const) {
    route(app, op, async (req, reply) => reply.code(202).send(sandboxView(await service.request(nameParam(req), intent))));
  }

  route(app, "deleteSandbox", async (req, reply, input) => reply.code(202).send(sandboxView(await service.request(nameParam(req), "delete", input.query()))));

  // Logs are read in pages by cursor: `next` is the cursor of the following page
  // (pass it as `after`), null when this page reached the end.
  route(app, "listEvents", async (req, _reply, input) => {
    const q = input.query();
    const s = await read.get(nameParam(req));
    const events = await read.events(s.id, { afterSeq: q.after, beforeSeq: q.before, limit: q.limit, tail: q.tail });
    return { events: events.map(eventView), next: pageCursor(events, q) };
  });

  route(app, "listAudit", async (req, _reply, input) => {
    const q = input.query();
    const s = await read.get(nameParam(req));
    const records = await read.audit(s.id, { afterSeq: q.after, beforeSeq: q.before, limit: q.limit, tail: q.tail, decision: q.decision, since: sinceTime(q.since) });
    const next = pageCursor(records, q);
    if (q.format === "ocsf") return { audit: records.map((r) => toOcsf(r, { sandboxName: s.name })), next };
    return { audit: records, next };
  });
};

/** The cursor after a page: its last sequence number when the page is full, else null. */
function pageCursor(rows: { seq: number }[], q: { limit?: number; tail?: number }): number | null {
  if (q.tail !== undefined) return null;
  return rows.length === (q.limit ?? 1000) ? rows.at(-1)!.seq : null;
}
