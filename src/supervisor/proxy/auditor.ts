// Sends the proxy's audit records (shaped in audit-record.ts) to its sink: a decision at
// once, a request's when its response is over, a tunnel's when it closes. A failing sink
// is logged, never thrown into the request path.
import type http from "node:http";
import type net from "node:net";
import type { Duplex } from "node:stream";
import type { PolicyHolder } from "../policy-holder.js";
import type { Logger } from "../logger.js";
import { errorFields } from "../logger.js";
import { closeRecord, decisionRecord, exchangeRecord, type AuditedDecision } from "./audit-record.js";
import { UPSTREAM_CERTIFICATE, UPSTREAM_ERROR, UPSTREAM_TLS_ERROR, UPSTREAM_UNREACHABLE } from "./refusals.js";
import type { Target } from "./target.js";
import { meter, type Traffic } from "./traffic.js";
import type { AuditEvent } from "./types.js";

export interface Auditor {
  /** The record of a decision, under the revision in force now (not sent). */
  record(t: Target, o: AuditedDecision): AuditEvent;
  emit(event: AuditEvent): void;
  /** record() and emit() at once. */
  audit(t: Target, o: AuditedDecision): void;
  /**
   * A request's record goes out once its response is over, with what it exchanged with the
   * origin (headers included) and how long it took; the returned function is given each
   * upstream request made for it (a retry replaces the first).
   */
  atEnd(event: AuditEvent, res: http.ServerResponse): (upReq: http.ClientRequest) => void;
  /**
   * A tunnel's (or WebSocket's) allow went out at its opening; the returned function sends its
   * close record with what `socket` moved from now on. Run it once, when the socket closes.
   */
  atClose(event: AuditEvent, socket: Duplex): () => void;
}

/** The proxy answered for an origin it could not reach or trust: that outcome, else undefined. */
function upstreamFailure(res: http.ServerResponse): string | undefined {
  const said = res.getHeader("x-proxy-error");
  return said === UPSTREAM_TLS_ERROR ? UPSTREAM_CERTIFICATE : said === UPSTREAM_ERROR ? UPSTREAM_UNREACHABLE : undefined;
}

export function createAuditor(sink: (event: AuditEvent) => void, policy: PolicyHolder, logger: Logger): Auditor {
  const record = (t: Target, o: AuditedDecision): AuditEvent => decisionRecord(t, o, policy.current()?.revision, new Date().toISOString());
  const emit = (event: AuditEvent): void => {
    try {
      sink(event);
    } catch (err) {
      logger.error("audit sink failed", errorFields(err));
    }
  };
  return {
    record,
    emit,
    audit: (t, o) => emit(record(t, o)),
    atEnd(event, res) {
      const t0 = Date.now();
      let measured: (() => Traffic) | undefined;
      res.once("close", () => emit(exchangeRecord(event, measured?.() ?? { bytesOut: 0, bytesIn: 0 }, Date.now() - t0, res.statusCode, upstreamFailure(res))));
      return (upReq) => upReq.once("socket", (socket: net.Socket) => (measured = meter(socket, "origin")));
    },
    atClose(event, socket) {
      const measured = meter(socket, "workload");
      return () => emit(closeRecord(event, new Date().toISOString(), measured()));
    },
  };
}
