// Failure classification: what a Docker inspect answer proves about one container
// instance. Pure. Only Exited, InstanceChanged and Gone may end a sandbox;
// anything that does not prove a fact about the instance is ChannelLost.
// See docs/recovery.md and ../shared/reference/recovery-design-rules.md.

import { describe, type EngineResult } from "../engine/result.js";
import type { ContainerInspect } from "../engine/types.js";
import { checkInstance, type ExpectedInstance } from "../identity.js";
import type { Verdict } from "../../../lifecycle/supervision.js";

export type { Verdict, VerdictKind } from "../../../lifecycle/supervision.js";

/**
 * Classify an inspect of the expected container. A 404 is Gone; any failure to
 * get a well-formed answer is ChannelLost; a different instance (id, start time,
 * pid, labels) is InstanceChanged; the same instance not running is Exited.
 */
export function classifyInspect(r: EngineResult<ContainerInspect>, expected: ExpectedInstance): Verdict {
  if (r.kind === "transport") return { kind: "ChannelLost", cause: describe(r) };
  if (r.kind === "docker") {
    if (r.status === 404) return { kind: "Gone", detail: `container ${expected.id.slice(0, 12)} no longer exists` };
    // 5xx and anything else unexpected prove nothing about the container.
    return { kind: "ChannelLost", cause: describe(r) };
  }
  const check = checkInstance(r.body, expected);
  switch (check.kind) {
    case "unusable":
      return { kind: "ChannelLost", cause: check.detail };
    case "unstarted":
      return { kind: "ChannelLost", cause: "container not started yet" };
    case "other":
      return { kind: "InstanceChanged", detail: check.detail };
    case "running":
      return { kind: "Alive" };
    case "exited":
      return { kind: "Exited", code: check.exitCode, finishedAt: check.finishedAt, instance: { id: expected.id, startedAt: expected.startedAt } };
  }
}
