// GET /v1/fleet: the store's hosts (docs/fleet.md). The embedded store has one host, the
// gateway's own, which it drives while it runs.

import type { FleetView } from "../../api/responses.js";
import { LIVE_PHASES, PHASES } from "../../lifecycle/phases.js";
import type { Store } from "../../store/contract.js";

export async function fleetView(store: Store, self: string): Promise<FleetView> {
  if (store.fleet === null) {
    const counts = await store.countByPhase();
    const sum = (phases: readonly (keyof typeof counts)[]): number => phases.reduce((n, p) => n + counts[p], 0);
    return { store: "sqlite", host: self, hosts: [{ host: self, self: true, driven: true, lease: null, live: sum(LIVE_PHASES), total: sum(PHASES) }] };
  }
  const hosts = await store.fleet.hosts();
  return { store: "postgres", host: self, hosts: hosts.map((h) => ({ host: h.host, self: h.host === self, driven: h.driven, lease: h.lease, live: h.live, total: h.total })) };
}
