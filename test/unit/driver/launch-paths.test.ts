// Where a launch's files are on the host, and the bound on them: a supervisor's health socket
// (<home>/launch/<id>-g<generation>/run/health.sock) must fit a Unix socket path (107 bytes),
// else the gateway refuses its home at start, in one line naming the home and the limit.
import { describe, expect, it } from "vitest";
import { healthSocketOf, launchDirOf, launchRootOf, runDirOf, socketPathProblem } from "../../../src/driver/docker/launch-paths.js";
import { HEALTH_SOCKET_PATH, LAUNCH_DIR, RUN_DIR } from "../../../src/protocol/launch.js";

describe("launch paths", () => {
  it("the run directory sits in the launch directory as RUN_DIR sits in LAUNCH_DIR: the socket has one name inside and out", () => {
    expect(launchRootOf("/h")).toBe("/h/launch");
    expect(launchDirOf("/h/launch", "sbx_0123456789abcdef", 12)).toBe("/h/launch/sbx_0123456789abcdef-g12");
    expect(runDirOf("/h/launch/sbx_0123456789abcdef-g12")).toBe("/h/launch/sbx_0123456789abcdef-g12/run");
    expect(healthSocketOf("/h/launch", "sbx_0123456789abcdef", 12)).toBe("/h/launch/sbx_0123456789abcdef-g12/run/health.sock");
    expect(HEALTH_SOCKET_PATH).toBe(`${LAUNCH_DIR}/run/health.sock`);
    expect(RUN_DIR).toBe(`${LAUNCH_DIR}/run`);
  });

  it("a home whose longest socket path is 107 bytes is accepted; one byte more is refused naming the home and the limit", () => {
    // "/launch/sbx_<16>-g<10>/run/health.sock" is 7 + 33 + 16 = 56 bytes after the home.
    const fits = `/${"h".repeat(107 - 56 - 1)}`;
    expect(Buffer.byteLength(healthSocketOf(`${fits}/launch`, `sbx_${"f".repeat(16)}`, 9_999_999_999))).toBe(107);
    expect(socketPathProblem(`${fits}/launch`)).toBeNull();
    expect(socketPathProblem("/root/.sandgate/launch")).toBeNull();
    const long = `${fits}h`;
    expect(socketPathProblem(`${long}/launch`)).toBe(
      `the gateway home ${long} is too long for the supervisors' health sockets: ${long}/launch/sbx_ffffffffffffffff-g9999999999/run/health.sock is 108 bytes, a Unix socket path at most 107; choose a home of at most 51 bytes (--home, SANDGATE_HOME)`,
    );
  });

  it("counts bytes, not characters", () => {
    const home = `/${"é".repeat(26)}`; // 53 bytes, 27 characters
    expect(socketPathProblem(`${home}/launch`)).toMatch(/ is 109 bytes, a Unix socket path at most 107; choose a home of at most 51 bytes/);
  });
});
