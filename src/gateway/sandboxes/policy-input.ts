// Turning a user's policy input into a Policy, and the rules on its fixed
// sections that the Docker runtime must be able to honour. Pure.

import { defaultPolicy, parsePolicyYaml, policyFromObject, type Policy } from "../../policy/index.js";
import { ApiError } from "../errors.js";

/** YAML text or an object; default: deny all egress. Throws ApiError naming every problem. */
export function parsePolicyInput(input: string | Record<string, unknown> | undefined): Policy {
  if (input === undefined) return defaultPolicy();
  const parsed = typeof input === "string" ? parsePolicyYaml(input) : policyFromObject(input);
  if (!parsed.ok) throw new ApiError("invalid_request", `invalid policy: ${parsed.errors.join("; ")}`);
  return parsed.policy;
}

/**
 * The filesystem section maps to mounts: the root filesystem is read-only,
 * /sandbox (the workspace) and /tmp are writable, each other readWrite path
 * gets a tmpfs. A readOnly path inside a writable one cannot be honoured, and
 * the process never runs as root.
 */
export function checkFilesystemPolicy(policy: Policy): string | null {
  const writable = ["/sandbox", "/tmp", ...policy.filesystem.readWrite];
  for (const [i, p] of policy.filesystem.readOnly.entries()) {
    const inside = writable.find((w) => p === w || p.startsWith(`${w}/`));
    if (inside) return `filesystem.readOnly[${i}]: ${JSON.stringify(p)} is inside the writable ${inside}`;
  }
  for (const [i, p] of policy.filesystem.readWrite.entries()) {
    if (p === "/" || p === "/proc" || p.startsWith("/proc/") || p === "/dev" || p.startsWith("/dev/") || p === "/sys" || p.startsWith("/sys/")) {
      return `filesystem.readWrite[${i}]: ${JSON.stringify(p)} cannot be made writable`;
    }
  }
  const uid = policy.process.user?.split(":")[0];
  if (uid === "0") return "process.user: the workload never runs as root (uid 0)";
  return null;
}
