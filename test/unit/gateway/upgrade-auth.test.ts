// The WebSocket upgrade dispatcher (src/gateway/api/upgrades.ts) with the real exec and
// port-forward handlers over a real HTTP server, their services faked: the one token check
// runs before any handler on every upgrade path. An upgrade without the token, or with a
// wrong one, is refused with 401 and reaches no handler (no exec started, no sandbox looked
// up, the connection not moved to the authenticated pool); a full pool is a 503, again
// before any handler; an unknown path is a 404 once authenticated.

import http from "node:http";
import type { AddressInfo } from "node:net";
import { pino } from "pino";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { ApiError } from "../../../src/gateway/errors.js";
import { execUpgrades } from "../../../src/gateway/api/exec-ws.js";
import { portForwardUpgrades } from "../../../src/gateway/api/port-forward-ws.js";
import { attachUpgrades } from "../../../src/gateway/api/upgrades.js";
import { upgradeAnswer } from "../../support/ws-upgrade.js";

const TOKEN = "the-right-token";
const calls = { starts: 0, reads: 0, pool: 0 };
let poolFull = false;
let server: http.Server;
let base: string;
let closeUpgrades: () => void;

beforeAll(async () => {
  const log = pino({ level: "silent" });
  const execs = {
    start: () => {
      calls.starts++;
      return Promise.reject(new ApiError("not_found", "no sandbox (fake)"));
    },
  };
  const read = {
    driven: async () => {
      calls.reads++;
      throw new ApiError("not_found", "no sandbox (fake)");
    },
    find: async () => null,
  };
  server = http.createServer((_req, res) => res.writeHead(404).end());
  const upgrades = attachUpgrades(
    server,
    {
      token: TOKEN,
      log,
      authenticated: () => {
        calls.pool++;
        return poolFull ? { ok: false, reason: "the authenticated pool is full (fake)" } : { ok: true };
      },
    },
    [execUpgrades({ execs, log }), portForwardUpgrades({ execs, read, log })],
  );
  closeUpgrades = () => upgrades.close();
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  base = `ws://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  closeUpgrades();
  await new Promise((r) => server.close(r));
});
beforeEach(() => {
  calls.starts = calls.reads = calls.pool = 0;
  poolFull = false;
});

/** The refusal of an upgrade: its status and JSON body (a 101 fails the test). */
async function refusal(path: string, authorization?: string): Promise<{ status: number; body: { error: { code: string; message: string } } }> {
  const r = await upgradeAnswer<{ error: { code: string; message: string } }>(`${base}${path}`, authorization === undefined ? {} : { authorization });
  if (r.body === null) throw new Error(`${path} was upgraded`);
  return { status: r.status, body: r.body };
}

const PATHS = { exec: "/v1/sandboxes/s1/exec?cmd=true", portForward: "/v1/sandboxes/s1/port-forward?port=80" };
const BAD_AUTH: [string, string | undefined][] = [
  ["no authorization header", undefined],
  ["a wrong token", "Bearer not-the-token"],
  ["the right token without Bearer", TOKEN],
  ["an empty bearer", "Bearer "],
];

describe("one auth hook before every upgrade handler", () => {
  for (const [route, path] of Object.entries(PATHS)) {
    for (const [what, authorization] of BAD_AUTH) {
      it(`${route}: ${what} is refused with 401 and no handler runs`, async () => {
        const r = await refusal(path, authorization);
        expect(r.status).toBe(401);
        expect(r.body.error).toEqual({ code: "unauthorized", message: "missing or wrong bearer token" });
        expect(calls).toEqual({ starts: 0, reads: 0, pool: 0 });
      });
    }

    it(`${route}: a full authenticated pool is refused with 503 before the handler`, async () => {
      poolFull = true;
      const r = await refusal(path, `Bearer ${TOKEN}`);
      expect(r.status).toBe(503);
      expect(r.body.error.message).toBe("the authenticated pool is full (fake)");
      expect(calls).toEqual({ starts: 0, reads: 0, pool: 1 });
    });
  }

  it("the right token reaches each route's own handler, and only it", async () => {
    expect((await refusal(PATHS.exec, `Bearer ${TOKEN}`)).body.error.message).toBe("no sandbox (fake)");
    expect(calls).toEqual({ starts: 1, reads: 0, pool: 1 });
    expect((await refusal(PATHS.portForward, `Bearer ${TOKEN}`)).body.error.message).toBe("no sandbox (fake)");
    expect(calls).toEqual({ starts: 1, reads: 1, pool: 2 });
  });

  it("an unknown upgrade path: 401 without the token, 404 with it; no handler either way", async () => {
    expect((await refusal("/v1/sandboxes/s1/undocumented")).status).toBe(401);
    const r = await refusal("/v1/sandboxes/s1/undocumented", `Bearer ${TOKEN}`);
    expect(r.status).toBe(404);
    expect(r.body.error).toEqual({ code: "not_found", message: "no route for upgrade /v1/sandboxes/s1/undocumented" });
    expect(calls.starts + calls.reads).toBe(0);
  });
});
