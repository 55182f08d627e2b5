// FaultProxy in front of a REAL private dockerd: pings pass through, and an events
// long-poll cut by the proxy comes back to EngineClient as a transport failure, promptly,
// while the daemon itself stays healthy. Skipped unless root with dockerd on PATH.
import { existsSync } from "node:fs";
import { request } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { EngineClient } from "../../src/driver/docker/engine/client.js";
import type { StreamEnd } from "../../src/driver/docker/engine/transport.js";
import { PrivateDockerd } from "../support/dockerd.js";
import { FaultProxy } from "../support/fault-proxy.js";

const canRun = process.getuid?.() === 0 && ["/usr/sbin/dockerd", "/usr/bin/dockerd", "/usr/local/bin/dockerd"].some((p) => existsSync(p));

function rawPing(socketPath: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request({ socketPath, path: "/_ping", agent: false }, (res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (c: string) => (body += c));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
      res.on("error", reject);
    });
    req.setTimeout(5000, () => req.destroy(new Error("ping timeout")));
    req.on("error", reject);
    req.end();
  });
}

describe.skipIf(!canRun)("FaultProxy against a real dockerd", () => {
  let d: PrivateDockerd | undefined;
  let proxy: FaultProxy | undefined;
  let client: EngineClient | undefined;

  beforeAll(async () => {
    d = await PrivateDockerd.start({ liveRestore: true, name: "fp" });
    proxy = await FaultProxy.start({ upstreamSocket: d.socketPath });
    client = new EngineClient({ socketPath: proxy.socketPath, timeoutMs: 5000 });
  });

  afterAll(async () => {
    await client?.close();
    await proxy?.close();
    await d?.destroy();
  });

  it("passes GET /_ping through (node:http and EngineClient)", async () => {
    expect(await rawPing(proxy!.socketPath)).toEqual({ status: 200, body: "OK" });
    const r = await client!.ping();
    expect(r.kind).toBe("ok");
  });

  it("cuts a GET /events long-poll: EngineClient ends with kind transport promptly; the daemon keeps answering", async () => {
    let opened!: () => void;
    const open = new Promise<void>((r) => (opened = r));
    const ac = new AbortController();
    const ended = client!.events({ signal: ac.signal, onOpen: () => opened() }, () => undefined);
    const guard = setTimeout(() => ac.abort(), 20_000); // never hang the suite if the cut misses
    try {
      await open;
      expect(proxy!.openRequests().some((l) => /^GET \/v[\d.]+\/events/.test(l))).toBe(true);

      expect(proxy!.cut(/\/events/)).toBe(1);
      const end: StreamEnd = await ended;
      // undici reports a socket closed mid-body as UND_ERR_SOCKET ("other side closed"):
      // the cut ended it, not the guard (that would be "aborted").
      expect(end).toMatchObject({ kind: "transport", code: "UND_ERR_SOCKET" });
      expect(proxy!.openRequests().some((l) => l.includes("/events"))).toBe(false);
    } finally {
      clearTimeout(guard);
    }

    // The daemon was never touched: direct and proxied pings both answer.
    expect(await d!.ping()).toBe(true);
    expect((await client!.ping()).kind).toBe("ok");
    expect(await rawPing(proxy!.socketPath)).toEqual({ status: 200, body: "OK" });
  });

  it("a node:http events long-poll sees a socket error within 100 ms of the cut", async () => {
    let opened!: () => void;
    const open = new Promise<void>((r) => (opened = r));
    let guard: NodeJS.Timeout | undefined;
    const result = new Promise<{ error: Error | undefined }>((resolve) => {
      const req = request({ socketPath: proxy!.socketPath, path: "/events", agent: false }, (res) => {
        res.on("error", (error) => resolve({ error }));
        res.on("end", () => resolve({ error: undefined }));
        res.resume();
        opened(); // dockerd flushes the events headers at once
      });
      req.on("error", (error) => resolve({ error }));
      req.end();
      // Never hang the suite if the cut misses: the guard's error is told apart below.
      guard = setTimeout(() => req.destroy(new Error("guard: nothing 20 s after the cut")), 20_000);
    });
    try {
      await open;
      expect(proxy!.openRequests()).toContain("GET /events HTTP/1.1");
      expect(proxy!.cut(/\/events/)).toBe(1);
      const { error } = await result;
      // The socket error of the cut itself (the request has no timeout of its own).
      expect(error).toBeInstanceOf(Error);
      expect(error?.message).not.toMatch(/^guard/);
      expect((error as NodeJS.ErrnoException).code).toBe("ECONNRESET");
    } finally {
      clearTimeout(guard);
    }
    expect(await d!.ping()).toBe(true);
  });
});
