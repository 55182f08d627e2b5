// The phase vocabulary and the one-line rendering of an Error reason.
import { describe, expect, it } from "vitest";
import { describeReason, EVENT_TYPES, PHASES, USER_EVENTS, type SandboxReason } from "../../../src/lifecycle/phases.js";

describe("describeReason", () => {
  it.each<[SandboxReason, string]>([
    [{ code: "TtlExpired", detail: "its TTL of 1h ran out at 2026-12-01T11:00:00.000Z" }, "TtlExpired: its TTL of 1h ran out at 2026-12-01T11:00:00.000Z"],
    [{ code: "IdleTimeout", detail: "no exec, connect or egress for 30m" }, "IdleTimeout: no exec, connect or egress for 30m"],
    [{ code: "SupervisorExited", exitCode: 137 }, "SupervisorExited (exit code 137)"],
    [{ code: "SupervisorExited", exitCode: 0, detail: "finished at 2025-05-01T10:05:00Z" }, "SupervisorExited (exit code 0): finished at 2025-05-01T10:05:00Z"],
    [{ code: "WorkloadExited", exitCode: -1, detail: "" }, "WorkloadExited (exit code -1)"],
    [{ code: "ProvisioningFailed", detail: "No such image: nope" }, "ProvisioningFailed: No such image: nope"],
    [{ code: "WorkloadMissing" }, "WorkloadMissing"],
    [{ code: "SupervisorMissing", detail: "" }, "SupervisorMissing"],
    [{ code: "BoundaryUnhealthy", detail: "session lost" }, "BoundaryUnhealthy: session lost"],
  ])("%j → %s", (reason, text) => {
    expect(describeReason(reason)).toBe(text);
  });
});

describe("vocabulary", () => {
  it("lists every phase and event once, user events among them", () => {
    expect(PHASES).toEqual(["Provisioning", "Ready", "Recovering", "Stopping", "Stopped", "Completed", "Error", "Deleting"]);
    expect(EVENT_TYPES).toEqual(["start", "stop", "delete", "ready", "provisionFailed", "contactLost", "recovered", "failed", "completed", "stopped", "deleted"]);
    expect(USER_EVENTS).toEqual(["start", "stop", "delete"]);
  });
});
