// The API's JSON shapes of stored records.

import { describeReason } from "../../lifecycle/phases.js";
import type { EventRecord, SandboxRecord } from "../../store/store.js";
import type { BoundaryHealth } from "../control/boundary.js";
import type { DiskView } from "../sandboxes/read-model.js";

export function sandboxView(s: SandboxRecord, boundary: BoundaryHealth | null = null, disk: DiskView | null = null) {
  return {
    id: s.id,
    name: s.name,
    phase: s.phase,
    generation: s.generation,
    reason: s.reason,
    reasonText: s.reason ? describeReason(s.reason) : null,
    spec: s.spec,
    runtime: s.runtime,
    boundary,
    disk,
    createdAt: s.createdAt,
    updatedAt: s.updatedAt,
  };
}

export function eventView(e: EventRecord) {
  return { ...e, reasonText: e.reason ? describeReason(e.reason) : null };
}
