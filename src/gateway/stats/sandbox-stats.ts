// `sandbox stats`: what a Ready sandbox uses now. CPU, memory and pids come from the
// runtime (one sample of the workload container: ComputeDriver.stats), the workspace
// from the read model, egress from the current generation's audit trail. Reads only.

import type { ComputeDriver, WorkloadStats } from "../../driver/contract.js";
import type { SandboxRecord, Store } from "../../store/contract.js";
import { Limiter } from "../../util/limiter.js";
import { ApiError } from "../errors.js";
import type { Page, SandboxReadModel } from "../sandboxes/read-model.js";
import type { StatsView } from "../../api/responses.js";
import { errorMessage } from "../../util/error-message.js";

/** The API's shapes (src/api/responses.ts), named here for the code that builds them. */
export type { StatsView };

/**
 * Runtime samples taken at once, all requests together: Docker answers each after about
 * a second (it samples CPU twice), so a page of many sandboxes waits its turn rather than
 * opening as many calls on the daemon.
 */
export const STATS_CONCURRENCY = 16;

export class SandboxStats {
  readonly #limiter = new Limiter(STATS_CONCURRENCY);

  constructor(private readonly d: { store: Store; read: SandboxReadModel; driver: ComputeDriver }) {}

  /** One sandbox: 409 unless Ready, 503 when the runtime cannot measure it. */
  async one(nameOrId: string): Promise<StatsView> {
    const s = await this.d.read.driven(nameOrId);
    const record = s.phase === "Ready" && s.runtime?.generation === s.generation ? s.runtime : null;
    if (record === null) throw new ApiError("not_allowed", `sandbox "${s.name}" is ${s.phase}: stats are measured only while it is Ready`);
    const v = await this.view(s);
    if (v.error !== null) throw new ApiError("unavailable", `cannot measure sandbox "${s.name}": ${v.error}`);
    return v;
  }

  /** A page of the Ready sandboxes in name order, one row each; a row whose sample failed says why. */
  async page(q: { after?: string; limit: number }): Promise<Page<StatsView>> {
    const p = await this.d.read.listPage({ after: q.after, limit: q.limit, phase: "Ready" });
    return { sandboxes: await Promise.all(p.sandboxes.map((s) => this.view(s))), next: p.next };
  }

  private async view(s: SandboxRecord): Promise<StatsView> {
    const time = new Date().toISOString();
    let runtime: WorkloadStats | null = null;
    let error: string | null = null;
    const record = s.runtime?.generation === s.generation ? s.runtime : null;
    const { driver } = this.d;
    if (record === null) error = "no runtime record of this generation";
    else if (!driver.stats) error = `the ${driver.kind} runtime gives no resource figures`;
    else {
      try {
        const stats = driver.stats.bind(driver);
        runtime = await this.#limiter.run(() => stats(record));
      } catch (err) {
        error = errorMessage(err);
      }
    }
    return {
      id: s.id,
      name: s.name,
      phase: s.phase,
      generation: s.generation,
      time,
      cpuPercent: runtime?.cpuPercent ?? null,
      memory: runtime?.memory ?? null,
      pids: runtime?.pids ?? null,
      disk: this.d.read.diskOf(s),
      egress: await this.d.store.egressTotals(s.id, s.generation),
      dropped: runtime?.dropped ?? null,
      error,
    };
  }
}
