// Launch configuration written by the gateway into the companion container.
// Anything wrong with it leaves the supervisor without a policy (deny all);
// it never falls back to allowing.
import { readFile } from "node:fs/promises";
import { policyFromObject } from "../policy/index.js";
import type { LoadedPolicy } from "./policy-holder.js";
import { normalizeFingerprint } from "../protocol/wire.js";

export const DEFAULT_LAUNCH_CONFIG_PATH = "/run/sandgate/launch.json";
export const DEFAULT_PROXY_PORT = 3128;
export const DEFAULT_HEALTH_PORT = 9901;

/** How to reach and authenticate to the gateway's supervisor endpoint. */
export interface ControlSettings {
  /** wss://<egress bridge gateway IP>:<port>/v1/supervisor */
  url: string;
  /** Canonical "sha256:<hex>" pin of the gateway's endpoint certificate. */
  fingerprint: string;
  /** File holding the launch-scoped JWT (mounted only into this container). */
  tokenPath: string;
  /** Session down longer than this → deny all egress. */
  graceMs: number;
}

export const DEFAULT_CONTROL_GRACE_MS = 15_000;

export interface LaunchSettings {
  sandboxId: string | null;
  generation: number | null;
  /** Launch secret for the later control session; never logged. */
  nonce: string | null;
  proxyPort: number;
  healthPort: number;
  /** Null: no control session configured (standalone; the launch policy applies as is). */
  control: ControlSettings | null;
}

export interface LaunchLoadResult {
  settings: LaunchSettings;
  /** Undefined whenever anything in the config or policy was invalid. */
  policy: LoadedPolicy | undefined;
  errors: string[];
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function port(v: unknown, fallback: number, name: string, errors: string[]): number {
  if (v === undefined) return fallback;
  if (typeof v === "number" && Number.isInteger(v) && v >= 1 && v <= 65535) return v;
  errors.push(`${name} must be an integer port (1-65535)`);
  return fallback;
}

function parseControl(raw: unknown, errors: string[]): ControlSettings | null {
  if (raw === undefined) return null;
  if (!isRecord(raw)) {
    errors.push("control must be an object");
    return null;
  }
  const before = errors.length;
  let url = "";
  try {
    const u = new URL(typeof raw.url === "string" ? raw.url : "");
    if (u.protocol !== "wss:") throw new Error("not wss");
    url = u.toString();
  } catch {
    errors.push("control.url must be a wss:// URL");
  }
  const fingerprint = typeof raw.fingerprint === "string" ? normalizeFingerprint(raw.fingerprint) : null;
  if (fingerprint === null) errors.push("control.fingerprint must be sha256:<64 hex digits>");
  const tokenPath = typeof raw.tokenPath === "string" && raw.tokenPath.startsWith("/") ? raw.tokenPath : "";
  if (tokenPath === "") errors.push("control.tokenPath must be an absolute path");
  let graceMs = DEFAULT_CONTROL_GRACE_MS;
  if (raw.graceMs !== undefined) {
    if (typeof raw.graceMs === "number" && Number.isInteger(raw.graceMs) && raw.graceMs >= 100 && raw.graceMs <= 3_600_000) graceMs = raw.graceMs;
    else errors.push("control.graceMs must be an integer between 100 and 3600000");
  }
  if (errors.length > before || fingerprint === null) return null;
  return { url, fingerprint, tokenPath, graceMs };
}

export function parseLaunchConfig(raw: unknown): LaunchLoadResult {
  const errors: string[] = [];
  const settings: LaunchSettings = {
    sandboxId: null,
    generation: null,
    nonce: null,
    proxyPort: DEFAULT_PROXY_PORT,
    healthPort: DEFAULT_HEALTH_PORT,
    control: null,
  };
  if (!isRecord(raw)) return { settings, policy: undefined, errors: ["launch config must be a JSON object"] };

  if (typeof raw.sandboxId === "string" && raw.sandboxId !== "") settings.sandboxId = raw.sandboxId;
  else errors.push("sandboxId must be a non-empty string");
  if (typeof raw.generation === "number" && Number.isSafeInteger(raw.generation) && raw.generation >= 0) settings.generation = raw.generation;
  else errors.push("generation must be a non-negative integer");
  if (typeof raw.nonce === "string" && raw.nonce !== "") settings.nonce = raw.nonce;
  else errors.push("nonce must be a non-empty string");
  settings.proxyPort = port(raw.proxyPort, DEFAULT_PROXY_PORT, "proxyPort", errors);
  settings.healthPort = port(raw.healthPort, DEFAULT_HEALTH_PORT, "healthPort", errors);
  if (settings.proxyPort === settings.healthPort) errors.push("proxyPort and healthPort must differ");
  settings.control = parseControl(raw.control, errors);

  const revision = raw.policyRevision;
  if (!(typeof revision === "number" && Number.isSafeInteger(revision) && revision >= 0)) {
    errors.push("policyRevision must be a non-negative integer");
  }
  let policy: LoadedPolicy | undefined;
  if (raw.policy === undefined) {
    errors.push("policy is missing");
  } else {
    const parsed = policyFromObject(raw.policy);
    if (!parsed.ok) errors.push(...parsed.errors.map((e) => `policy: ${e}`));
    else if (typeof revision === "number") policy = { policy: parsed.policy, revision };
  }
  return { settings, policy: errors.length === 0 ? policy : undefined, errors };
}

export async function readLaunchConfig(path: string): Promise<LaunchLoadResult> {
  let text: string;
  try {
    text = await readFile(path, "utf8");
  } catch (err) {
    return { ...parseLaunchConfig(undefined), errors: [`cannot read ${path}: ${(err as Error).message}`] };
  }
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (err) {
    return { ...parseLaunchConfig(undefined), errors: [`${path} is not valid JSON: ${(err as Error).message}`] };
  }
  return parseLaunchConfig(raw);
}
