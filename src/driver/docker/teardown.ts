// Removing a sandbox's Docker objects, found by their labels whatever step made them: a
// generation's containers (every older one's too: a generation never outlives its
// successor), their output kept first, and on delete its networks and volumes. A 404 is
// the goal reached (removed concurrently, or auto-removed), never a failure.
import { existsSync, readdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import type { EngineClient } from "./engine/client.js";
import { must } from "./engine/result.js";
import type { ContainerLogs } from "./logs.js";
import { LABEL, labelFilter } from "./objects.js";

type Listed = { Id: string; Labels: Record<string, string> | null; State: string };

export class SandboxTeardown {
  constructor(
    private readonly engine: EngineClient,
    private readonly gatewayId: string,
    private readonly launchRoot: string,
    private readonly containerLogs: ContainerLogs,
  ) {}

  /** This generation's containers and every older one's, their output kept; their launch files. */
  async stop(sandboxId: string, generation: number): Promise<void> {
    const upTo = (c: { Labels: Record<string, string> | null }): boolean => Number(c.Labels?.[LABEL.generation] ?? "0") <= generation;
    await this.removeContainers({ [LABEL.sandbox]: sandboxId }, upTo, true);
    this.removeLaunchDirs(sandboxId, generation);
  }

  /** Every container, network and volume of the sandbox, and its launch files. */
  async remove(sandboxId: string): Promise<void> {
    const filter = labelFilter({ [LABEL.gateway]: this.gatewayId, [LABEL.sandbox]: sandboxId });
    await this.removeContainers({ [LABEL.sandbox]: sandboxId });
    for (const n of must("list networks", await this.engine.listNetworks({ filters: filter }))) {
      const r = await this.engine.removeNetwork(n.Id);
      if (!(r.kind === "docker" && r.status === 404)) must(`remove network ${n.Name}`, r);
    }
    const vols = must("list volumes", await this.engine.listVolumes({ filters: filter }));
    for (const v of vols.Volumes ?? []) {
      const r = await this.engine.removeVolume(v.Name, true);
      if (!(r.kind === "docker" && r.status === 404)) must(`remove volume ${v.Name}`, r);
    }
    this.removeLaunchDirs(sandboxId);
  }

  private async listOwned(labels: Record<string, string>): Promise<Listed[]> {
    return must("list containers", await this.engine.listContainers({ all: true, filters: labelFilter({ [LABEL.gateway]: this.gatewayId, ...labels }) }));
  }

  /**
   * Remove the sandbox's containers that `which` selects. `keepLogs`: each that ran is killed
   * first (the workload first; a forced remove killed them too), its output copied into the
   * log archive, then removed.
   */
  private async removeContainers(labels: Record<string, string>, which: (c: { Labels: Record<string, string> | null }) => boolean = () => true, keepLogs = false): Promise<void> {
    const found = (await this.listOwned(labels)).filter(which);
    if (keepLogs) await this.keepLogsOf(found);
    for (const c of found) {
      const r = await this.engine.removeContainer(c.Id, { force: true, volumes: false });
      if (!(r.kind === "docker" && r.status === 404)) must(`remove container ${c.Id.slice(0, 12)}`, r);
    }
  }

  /** Stop the containers that run (workload first) and copy the output of each that ran, before they are removed. */
  private async keepLogsOf(found: Listed[]): Promise<void> {
    const workloadFirst = [...found].sort((a, b) => Number(b.Labels?.[LABEL.role] === "workload") - Number(a.Labels?.[LABEL.role] === "workload"));
    for (const c of workloadFirst) {
      if (c.State !== "running" && c.State !== "restarting") continue;
      const r = await this.engine.killContainer(c.Id, "SIGKILL");
      // 404: gone already; 409: not running (any more) or paused; either way the copy below is complete.
      if (!(r.kind === "docker" && (r.status === 404 || r.status === 409))) must(`kill container ${c.Id.slice(0, 12)}`, r);
    }
    for (const c of workloadFirst) {
      const role = c.Labels?.[LABEL.role];
      const sandboxId = c.Labels?.[LABEL.sandbox];
      const generation = Number(c.Labels?.[LABEL.generation]);
      // A container that never started has no output.
      if (c.State === "created" || (role !== "workload" && role !== "supervisor") || !sandboxId || !Number.isSafeInteger(generation)) continue;
      await this.containerLogs.keep(c, sandboxId, generation, role);
    }
  }

  /** The launch files of the sandbox's generations up to `upTo` (all of them by default). */
  private removeLaunchDirs(sandboxId: string, upTo = Infinity): void {
    if (!existsSync(this.launchRoot)) return;
    for (const d of readdirSync(this.launchRoot)) {
      const m = /^(.+)-g(\d+)$/.exec(d);
      if (m?.[1] === sandboxId && Number(m[2]) <= upTo) rmSync(join(this.launchRoot, d), { recursive: true, force: true });
    }
  }
}
