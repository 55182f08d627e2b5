// Node 24 LTS everywhere: the suite itself, the CLI's launcher, package.json engines and the
// pinned Node 24 that scripts/node-env.sh installs agree on the oldest node Sandgate runs on
// (24.5: the first whose http and https honour NODE_USE_ENV_PROXY, as fetch does from 24.0).
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { PROJECT_ROOT } from "../../support/cli-build.js";

const pkg = JSON.parse(readFileSync(`${PROJECT_ROOT}/package.json`, "utf8")) as { engines: { node: string } };
const nodeEnv = readFileSync(`${PROJECT_ROOT}/scripts/node-env.sh`, "utf8");

/** Run bin/sandgate.js on this node made to say it is `version` (process.version and process.versions.node). */
function launcherAs(version: string): { status: number | null; stdout: string; stderr: string } {
  const pretend = `Object.defineProperty(process, "versions", { value: { ...process.versions, node: "${version}" } }); Object.defineProperty(process, "version", { value: "v${version}" });`;
  const r = spawnSync(process.execPath, ["--import", `data:text/javascript,${encodeURIComponent(pretend)}`, `${PROJECT_ROOT}/bin/sandgate.js`, "--version"], { encoding: "utf8" });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

describe("Node 24", () => {
  it("the suite runs on Node 24.5 or later (global-setup refuses an older one before any test)", () => {
    const [major = 0, minor = 0] = process.versions.node.split(".").map(Number);
    expect(major > 24 || (major === 24 && minor >= 5), process.version).toBe(true);
  });

  it("package.json engines and the pinned Node of scripts/node-env.sh", () => {
    expect(pkg.engines.node).toBe(">=24.5");
    const pinned = /^SANDGATE_NODE_VERSION=(\d+)\.(\d+)\.(\d+)$/m.exec(nodeEnv);
    expect(pinned?.[1]).toBe("24");
    expect(Number(pinned?.[2])).toBeGreaterThanOrEqual(5);
    expect(nodeEnv).toMatch(/^SANDGATE_NODE_INTEGRITY=sha512-[A-Za-z0-9+/]{86}==$/m);
    expect(nodeEnv).toMatch(/^SANDGATE_NPM_INTEGRITY=sha512-[A-Za-z0-9+/]{86}==$/m);
  });

  it("bin/sandgate.js refuses an older node in one line, exit 2, naming it and where Node 24 comes from", () => {
    for (const old of ["20.20.2", "24.4.1"]) {
      const r = launcherAs(old);
      expect(r.status, r.stderr).toBe(2);
      expect(r.stdout).toBe("");
      expect(r.stderr).toBe(
        `sandgate: needs Node.js 24.5 or later, and ${process.execPath} is node v${old}; scripts/setup.sh installs Node 24 into .cache/node/ (put its bin/ first on PATH: see README, Quickstart)\n`,
      );
    }
    for (const ok of ["24.5.0", "26.1.0"]) {
      const r = launcherAs(ok);
      expect(r.status, r.stderr).toBe(0);
      expect(r.stdout).toMatch(/^\d+\.\d+\.\d+\n$/);
    }
  });
});
