// `npm run fuzz [-- --long] [--seed N] [--runs N]`: the gateway fuzz suite
// (test/unit/cli/fuzz-gateway.test.ts) with more cases than the test command runs.
// Default here: 5,000 cases per property; --long: 50,000.
import { spawnSync } from "node:child_process";

const args = process.argv.slice(2);
let runs = 5_000;
let seed = String(Date.now() % 1_000_000_007);
for (let i = 0; i < args.length; i++) {
  const a = args[i]!;
  if (a === "--long") runs = 50_000;
  else if (a === "--seed" && /^\d+$/.test(args[i + 1] ?? "")) seed = args[++i]!;
  else if (a === "--runs" && /^\d+$/.test(args[i + 1] ?? "")) runs = Number(args[++i]);
  else {
    console.error(`fuzz: unknown argument ${JSON.stringify(a)}; allowed: --long, --seed N, --runs N`);
    process.exit(2);
  }
}
console.error(`fuzz: ${runs} cases per property, seed ${seed} (replay with --seed ${seed})`);
const r = spawnSync("npx", ["vitest", "run", "test/unit/cli/fuzz-gateway.test.ts"], { stdio: "inherit", env: { ...process.env, FUZZ_RUNS: String(runs), FUZZ_SEED: seed } });
process.exit(r.status ?? 1);
