// One monitor per sandbox generation. Arming a generation that is already armed
// is a no-op, arming an older one is refused, arming a newer one replaces the
// older: a duplicate or a stale monitor cannot exist.

import type { Watched } from "../../contract.js";

export type ArmResult = "armed" | "already-armed" | "replaced-older" | "refused-older";

export class MonitorRegistry {
  private readonly byId = new Map<string, Watched>();

  arm(w: Watched): ArmResult {
    const existing = this.byId.get(w.sandboxId);
    if (existing && existing.generation === w.generation) return "already-armed";
    if (existing && existing.generation > w.generation) return "refused-older";
    this.byId.set(w.sandboxId, w);
    return existing ? "replaced-older" : "armed";
  }

  /** Disarm the sandbox's monitor; with `generation`, only if that one is armed. */
  disarm(sandboxId: string, generation?: number): boolean {
    const existing = this.byId.get(sandboxId);
    if (!existing || (generation !== undefined && existing.generation !== generation)) return false;
    return this.byId.delete(sandboxId);
  }

  get(sandboxId: string): Watched | undefined {
    return this.byId.get(sandboxId);
  }

  isCurrent(sandboxId: string, generation: number): boolean {
    return this.byId.get(sandboxId)?.generation === generation;
  }

  all(): Watched[] {
    return [...this.byId.values()];
  }

  get size(): number {
    return this.byId.size;
  }
}
