// A generation's launch directory on the host: the supervisor's launch configuration (its
// policy, control session, CA, bounds) and its launch-scoped token, readable only by the
// supervisor's uid, and its run directory (its health socket), that uid's only: no host
// user reaches either, and the workload never sees them.
import { chownSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { serializePolicy } from "../../policy/index.js";
import { HEALTH_SOCKET_PATH, LAUNCH_CONFIG_FILE, LAUNCH_DIR, LAUNCH_TOKEN_FILE, PROXY_PORT, type LaunchConfig } from "../../protocol/launch.js";
import type { CaMaterial } from "../../util/x509.js";
import { ProvisionError, type LaunchRequest, type RuntimeRecord } from "../contract.js";
import { launchDirOf, runDirOf } from "./launch-paths.js";
import { transparentProblem } from "./netns.js";

export interface LaunchDirInput {
  launchRoot: string;
  /** The supervisor's uid (and gid): the files' owner. */
  supervisorUid: number;
  /** CAs the supervisor trusts for origins besides the system roots (gateway start --origin-ca). */
  originCaPem: string | undefined;
}

/** Writes the launch directory of `req` and returns its path. */
export function writeLaunchConfig(o: LaunchDirInput, req: LaunchRequest, ca: CaMaterial, proxySubnet: string): string {
  const dir = launchDirOf(o.launchRoot, req.sandboxId, req.generation);
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  mkdirSync(runDirOf(dir), { mode: 0o700 });
  const file = join(dir, LAUNCH_CONFIG_FILE);
  const config: LaunchConfig = {
    sandboxId: req.sandboxId,
    generation: req.generation,
    nonce: req.nonce,
    proxyPort: PROXY_PORT,
    proxySubnet,
    healthSocket: HEALTH_SOCKET_PATH,
    transparent: true,
    policy: JSON.parse(serializePolicy(req.policy.policy)) as unknown,
    policyRevision: req.policy.revision,
  };
  if (req.control) {
    config.control = { url: req.control.url, fingerprint: req.control.fingerprint, tokenPath: `${LAUNCH_DIR}/${LAUNCH_TOKEN_FILE}`, graceMs: req.control.graceMs };
  }
  if (req.network) {
    config.hostAddresses = req.network.hostAddresses;
    if (req.network.resolvers !== null) config.resolvers = req.network.resolvers;
    if (req.network.connections !== undefined) config.connections = req.network.connections;
  }
  // The CA's key reaches the supervisor only (this file is 0400, its uid's).
  config.tls = { caCertPem: ca.certPem, caKeyPem: ca.keyPem, ...(o.originCaPem === undefined ? {} : { originCaPem: o.originCaPem }) };
  writeFileSync(file, JSON.stringify(config, null, 2) + "\n", { mode: 0o400 });
  const files = [file];
  if (req.control) {
    // The launch-scoped token: mounted into the supervisor only, never the workload.
    const tokenFile = join(dir, LAUNCH_TOKEN_FILE);
    writeFileSync(tokenFile, req.control.token + "\n", { mode: 0o400 });
    files.push(tokenFile);
  }
  try {
    const uid = o.supervisorUid;
    chownSync(dir, uid, uid);
    chownSync(runDirOf(dir), uid, uid);
    for (const f of files) chownSync(f, uid, uid);
  } catch (err) {
    throw new ProvisionError(`cannot hand the launch configuration to the supervisor's user (${(err as Error).message}); the gateway must run as root`);
  }
  return dir;
}

/**
 * The transparent path of a launch, read back from both namespaces; null for a launch
 * without it (its launch file, from an older gateway, does not turn it on).
 */
export async function transparentPathProblem(launchRoot: string, l: { sandboxId: string; generation: number }, record: RuntimeRecord): Promise<string | null> {
  let subnet: string | undefined;
  try {
    const config = JSON.parse(readFileSync(join(launchDirOf(launchRoot, l.sandboxId, l.generation), LAUNCH_CONFIG_FILE), "utf8")) as { transparent?: boolean; proxySubnet?: string };
    if (config.transparent !== true) return null;
    subnet = config.proxySubnet;
  } catch (err) {
    return `cannot read the launch file of ${l.sandboxId} generation ${l.generation}: ${(err as Error).message}`;
  }
  const supervisorIp = new URL(record.proxyUrl).hostname;
  if (subnet === undefined) return "the launch file names no sandbox subnet";
  return transparentProblem(record.supervisor.pid, record.workload.pid, { subnet, supervisorIp });
}
