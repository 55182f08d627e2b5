// The supervisor container's environment: its launch configuration and the malloc settings
// its proxy's throughput depends on (bench proxy: 0.34× → 0.60× direct for 1 MiB bodies);
// none of it reaches the workload's container, nor do its mounts.
import { describe, expect, it } from "vitest";
import { LAUNCH_CONFIG_PATH, LAUNCH_DIR, RUN_DIR } from "../../../src/protocol/launch.js";
import { SUPERVISOR_MALLOC_ENV, supervisorConfig, workloadConfig } from "../../../src/driver/docker/objects.js";

const i = { gatewayId: "gw", sandboxId: "sbx_1", name: "n", generation: 1, nonce: "x" };

describe("the supervisor's environment", () => {
  it("carries the launch configuration's path and keeps glibc from handing the heap's top back after every body", () => {
    const env = supervisorConfig(i, "sha256:s", "/l", 2e9 + 1).Env!;
    expect(env).toContain(`SANDGATE_LAUNCH_CONFIG=${LAUNCH_CONFIG_PATH}`);
    expect(env).toEqual(expect.arrayContaining(["MALLOC_TOP_PAD_=4194304", "MALLOC_TRIM_THRESHOLD_=8388608"]));
    expect(SUPERVISOR_MALLOC_ENV.every((e) => env.includes(e))).toBe(true);
  });

  it("none of it is the workload's", () => {
    const w = workloadConfig(i, { imageId: "sha256:x", command: undefined, env: {}, resources: { memoryMb: 64, cpus: 1, pids: 64 }, proxyUrl: "http://p:3128", defaultImage: true, resolvConf: "/r", uid: 2e9, workspace: null });
    expect((w.Env ?? []).filter((e) => e.startsWith("MALLOC_") || e.startsWith("SANDGATE_LAUNCH"))).toEqual([]);
  });

  it("mounts its launch files read-only and its run directory (the health socket) writable; the workload mounts neither", () => {
    expect(supervisorConfig(i, "sha256:s", "/l/sbx_1-g1", 2e9 + 1).HostConfig!.Mounts).toEqual([
      { Type: "bind", Source: "/l/sbx_1-g1", Target: LAUNCH_DIR, ReadOnly: true },
      { Type: "bind", Source: "/l/sbx_1-g1/run", Target: RUN_DIR },
    ]);
    const w = workloadConfig(i, { imageId: "sha256:x", command: undefined, env: {}, resources: { memoryMb: 64, cpus: 1, pids: 64 }, proxyUrl: "http://p:3128", defaultImage: true, resolvConf: "/r", uid: 2e9, workspace: null });
    expect((w.HostConfig!.Mounts ?? []).filter((m) => m.Source?.startsWith("/l") || m.Target.startsWith(LAUNCH_DIR))).toEqual([]);
  });
});
