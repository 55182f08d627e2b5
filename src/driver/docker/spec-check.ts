// What a create can learn from the daemon before anything is stored (driver.checkSpec): an
// image it does not have, more CPUs than its host has, a workspace larger than the filesystem
// workspaces are kept on. A daemon that does not answer in time leaves the check to
// provisioning (null), never refuses.
import { formatBytes } from "../../lifecycle/disk-size.js";
import type { SandboxSpec } from "../../lifecycle/spec.js";
import type { EngineClient } from "./engine/client.js";
import type { WorkspaceDisks } from "./workspace-disk.js";

/** How long a create waits for the daemon to answer its checks (an image, the host's CPUs). */
const CHECK_TIMEOUT_MS = 5000;

export async function specProblem(engine: EngineClient, workspaces: WorkspaceDisks, spec: SandboxSpec): Promise<string | null> {
  const [image, info] = await Promise.all([spec.image === undefined ? null : engine.inspectImage(spec.image, { timeoutMs: CHECK_TIMEOUT_MS }), engine.info({ timeoutMs: CHECK_TIMEOUT_MS })]);
  if (image !== null && image.kind === "docker" && image.status === 404) {
    return `image: no such image ${JSON.stringify(spec.image)} on the Docker daemon (no registry is used: build or import it locally, e.g. docker import)`;
  }
  const cpus = spec.resources.cpus;
  if (info.kind === "ok" && cpus !== undefined && cpus > info.body.NCPU) return `cpus: ${cpus} is more than the Docker host has: from 0.01 to ${info.body.NCPU}`;
  const fsBytes = spec.diskBytes === undefined ? null : workspaces.filesystemBytes();
  if (fsBytes !== null && spec.diskBytes! > fsBytes) {
    return `disk: ${formatBytes(spec.diskBytes!)} is more than the filesystem of the workspaces (${workspaces.root}, ${formatBytes(fsBytes)}) can hold`;
  }
  return null;
}
