// Where the test run's plain-JS copy of src/ lives (built by global-setup.ts).
import { fileURLToPath } from "node:url";
import { join } from "node:path";

export const PROJECT_ROOT = fileURLToPath(new URL("../../", import.meta.url));

/**
 * Directly under the project root, like dist/: src/driver/docker/supervisor-bundle.ts
 * finds the project root three directories above its own file.
 */
export const CLI_BUILD_DIR = join(PROJECT_ROOT, ".test-build");

export const CLI_MAIN = join(CLI_BUILD_DIR, "cli", "main.js");
