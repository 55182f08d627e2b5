// Vitest config for mutation runs (stryker.config.mjs): only the unit tests of the pure
// modules Stryker mutates, no globalSetup, no Docker. Keep this list in step with `mutate`.
import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: [
      "test/unit/lifecycle/lifecycle-*.test.ts",
      "test/unit/policy/policy-*.test.ts",
      // policy/credentials.ts and credential-scope.ts (with the supervisor's swap, also pure).
      "test/unit/policy/credentials.test.ts",
      // The egress proxy's pure pieces: target parsing, refusal bodies, audit record shapes.
      "test/unit/supervisor/proxy-target.test.ts",
      "test/unit/supervisor/proxy-refusals.test.ts",
      "test/unit/supervisor/proxy-audit-record.test.ts",
      "test/unit/driver/monitor-classify.test.ts",
      "test/unit/lifecycle/supervision.test.ts",
      "test/unit/lifecycle/placement.test.ts",
      "test/unit/driver/sandbox-subnets.test.ts",
      "test/unit/driver/range-route.test.ts",
      "test/unit/driver/launch-paths.test.ts",
      // transparent-rules.ts, against rulesets nft really loads (root: it makes network namespaces).
      "test/unit/driver/transparent-netns.test.ts",
      // The PostgreSQL store's event feed (its reader injected: no database).
      "test/unit/store/event-feed.test.ts",
    ],
    // Generous: the host is shared and a mutant may make a property test slow.
    testTimeout: 30_000,
  },
});
