import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    // Integration tests share one private dockerd per run; run files one at a time
    // so daemon restarts in one file cannot disturb another.
    fileParallelism: false,
    testTimeout: 60_000,
    hookTimeout: 180_000,
    globalSetup: ["test/support/global-setup.ts"],
    setupFiles: ["test/support/no-leak-warnings.ts"],
  },
});
