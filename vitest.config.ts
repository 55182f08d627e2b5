import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    testTimeout: 60_000,
    hookTimeout: 180_000,
    globalSetup: ["test/support/global-setup.ts"],
    setupFiles: ["test/support/no-leak-warnings.ts"],
    // The unit files first, two at a time (one a core); then the integration files.
    projects: [
      {
        extends: true,
        test: { name: "unit", include: ["test/unit/**/*.test.ts"], fileParallelism: true, maxWorkers: 2, sequence: { groupOrder: 0 } },
      },
      {
        extends: true,
        // Integration tests start and restart private dockerd daemons and bring sandboxes up
        // by the dozen: one file at a time, so a daemon restart in one cannot disturb another.
        test: { name: "integration", include: ["test/integration/**/*.test.ts"], fileParallelism: false, sequence: { groupOrder: 1 } },
      },
    ],
  },
});
