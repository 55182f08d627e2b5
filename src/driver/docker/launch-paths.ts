// Where one launch's files are on the host. <launchRoot>/<sandboxId>-g<generation>/ holds the
// supervisor's launch file and token (mounted read-only at LAUNCH_DIR) and its run directory
// (mounted read-write at RUN_DIR), where the supervisor serves health on a Unix socket that
// the gateway probes from the host by this same path. Pure: paths only.

import { dirname, join } from "node:path";
import { HEALTH_SOCKET_FILE, MAX_SOCKET_PATH_BYTES, RUN_DIR_NAME } from "../../protocol/launch.js";

/** Where a gateway home keeps its launch directories. */
export const launchRootOf = (homeDir: string): string => join(homeDir, "launch");

export const launchDirOf = (launchRoot: string, sandboxId: string, generation: number): string => join(launchRoot, `${sandboxId}-g${generation}`);

export const runDirOf = (launchDir: string): string => join(launchDir, RUN_DIR_NAME);

/** The supervisor's health socket as the host sees it. */
export const healthSocketOf = (launchRoot: string, sandboxId: string, generation: number): string =>
  join(runDirOf(launchDirOf(launchRoot, sandboxId, generation)), HEALTH_SOCKET_FILE);

/** The longest launch a gateway makes: an id's 16 hex digits and a generation of 10 digits. */
const LONGEST = { sandboxId: `sbx_${"f".repeat(16)}`, generation: 9_999_999_999 };

/**
 * Null when every launch's health socket under `launchRoot` fits a Unix socket path; else the
 * one line that says why not, naming the gateway's home (the launch root's parent) and the limit.
 */
export function socketPathProblem(launchRoot: string): string | null {
  const longest = healthSocketOf(launchRoot, LONGEST.sandboxId, LONGEST.generation);
  const bytes = Buffer.byteLength(longest);
  if (bytes <= MAX_SOCKET_PATH_BYTES) return null;
  const home = dirname(launchRoot);
  const fits = MAX_SOCKET_PATH_BYTES - (bytes - Buffer.byteLength(home));
  return `the gateway home ${home} is too long for the supervisors' health sockets: ${longest} is ${bytes} bytes, a Unix socket path at most ${MAX_SOCKET_PATH_BYTES}; choose a home of at most ${fits} bytes (--home, SANDGATE_HOME)`;
}
