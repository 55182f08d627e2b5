// `npm run build`: compiles src/ to dist/, writes the SDK's type declarations
// (dist/sdk/*.d.ts, what package.json exports as `sandgate/sdk`), and bundles the
// supervisor into one file (dist/supervisor/supervisor.mjs) for its image, beside its
// Node-API addon (dist/supervisor/orig-dst.node, scripts/build-native.ts).
import { execFileSync } from "node:child_process";
import { join } from "node:path";
import { PREBUILT_ORIG_DST_ADDON, PREBUILT_SUPERVISOR_BUNDLE, PROJECT_ROOT } from "../src/driver/docker/supervisor-bundle.js";
import { bundleSupervisor } from "./bundle-supervisor.js";
import { buildOrigDstAddon } from "./build-native.js";

const tsc = join(PROJECT_ROOT, "node_modules/typescript/bin/tsc");
execFileSync(process.execPath, [tsc, "-p", join(PROJECT_ROOT, "tsconfig.build.json")], { stdio: "inherit" });
execFileSync(process.execPath, [tsc, "-p", join(PROJECT_ROOT, "tsconfig.sdk.json")], { stdio: "inherit" });
await bundleSupervisor(PREBUILT_SUPERVISOR_BUNDLE);
buildOrigDstAddon(PREBUILT_ORIG_DST_ADDON);
console.log(`built dist/, ${PREBUILT_SUPERVISOR_BUNDLE} and ${PREBUILT_ORIG_DST_ADDON}`);
