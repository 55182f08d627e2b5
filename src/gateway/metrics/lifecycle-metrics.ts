// Lifecycle metrics from the one place every phase change is recorded: the store's
// committed events (a phase change and its event are one transaction, whoever made it:
// an intent, a launch, the monitor's recovery sink). A sandbox leaving Recovering is a
// recovery concluded; its duration runs from when it entered Recovering, as recorded
// (so a recovery that spans a gateway restart is measured whole).

import type { EventRecord, Store } from "../../store/contract.js";
import type { GatewayMetrics } from "./contract.js";

/** Subscribes; returns the unsubscribe function (Store.close also drops it). */
export function observeLifecycle(store: Store, metrics: Pick<GatewayMetrics, "transition" | "recovery">, onError: (err: unknown) => void): () => void {
  const count = async (e: EventRecord): Promise<void> => {
    if (e.kind !== "phase" && e.kind !== "deleted") return;
    // Listeners run after the commit, inside the writer's call: counting must never fail it.
    try {
      const to = e.newPhase ?? "Deleted";
      metrics.transition(e.oldPhase, to, e.reason?.code ?? null);
      if (e.oldPhase !== "Recovering" || to === "Recovering") return;
      const since = await store.enteredPhaseAt(e.sandboxId, "Recovering");
      if (since !== null) metrics.recovery(to, (Date.parse(e.time) - Date.parse(since)) / 1000);
    } catch (err) {
      onError(err);
    }
  };
  return store.onEvent((e) => void count(e));
}
