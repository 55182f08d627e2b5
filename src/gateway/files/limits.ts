// The bounds of file transfers (`sandbox cp`, the files API). Their environment
// variables, ranges and defaults are declared in the settings table (../settings.ts),
// which parses and checks them at gateway start.

import { DEFAULT_SETTINGS, SETTINGS, type GatewaySettings } from "../settings.js";

export interface FilesLimits {
  /** Bytes one transfer may move (the tar stream, or one file). */
  maxBytes: number;
  /** Members one transfer may hold. */
  maxEntries: number;
  /** Bytes of symlink names one upload may make the gateway remember (see src/files/members.ts). */
  symlinkMemoryBytes: number;
  /** Transfers at once, over all sandboxes. */
  concurrent: number;
  /** Transfers at once, per sandbox. */
  perSandbox: number;
  /** A transfer with no bytes moving in either direction for this long is ended. */
  idleTimeoutMs: number;
}

/** The transfer bounds of resolved settings. */
export function filesLimitsOf(s: Pick<GatewaySettings, "cpMaxBytes" | "cpMaxEntries" | "cpSymlinkMemory" | "cpConcurrency" | "cpPerSandbox" | "cpIdleTimeoutS">): FilesLimits {
  return { maxBytes: s.cpMaxBytes, maxEntries: s.cpMaxEntries, symlinkMemoryBytes: s.cpSymlinkMemory, concurrent: s.cpConcurrency, perSandbox: s.cpPerSandbox, idleTimeoutMs: s.cpIdleTimeoutS * 1000 };
}

export const DEFAULT_FILES_LIMITS: FilesLimits = filesLimitsOf(DEFAULT_SETTINGS);

/** The environment variable of each limit (named in errors that a limit was reached). */
export const FILES_LIMIT_ENV: Record<keyof FilesLimits, string> = {
  maxBytes: SETTINGS.cpMaxBytes.env,
  maxEntries: SETTINGS.cpMaxEntries.env,
  symlinkMemoryBytes: SETTINGS.cpSymlinkMemory.env,
  concurrent: SETTINGS.cpConcurrency.env,
  perSandbox: SETTINGS.cpPerSandbox.env,
  idleTimeoutMs: SETTINGS.cpIdleTimeoutS.env,
};
