// What a gateway does at start with each sandbox a previous gateway left, by phase: the
// table containerd keeps apart in shim_load.go. Nothing is torn down just because the
// gateway restarted: running generations are adopted through recovery's own verification,
// intents a previous gateway persisted are finished, and teardowns it owed are taken over.
// Pure: src/gateway/sandboxes/adoption.ts carries the action out.

import type { Phase } from "./phases.js";

export type Adoption =
  /** Ready when the gateway stopped: nothing proves it now. Recovering, watched, re-verified before it is trusted. */
  | "reverify"
  /** Already Recovering: watched again, its deadline carried over from when it entered Recovering. */
  | "watch"
  /** Running, but this runtime cannot be watched: its handle holds the desired policy, nothing more. */
  | "hold"
  /** Error or Completed with its containers still owed a removal: the teardown is this gateway's now. */
  | "teardown"
  /** A stop or a delete was persisted and not finished: finish it. */
  | "stop"
  | "delete"
  /** Cut short at an unknown step of its launch: its half-made runtime cannot be trusted; Error owes its removal. */
  | "fail"
  | "nothing";

export interface Left {
  phase: Phase;
  /** It has a recorded runtime (identities persisted before they were trusted). */
  runtime: boolean;
  /** Its containers are owed a removal (recorded with the Error or Completed that owed it). */
  teardownOwed: boolean;
}

const RUNNING = (s: Left, watched: boolean): Adoption => (!s.runtime ? "nothing" : !watched ? "hold" : s.phase === "Ready" ? "reverify" : "watch");
const ENDED = (s: Left): Adoption => (s.teardownOwed ? "teardown" : "nothing");

/** Phase → action. `watched`: whether the runtime has a monitor. */
export const ADOPTION: Record<Phase, (s: Left, watched: boolean) => Adoption> = {
  Provisioning: () => "fail",
  Ready: RUNNING,
  Recovering: RUNNING,
  Stopping: () => "stop",
  Stopped: () => "nothing",
  Completed: ENDED,
  Error: ENDED,
  Deleting: () => "delete",
};

export function adoptionOf(s: Left, watched: boolean): Adoption {
  return ADOPTION[s.phase](s, watched);
}
