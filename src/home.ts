// Where the gateway keeps its state: the database, the API and approver tokens and
// the address file the CLI reads to find a running gateway.
//
// A contract of its own, not the gateway's: the gateway writes the home, the CLI and the
// SDK read it to find the gateway, and the Docker driver reads the gateway's id here
// (ensureGatewayId: the id it labels the gateway's Docker objects with, kept in the home so
// it survives restarts). Inside src/gateway it made the driver and the SDK import the
// gateway (a folder cycle store → driver → gateway → store). Pure: node's own modules only.

import { randomBytes } from "node:crypto";
import { chmodSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { homedir } from "node:os";
import { join, resolve } from "node:path";
import { writeSecretFileOnce } from "./util/secret-file.js";

/** The port `--port` (a TCP listener with TLS) is documented with. */
export const DEFAULT_PORT = 7420;

export interface HomePaths {
  dir: string;
  db: string;
  /** The API's Unix socket: the CLI, SDK and MCP reach the gateway here by default. */
  socket: string;
  /** The TLS identity of the API's TCP listeners (`--listen tcp://…`); clients pin the certificate. */
  apiKey: string;
  apiCert: string;
  token: string;
  /**
   * The approver token: approving or rejecting a policy proposal needs it besides the API
   * token. Only `sandgate policy approve|reject` reads it; an agent's client (the MCP
   * server) is given the API token only (docs/security.md, *Policy proposals*).
   */
  approverToken: string;
  address: string;
  log: string;
}

export function resolveHome(explicit?: string, env: NodeJS.ProcessEnv = process.env): HomePaths {
  const dir = resolve(explicit ?? env.SANDGATE_HOME ?? join(homedir(), ".sandgate"));
  return {
    dir,
    db: join(dir, "state.db"),
    socket: join(dir, "api.sock"),
    apiKey: join(dir, "api.key"),
    apiCert: join(dir, "api-cert.pem"),
    token: join(dir, "token"),
    approverToken: join(dir, "approver-token"),
    address: join(dir, "gateway.json"),
    log: join(dir, "gateway.log"),
  };
}

export function ensureHomeDir(paths: HomePaths): void {
  mkdirSync(paths.dir, { recursive: true, mode: 0o700 });
  chmodSync(paths.dir, 0o700);
}

/** The API token: generated once, readable only by its owner. */
export function ensureToken(paths: HomePaths): string {
  return ensureSecretFile(paths.token);
}

/** The approver token (policy approve and reject): generated once, readable only by its owner. */
export function ensureApproverToken(paths: HomePaths): string {
  return ensureSecretFile(paths.approverToken);
}

function ensureSecretFile(path: string): string {
  return writeSecretFileOnce(path, () => randomBytes(32).toString("base64url") + "\n").toString("utf8").trim();
}

export interface GatewayAddress {
  /** Where clients of this home reach the gateway: `unix://<home>/api.sock`. */
  url: string;
  /** Every listener, as client URLs: the socket first, then `unix://` and `https://` ones of `--listen`. */
  listeners: string[];
  pid: number;
  startedAt: string;
  version: string;
}

export function writeAddress(paths: HomePaths, addr: GatewayAddress): void {
  writeFileSync(paths.address, JSON.stringify(addr, null, 2) + "\n", { mode: 0o600 });
}

/** The running gateway's address, or null when the file is absent or malformed. */
export function readAddress(paths: HomePaths): GatewayAddress | null {
  return inspectAddress(paths).address;
}

/**
 * The address file, checked: `problem` says what is wrong with a file that is
 * there but unusable (not JSON, no http URL, no valid pid), and what to do.
 */
export function inspectAddress(paths: HomePaths): { address: GatewayAddress | null; problem: string | null } {
  let text: string;
  try {
    text = readFileSync(paths.address, "utf8");
  } catch {
    return { address: null, problem: null };
  }
  const bad = (why: string) => ({ address: null, problem: `${paths.address} is malformed (${why}); remove it, the gateway writes it again when it starts` });
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    return bad("not JSON");
  }
  if (typeof v !== "object" || v === null) return bad("not a JSON object");
  const a = v as Record<string, unknown>;
  if (typeof a.url === "string" && /^http:\/\//.test(a.url)) {
    return { address: null, problem: `${paths.address} was written by an older gateway (its API was plain HTTP at ${a.url}); restart it: sandgate gateway stop, then sandgate gateway start` };
  }
  if (typeof a.url !== "string" || !isClientUrl(a.url)) return bad(`"url" must be a unix:// or https:// address, got ${JSON.stringify(a.url)}`);
  const listeners = Array.isArray(a.listeners) ? a.listeners.filter((l): l is string => typeof l === "string" && isClientUrl(l)) : [a.url];
  if (typeof a.pid !== "number" || !Number.isSafeInteger(a.pid) || a.pid < 1 || a.pid > 4_194_304) return bad(`"pid" must be a process id from 1 to 4194304, got ${JSON.stringify(a.pid)}`);
  return { address: { url: a.url, listeners, pid: a.pid, startedAt: typeof a.startedAt === "string" ? a.startedAt : "", version: typeof a.version === "string" ? a.version : "" }, problem: null };
}

/** A URL a client may use: unix:///ABSOLUTE/PATH or https://HOST[:PORT] (never plain http: it would carry the token in the clear). */
export function isClientUrl(s: string): boolean {
  if (s.startsWith("unix://")) return s.startsWith("unix:///") && !/[\0-\x1f]/.test(s);
  try {
    const u = new URL(s);
    return u.protocol === "https:" && u.host !== "" && (u.pathname === "/" || u.pathname === "") && u.search === "" && u.username === "" && u.password === "";
  } catch {
    return false;
  }
}

/** Reads or creates the gateway's id in its home (stable across restarts). */
export function ensureGatewayId(homeDir: string): string {
  mkdirSync(homeDir, { recursive: true });
  return writeSecretFileOnce(join(homeDir, "gateway-id"), () => randomBytes(6).toString("hex") + "\n").toString("utf8").trim();
}
