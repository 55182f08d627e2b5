// The supervisor runs in its image as one ESM file with no node_modules, bundled
// at build time (`npm run build`, scripts/bundle-supervisor.ts). The gateway only
// needs to find it; it never bundles at run time.
import { existsSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

/** The repository (or installed package) root: this file is at {src,dist}/driver/docker/. */
export const PROJECT_ROOT = fileURLToPath(new URL("../../../", import.meta.url));
export const PREBUILT_SUPERVISOR_BUNDLE = join(PROJECT_ROOT, "dist", "supervisor", "supervisor.mjs");
/** The supervisor's Node-API addon (native/orig-dst.c): the original destination of a redirected connection. */
export const PREBUILT_ORIG_DST_ADDON = join(PROJECT_ROOT, "dist", "supervisor", "orig-dst.node");

/** The prebuilt bundle; a clear error when the project was not built. */
export function resolveSupervisorBundle(): string {
  if (existsSync(PREBUILT_SUPERVISOR_BUNDLE)) return PREBUILT_SUPERVISOR_BUNDLE;
  throw new Error(`the supervisor bundle ${PREBUILT_SUPERVISOR_BUNDLE} is missing: run \`npm run build\` first`);
}

/** The prebuilt addon; a clear error when the project was not built. */
export function resolveOrigDstAddon(): string {
  if (existsSync(PREBUILT_ORIG_DST_ADDON)) return PREBUILT_ORIG_DST_ADDON;
  throw new Error(`the supervisor's addon ${PREBUILT_ORIG_DST_ADDON} is missing: run \`npm run build\` first (it needs a C compiler)`);
}
