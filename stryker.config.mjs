// Mutation testing over the pure modules (docs/testing.md, "Mutation testing").
// Run: npm run mutation            (full run, fails below the break threshold)
//      npm run mutation -- --incremental   (reuses reports/stryker-incremental.json)
/** @type {import("@stryker-mutator/api/core").PartialStrykerOptions} */
export default {
  testRunner: "vitest",
  vitest: {
    // Only the unit tests of the mutated modules; no globalSetup and no Docker.
    configFile: "vitest.mutation.config.ts",
  },
  coverageAnalysis: "perTest",
  // Static mutants (module-level tables and constants) would each rerun every test and
  // take ~90 % of the time; they are reported as ignored (docs/testing.md).
  ignoreStatic: true,
  mutate: [
    "src/lifecycle/machine.ts",
    "src/lifecycle/phases.ts",
    "src/lifecycle/spec.ts",
    "src/policy/*.ts",
    "src/supervisor/proxy/target.ts",
    "src/supervisor/proxy/refusals.ts",
    "src/supervisor/proxy/audit-record.ts",
    "src/driver/docker/identity.ts",
    "src/driver/docker/monitor/classify.ts",
    "src/lifecycle/supervision.ts",
    "src/lifecycle/adoption.ts",
    "src/lifecycle/placement.ts",
    "src/driver/docker/sandbox-subnets.ts",
    "src/driver/docker/range-route.ts",
    "src/driver/docker/launch-paths.ts",
    "src/driver/docker/transparent-rules.ts",
    "src/store/postgres/event-feed.ts",
  ],
  thresholds: { high: 90, low: 85, break: 85 },
  reporters: ["clear-text", "progress", "html", "json"],
  clearTextReporter: { allowEmojis: false, logTests: false, reportMutants: true, reportScoreTable: true },
  htmlReporter: { fileName: "reports/mutation/mutation.html" },
  jsonReporter: { fileName: "reports/mutation/mutation.json" },
  incrementalFile: "reports/stryker-incremental.json",
  // Two cores, shared with other test runs: two runners at most, and a lenient timeout.
  concurrency: 2,
  timeoutMS: 10_000,
  timeoutFactor: 2.5,
  tempDirName: ".stryker-tmp",
  cleanTempDir: true,
  ignorePatterns: ["/dist", "/.cache", "/bench/results", "/reports", "*.db", "*.db-wal", "*.db-shm"],
};
