// Tunnels: a CONNECT, or any socket whose target is known otherwise, is authorized as a
// tunnel (decideTunnel: raw tcp, blind https, or terminated https), then spliced to its
// checked address, a blind https one only once its first bytes are a ClientHello for the
// target host (tls/hello-gate.ts), or handed to terminated.ts to have its TLS ended here.
import type http from "node:http";
import net from "node:net";
import type { Duplex } from "node:stream";
import { errorFields } from "../logger.js";
import { TimeoutError } from "../../util/timeout.js";
import { readHello } from "../tls/hello-gate.js";
import type { Allowed } from "./authorize.js";
import type { ProxyContext } from "./context.js";
import { CONNECT_NEEDS_AUTHORITY, POLICY_ERROR, PROXY_ERROR, PROXY_FAILED, UPSTREAM_ERROR, denialBody, unreachable, unreachableBody } from "./refusals.js";
import { grantOf, type Tunnel } from "./registry.js";
import { CONNECT_ANSWER, type TunnelAnswer } from "./respond.js";
import { splice } from "./splice.js";
import { connectTarget, parseConnectTarget, type Target } from "./target.js";
import type { TerminatedHttps } from "./terminated.js";
import type { AuditEvent } from "./types.js";

export interface TunnelOptions {
  /** Bytes already read from the socket past what named the target: the tunnel's first bytes. */
  head: Buffer;
  /** How the socket's client hears whether the tunnel was established (a CONNECT: CONNECT_ANSWER). */
  answer: TunnelAnswer;
  /** The path the socket came by, when not the proxy's (its audit records say so). */
  via?: "transparent";
}

export interface Tunnels {
  /** An http.Server's "connect": the request names host:port. */
  connect: (req: http.IncomingMessage, socket: Duplex, head: Buffer) => void;
  /**
   * What a CONNECT to host:port does once it is read, for a socket whose target is known
   * otherwise: registered as a tunnel, authorized (audited), then spliced, gated or terminated.
   */
  open: (socket: Duplex, target: { host: string; port: number }, opts: TunnelOptions) => void;
}

export function createTunnels(ctx: ProxyContext, terminated: TerminatedHttps): Tunnels {
  const { registry, audit, authorizer, logger } = ctx;

  function connect(req: http.IncomingMessage, socket: Duplex, head: Buffer): void {
    const entry = registry.asTunnel(socket);
    const target = parseConnectTarget(req.url);
    if (target === undefined) {
      CONNECT_ANSWER.refuse(socket, 400, PROXY_ERROR, CONNECT_NEEDS_AUTHORITY);
      return;
    }
    authorizeTunnel(entry, target, head, CONNECT_ANSWER);
  }

  function authorizeTunnel(entry: Tunnel, target: Target, head: Buffer, answer: TunnelAnswer): void {
    const socket = entry.client;
    authorizer.authorize(target, true).then(
      (outcome) => {
        if (outcome.kind === "deny") answer.refuse(socket, 403, POLICY_ERROR, denialBody(target, outcome));
        else if (outcome.kind === "unreachable") answer.refuse(socket, outcome.status, UPSTREAM_ERROR, unreachableBody(target, outcome));
        else {
          // The opening's record goes out now; a blind tunnel's once its ClientHello was read.
          const record = outcome.record ?? audit.record(target, outcome);
          if (outcome.tunnel !== "https-blind") audit.emit(record);
          if (socket.destroyed) return;
          if (outcome.tunnel === "https-terminated") terminated.intercept(entry, head, target, outcome.address, record, answer);
          else connectUpstream(entry, head, target, outcome, record, answer);
        }
      },
      (err: unknown) => {
        logger.error("proxy connect failed", { host: target.host, ...errorFields(err) });
        answer.refuse(socket, 502, PROXY_ERROR, PROXY_FAILED);
      },
    );
  }

  /**
   * A raw (tcp) or blind https tunnel. The upstream connection is opened first, so an
   * unreachable origin is still a 502/504; a blind one then gets no byte until the
   * workload's first bytes are a ClientHello for the target host (hello-gate.ts).
   */
  function connectUpstream(entry: Tunnel, head: Buffer, t: Target, allowed: Allowed, record: AuditEvent, answer: TunnelAnswer): void {
    const { client } = entry;
    const { address } = allowed;
    const blind = allowed.tunnel === "https-blind";
    // allowHalfOpen: one side finishing its writes must not cut the other direction.
    const upstream = net.connect({ host: address, port: t.port, allowHalfOpen: true });
    entry.grant = grantOf(t, address, allowed.tunnel);
    entry.upstream = upstream;
    upstream.setNoDelay(true);
    let established = false;
    const timer = setTimeout(() => upstream.destroy(new TimeoutError(`connect to ${address}:${t.port} timed out`)), ctx.connectTimeoutMs);
    const abandon = (): void => {
      if (!established) upstream.destroy();
    };
    client.once("close", abandon);

    upstream.once("connect", () => {
      clearTimeout(timer);
      client.off("close", abandon);
      established = true;
      answer.established(client);
      if (!blind) {
        entry.onClose = audit.atClose(record, client);
        relay(head);
        return;
      }
      const gone = (): void => void upstream.destroy();
      client.once("close", gone);
      void readHello(client, head, t.host, ctx.helloTimeoutMs).then((r) => {
        client.off("close", gone);
        if (r.kind === "closed" || client.destroyed || upstream.destroyed) {
          // Gone before a verdict (the workload left, a revocation): the CONNECT was allowed.
          audit.emit(record);
          upstream.destroy();
          return;
        }
        if (r.kind === "refuse") {
          logger.warn("tunnel closed at its first bytes", { host: t.host, port: t.port, reason: r.reason, detail: r.detail });
          audit.audit(t, { kind: "deny", reason: r.reason, rule: allowed.rule, address });
          client.destroy();
          upstream.destroy();
          return;
        }
        audit.emit(record);
        entry.onClose = audit.atClose(record, client);
        relay(r.bytes);
      });
    });
    /** Both ways, `first` (bytes already read from the client) upstream before the rest. */
    const relay = (first: Buffer): void => {
      if (first.length > 0) upstream.write(first);
      splice(client, upstream);
    };
    upstream.once("error", (err: NodeJS.ErrnoException) => {
      clearTimeout(timer);
      if (established) {
        client.destroy(); // before the relay, nothing else tears the client down
        return;
      }
      // The blind tunnel's decision was not audited yet: it was allowed, the network did not deliver.
      if (blind) audit.emit(record);
      const o = unreachable(err);
      logger.warn("upstream unreachable", { host: t.host, port: t.port, address, code: o.code });
      if (!client.destroyed) answer.refuse(client, o.status, UPSTREAM_ERROR, unreachableBody(t, o, address));
    });
  }

  return {
    connect,
    open: (socket, { host, port }, opts) => authorizeTunnel(registry.asTunnel(socket), { ...connectTarget(host, port), ...(opts.via === undefined ? {} : { via: opts.via }) }, opts.head, opts.answer),
  };
}
