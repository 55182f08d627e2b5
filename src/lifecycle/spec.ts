// What a user asks for when creating a sandbox, and the rules on names. Pure.

export interface Resources {
  /** Memory limit in MiB. */
  memoryMb: number;
  /** CPU limit in cores (fractions allowed). */
  cpus: number;
  /** Maximum number of processes. */
  pids: number;
}

export interface SandboxSpec {
  /** Workload image; undefined means the locally built default workload image. */
  image?: string;
  /** The workload's main process; undefined means an idle process that keeps the sandbox up. */
  command?: string[];
  env: Record<string, string>;
  resources: Resources;
  /**
   * Size of the workspace (/sandbox) in bytes, enforced by the kernel. Undefined only
   * for sandboxes created before workspaces had a size: they keep their unlimited volume.
   */
  diskBytes?: number;
  /** The workload's working directory (absolute), and exec's default; undefined: /sandbox. */
  workdir?: string;
  /** Each generation is stopped this long after its launch (reason TtlExpired). */
  ttlSeconds?: number;
  /** Stopped after no exec, connect or egress for this long (reason IdleTimeout). */
  idleStopSeconds?: number;
}

export const DEFAULT_RESOURCES: Resources = { memoryMb: 512, cpus: 1, pids: 256 };

export const NAME_RULE = "1-63 characters: lowercase letters, digits and '-', starting and ending with a letter or digit";
const NAME_RE = /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/;

/** Returns null when valid, else a message naming the problem (a long name shown cut, with its length). */
export function checkSandboxName(name: string): string | null {
  if (NAME_RE.test(name)) return null;
  const shown = name.length > 70 ? `${JSON.stringify(name.slice(0, 40))}… (${name.length} characters)` : JSON.stringify(name);
  return `invalid sandbox name ${shown}: ${NAME_RULE}`;
}

/** What sandbox ids look like (sbx_ and 16 hex digits). */
export const ID_RE = /^sbx_[0-9a-f]{16}$/;
