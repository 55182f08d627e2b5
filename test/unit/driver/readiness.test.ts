// The gateway's health probe of a supervisor: GET /healthz on its Unix socket, read from the
// host's side of the supervisor's run directory (no network path, no Docker). Each way it can
// fail is a failed check whose detail says which; a launch of a gateway from before health moved
// to a socket (no run directory) says so, and fails closed.
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import http from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import type { EngineClient } from "../../../src/driver/docker/engine/client.js";
import { healthSocketOf } from "../../../src/driver/docker/launch-paths.js";
import { healthCheck, type RuntimeProbes } from "../../../src/driver/docker/readiness.js";

const cleanups: (() => void | Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

const launched = { sandboxId: "sbx_00000000000000aa", generation: 3 };

function root(): string {
  const dir = mkdtempSync(join(tmpdir(), "sg-ready-"));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

const probes = (launchRoot: string, healthTimeoutMs = 1000): RuntimeProbes => ({
  engine: undefined as unknown as EngineClient,
  probeCommand: ["true"],
  healthSocket: (id, generation) => healthSocketOf(launchRoot, id, generation),
  healthTimeoutMs,
});

/** A supervisor's health endpoint stand-in at the launch's socket. */
async function serve(launchRoot: string, handler: http.RequestListener): Promise<string[]> {
  const socket = healthSocketOf(launchRoot, launched.sandboxId, launched.generation);
  mkdirSync(join(socket, ".."), { recursive: true });
  const paths: string[] = [];
  const srv = http.createServer((req, res) => {
    paths.push(`${req.method ?? ""} ${req.url ?? ""}`);
    handler(req, res);
  });
  await new Promise<void>((r) => srv.listen(socket, r));
  cleanups.push(
    () =>
      new Promise<void>((r) => {
        srv.closeAllConnections();
        srv.close(() => r());
      }),
  );
  return paths;
}

describe("the supervisor health check", () => {
  it("200 on the launch's socket: ok, having asked GET /healthz", async () => {
    const dir = root();
    const asked = await serve(dir, (_req, res) => res.end('{"ok":true}'));
    expect(await healthCheck(probes(dir), launched)).toEqual({ name: "supervisor health", ok: true });
    expect(asked).toEqual(["GET /healthz"]);
  });

  it("another status fails with the status and the start of the body", async () => {
    const dir = root();
    await serve(dir, (_req, res) => res.writeHead(503).end('{"ok":false,"policy":"missing"}'));
    expect(await healthCheck(probes(dir), launched)).toEqual({ name: "supervisor health", ok: false, detail: 'health endpoint answered 503: {"ok":false,"policy":"missing"}' });
  });

  it("no socket in the run directory (the supervisor is not listening): unreachable, naming the path", async () => {
    const dir = root();
    const socket = healthSocketOf(dir, launched.sandboxId, launched.generation);
    mkdirSync(join(socket, ".."), { recursive: true });
    expect(await healthCheck(probes(dir), launched)).toEqual({ name: "supervisor health", ok: false, detail: expect.stringMatching(new RegExp(`^health endpoint unreachable at ${socket}: .*ENOENT`)) as string });
  });

  it("no run directory at all (launched by an older gateway, health on TCP): fails closed saying so", async () => {
    const dir = root();
    mkdirSync(join(dir, `${launched.sandboxId}-g${launched.generation}`));
    expect(await healthCheck(probes(dir), launched)).toEqual({
      name: "supervisor health",
      ok: false,
      detail: `no health socket directory ${join(dir, `${launched.sandboxId}-g3`, "run")}: the supervisor was launched by an older gateway; restart the sandbox`,
    });
  });

  it("an answer that does not come in time, or does not end within its bound, fails", async () => {
    const slow = root();
    await serve(slow, () => undefined);
    expect(await healthCheck(probes(slow, 200), launched)).toMatchObject({ ok: false, detail: expect.stringMatching(/^health endpoint unreachable at .*abort/i) as string });

    const endless = root();
    await serve(endless, (_req, res) => {
      res.writeHead(200);
      res.write("x".repeat(64 * 1024));
    });
    expect(await healthCheck(probes(endless, 5000), launched)).toEqual({ name: "supervisor health", ok: false, detail: "health endpoint's answer was cut (over 4096 bytes, or not within 5000 ms)" });
  });
});
