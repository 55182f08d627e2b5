#!/usr/bin/env bash
# The whole test suite on a fresh machine: installs what is missing, builds,
# lints, type-checks, then runs every test (unit and real-dockerd integration).
# The integration tests start and restart their own private dockerd.
# Prints the closing line "N passed, N failed" (from vitest's JSON report).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/node-env.sh # Node 24 first on PATH for everything below (installed when missing)
bash scripts/setup.sh
echo "test: lint"
npm run --silent lint
echo "test: import rules"
npm run --silent check:imports
echo "test: typecheck"
npm run --silent typecheck
echo "test: vitest ${*:-(all)}"
mkdir -p .cache
report=.cache/vitest-report.json
rm -f "$report"
status=0
npx vitest run --reporter=default --reporter=json --outputFile.json="$report" "$@" || status=$?
if [ -f "$report" ]; then
  node -e '
    const r = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
    const skipped = r.numPendingTests + r.numTodoTests;
    // A file whose hooks failed has no failed test, but it failed: count it too.
    const broken = r.testResults.filter((f) => f.status === "failed" && !f.assertionResults.some((a) => a.status === "failed")).length;
    console.log(`${r.numPassedTests} passed, ${r.numFailedTests + broken} failed` + (broken ? ` (${broken} file(s) failed outside a test)` : "") + (skipped ? `, ${skipped} skipped` : ""));
  ' "$report"
else
  echo "0 passed, 1 failed"
  [ "$status" -ne 0 ] || status=1
fi
exit "$status"
