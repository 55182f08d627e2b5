// The API's JSON shapes of stored records (their schemas: src/api/responses.ts).

import { LIVE_PHASES, describeReason } from "../../lifecycle/phases.js";
import type { EventRecord, SandboxRecord, SandboxSummary } from "../../store/contract.js";
import type { BoundaryHealth } from "../control/boundary.js";
import type { DiskView, EventView, SandboxSummaryView, SandboxView } from "../../api/responses.js";

/**
 * What every view of a sandbox starts with (who it is, its phase and why), and `more`.
 * Object.assign, not `{ ...head, more }`: in node 20's V8 a spread followed by more
 * properties takes a slow path, ~5 µs an object, about 20× this; a list page builds 100.
 */
function sandboxHead<T extends object>(s: SandboxRecord | SandboxSummary, more: T) {
  const head = {
    id: s.id,
    name: s.name,
    phase: s.phase,
    generation: s.generation,
    reason: s.reason,
    reasonText: s.reason ? describeReason(s.reason) : null,
    host: s.host === "" ? null : s.host,
    labels: s.labels,
  };
  return Object.assign(head, more);
}

export function sandboxView(s: SandboxRecord, boundary: BoundaryHealth | null = null, disk: DiskView | null = null): SandboxView {
  return sandboxHead(s, {
    spec: s.spec,
    runtime: s.runtime,
    boundary,
    disk,
    createdAt: s.createdAt,
    updatedAt: s.updatedAt,
  });
}

/**
 * A list row (`view=lean`): what `sandbox list` shows. `workload` and `supervisor` are
 * the container ids of the live generation, null once it has ended (as `sandbox get` shows).
 */
export function sandboxSummaryView(s: SandboxSummary): SandboxSummaryView {
  const live = s.runtime !== null && s.runtime.generation === s.generation && LIVE_PHASES.includes(s.phase) ? s.runtime : null;
  return sandboxHead(s, {
    workload: live?.workloadId ?? null,
    supervisor: live?.supervisorId ?? null,
    createdAt: s.createdAt,
    updatedAt: s.updatedAt,
  });
}

export function eventView(e: EventRecord): EventView {
  return Object.assign({}, e, { reasonText: e.reason ? describeReason(e.reason) : null }); // not a spread: see sandboxHead
}
