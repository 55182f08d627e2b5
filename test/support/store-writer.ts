// A separate writer process for store durability and race tests (run with tsx).
//   churn <db>           create sandboxes and move them through phases forever,
//                        printing "committed <name> <phase>" after each commit
//   race <db> <n> <at>   at wall-clock time <at> (ms), try Ready→Stopping on
//                        sandboxes race-0..race-<n-1>; print "won <name>" per win
import { Store } from "../../src/store/store.js";
import { defaultPolicy } from "../../src/policy/index.js";

const [mode, db, ...rest] = process.argv.slice(2);
const store = Store.open(db!);
const spec = { env: {}, resources: { memoryMb: 64, cpus: 1, pids: 64 } };
const policy = defaultPolicy();

if (mode === "churn") {
  for (let i = 0; ; i++) {
    const name = `churn-${process.pid}-${i}`;
    const s = await store.createSandbox({ host: "h1", id: `id-${process.pid}-${i}`, name, spec, policy });
    process.stdout.write(`committed ${name} Provisioning\n`);
    await store.transition(s.id, { expect: { phase: "Provisioning", generation: 1 }, next: { phase: "Ready", generation: 1, reason: null } });
    process.stdout.write(`committed ${name} Ready\n`);
  }
} else if (mode === "race") {
  const n = Number(rest[0]);
  const at = Number(rest[1]);
  while (Date.now() < at) { /* spin to line both writers up */ }
  for (let i = 0; i < n; i++) {
    const won = await store.transition(`race-${i}`, {
      expect: { phase: "Ready", generation: 1 },
      next: { phase: "Stopping", generation: 1, reason: null },
      message: `by ${process.pid}`,
    });
    if (won) process.stdout.write(`won race-${i}\n`);
  }
  store.close();
}
