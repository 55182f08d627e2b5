// The bound on what Docker keeps of a container's output: the json-file driver, rotated
// at `maxBytes` per file, `files` files kept, so at most maxBytes × files per container
// (older lines go first). Set on every workload and supervisor container at create
// (`gateway start --container-log-size/--container-log-files`); the same total bounds
// what the gateway keeps of an ended generation (log-archive.ts). Pure.


export interface ContainerLogBound {
  /** Bytes per log file before Docker rotates it. */
  maxBytes: number;
  /** Files kept, the one being written included. */
  files: number;
}

export const DEFAULT_CONTAINER_LOG: ContainerLogBound = { maxBytes: 10 * 1024 * 1024, files: 3 };

/** What a user may set. */
export const CONTAINER_LOG_LIMITS = { maxBytes: { min: 64 * 1024, max: 1024 ** 3 }, files: { min: 1, max: 100 } } as const;

/** HostConfig.LogConfig of a sandbox container. */
export function logConfig(b: ContainerLogBound): { Type: "json-file"; Config: Record<string, string> } {
  // Plain bytes: Docker reads a number without a unit as bytes.
  return { Type: "json-file", Config: { "max-size": String(b.maxBytes), "max-file": String(b.files) } };
}

/** The most Docker keeps of one container's output. */
export const keptBytes = (b: ContainerLogBound): number => b.maxBytes * b.files;
