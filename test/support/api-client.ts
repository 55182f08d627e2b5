// Tests' own raw client of the gateway's API, over its Unix socket (the API listens on
// <home>/api.sock; fetch cannot reach a socket, so undici's fetch with a dispatcher that
// dials it), and WebSocket URLs for it. A test that wants the CLI or the SDK uses those.
import { mkdtempSync, rmSync } from "node:fs";
import type { Server } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Agent, fetch as undiciFetch, type RequestInit as UndiciRequestInit, type Response as UndiciResponse } from "undici";

/**
 * One agent per socket, without keep-alive (pipelining 0): a gateway restarted on the same
 * home listens on a new socket at the same path, and a kept connection would be the old one's.
 */
const agents = new Map<string, Agent>();

function agentFor(socketPath: string): Agent {
  let agent = agents.get(socketPath);
  if (!agent) {
    agent = new Agent({ connect: { socketPath }, pipelining: 0 });
    agents.set(socketPath, agent);
  }
  return agent;
}

/** The socket path of a `unix://PATH` URL. */
export function socketOf(url: string): string {
  if (!url.startsWith("unix://")) throw new Error(`not a unix:// URL: ${url}`);
  return url.slice("unix://".length);
}

/** fetch `path` ("/v1/...") from the gateway at `url` (unix:///…/api.sock). */
export function apiFetch(url: string, path: string, init: UndiciRequestInit = {}): Promise<UndiciResponse> {
  return undiciFetch(`http://sandgate${path}`, { ...init, dispatcher: agentFor(socketOf(url)) });
}

/** The ws URL of `path` on the gateway at `url`. */
export function wsUrl(url: string, path: string): string {
  return `ws+unix://${socketOf(url)}:${path}`;
}

/**
 * Listen with `server` (a stand-in gateway) on a socket in a new 0700 directory, as a
 * gateway listens in its home; returns its unix:// URL. The directory goes when the server closes.
 */
export async function listenOnSocket(server: Server): Promise<string> {
  const dir = mkdtempSync(join(tmpdir(), "sg-sock-"));
  const path = join(dir, "api.sock");
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(path, () => resolve());
  });
  server.once("close", () => rmSync(dir, { recursive: true, force: true }));
  return `unix://${path}`;
}
