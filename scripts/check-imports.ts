// `npm run check:imports` (part of the test command): the architecture's import
// rules, checked on every module under src/.
//   1. No import cycle, type-only imports included.
//   2. No cycle between the top-level folders of src/ either (a top-level module such as
//      src/home.ts counts as its own): each folder is a layer, and a layer that imports
//      one that imports it back (store → driver → gateway → store) is not one, even when
//      no single module closes the loop.
//   3. Contracts import no implementation: src/driver/contract.ts and src/protocol/
//      import only pure vocabulary (src/lifecycle, src/policy, the error family of
//      src/util/errors.ts) and each other. The API's
//      contracts (src/api: request and response schemas, the route table, the OpenAPI
//      document; with src/files/api.ts and src/version.ts, which they use) import only
//      src/lifecycle, src/policy, src/util, src/files/api.ts, src/version.ts and each other.
//   4. Pure modules stay pure: src/lifecycle, src/policy, src/util and src/home.ts (the
//      home directory's layout and files) import only src/lifecycle, src/policy and
//      src/util: nothing of the gateway, drivers, store, CLI or supervisor.
//   5. The supervisor (bundled alone into its image) imports only src/supervisor,
//      src/protocol, src/policy and src/util.
//   6. Nothing imports the CLI but the CLI; nothing outside src/gateway imports the
//      gateway but the CLI (which starts it). What others need of it is a contract
//      (src/api, src/home.ts), not the gateway's.
//   7. The SDK (src/sdk, what a program imports) imports only itself, the API's contracts
//      (src/api), src/files, src/home.ts and the pure modules: never the CLI or the gateway.
//   8. The MCP server (src/mcp) imports only itself, the SDK and the pure modules: it
//      reaches the gateway as a client, never through the gateway's or the CLI's code.
//   9. The store's contract (src/store/contract.ts) imports only pure vocabulary, the error
//      family and the driver's contract; the gateway imports of src/store only that contract, except
//      src/gateway/gateway.ts, which opens the store (src/store/open.ts: SQLite or PostgreSQL).
// Prints every violation and exits 1 if there is one.
import { readFileSync, readdirSync, statSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const SRC = join(ROOT, "src");

function walk(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const p = join(dir, name);
    return statSync(p).isDirectory() ? walk(p) : p.endsWith(".ts") ? [p] : [];
  });
}

// `import … from "./x"`, `export … from "./x"`, a bare `import "./x"` (for its side
// effects: a dependency all the same) and `import("./x")`.
const IMPORT = /(?:^|\n)\s*(?:import|export)\s[^;]*?from\s*["'](\.{1,2}\/[^"']+)["']|(?:^|\n)\s*import\s*["'](\.{1,2}\/[^"']+)["']|import\(\s*["'](\.{1,2}\/[^"']+)["']\s*\)/g;

/** The relative specifiers a module's text imports, in order. */
export function importsOf(text: string): string[] {
  return [...text.matchAll(IMPORT)].map((m) => (m[1] ?? m[2] ?? m[3])!);
}

/** Module → the modules it imports (repo-relative paths, .ts). */
export function importGraph(files: string[]): Map<string, string[]> {
  const graph = new Map<string, string[]>();
  for (const file of files) {
    const deps = importsOf(readFileSync(file, "utf8")).map((spec) => relative(ROOT, resolve(dirname(file), spec.replace(/\.js$/, ".ts"))));
    graph.set(relative(ROOT, file), deps);
  }
  return graph;
}

/** Every elementary cycle found by a depth-first search (each reported once, from its smallest member). */
export function findCycles(graph: Map<string, string[]>): string[][] {
  const cycles: string[][] = [];
  const seen = new Set<string>();
  const state = new Map<string, "open" | "done">();
  const stack: string[] = [];
  const visit = (node: string): void => {
    state.set(node, "open");
    stack.push(node);
    for (const next of graph.get(node) ?? []) {
      if (!graph.has(next)) continue;
      if (state.get(next) === "open") {
        const cycle = stack.slice(stack.indexOf(next));
        const key = [...cycle].sort().join(" ");
        if (!seen.has(key)) {
          seen.add(key);
          cycles.push([...cycle, next]);
        }
      } else if (!state.has(next)) {
        visit(next);
      }
    }
    stack.pop();
    state.set(node, "done");
  };
  for (const node of [...graph.keys()].sort()) if (!state.has(node)) visit(node);
  return cycles;
}

interface Rule {
  name: string;
  from: (m: string) => boolean;
  allowed: (dep: string) => boolean;
}

const under = (...dirs: string[]) => (p: string): boolean => dirs.some((d) => p.startsWith(`src/${d}/`) || p === `src/${d}.ts`);

/** The API's contracts: src/api, and the files API and version it uses. */
const isApiContract = (p: string): boolean => under("api", "version")(p) || p === "src/files/api.ts";

export const RULES: Rule[] = [
  { name: "contracts import no implementation", from: (m) => m === "src/driver/contract.ts" || under("protocol")(m), allowed: (d) => under("lifecycle", "policy", "protocol")(d) || d === "src/util/errors.ts" },
  { name: "API contracts import no implementation", from: isApiContract, allowed: (d) => under("lifecycle", "policy", "util")(d) || isApiContract(d) },
  { name: "pure modules stay pure", from: under("lifecycle", "policy", "util", "home"), allowed: under("lifecycle", "policy", "util") },
  { name: "the supervisor is self-contained", from: under("supervisor"), allowed: under("supervisor", "protocol", "policy", "util") },
  { name: "the SDK stands alone", from: under("sdk"), allowed: under("sdk", "api", "files", "home", "lifecycle", "policy", "util") },
  { name: "the MCP server is a client of the SDK", from: under("mcp"), allowed: under("mcp", "sdk", "lifecycle", "policy", "util", "version") },
  { name: "only the CLI imports the CLI", from: (m) => !under("cli")(m), allowed: (d) => !under("cli")(d) },
  { name: "the gateway is imported only by itself and the CLI", from: (m) => !under("gateway", "cli")(m), allowed: (d) => !under("gateway")(d) },
  // The store's interface is what another store (the fleet's PostgreSQL one) is written against.
  { name: "the store's contract imports no implementation", from: (m) => m === "src/store/contract.ts", allowed: (d) => under("lifecycle", "policy")(d) || d === "src/driver/contract.ts" || d === "src/util/errors.ts" },
  // Only gateway.ts, which opens the store (SQLite or PostgreSQL), names an implementation.
  { name: "the gateway reaches the store through its contract", from: (m) => under("gateway")(m) && m !== "src/gateway/gateway.ts", allowed: (d) => !under("store")(d) || d === "src/store/contract.ts" },
];

/** The top-level folder of src/ a module is in (`src/store/store.ts` → `src/store`); a top-level module is its own (`src/home.ts` → `src/home`). */
export function layerOf(mod: string): string {
  const [, top] = mod.split("/");
  return `src/${top!.replace(/\.ts$/, "")}`;
}

/** Layer → the layers it imports, and for each such edge the first module import that makes it. */
export function layerGraph(graph: Map<string, string[]>): { graph: Map<string, string[]>; witness: Map<string, string> } {
  const layers = new Map<string, string[]>();
  const witness = new Map<string, string>();
  for (const [mod, deps] of graph) {
    const from = layerOf(mod);
    if (!layers.has(from)) layers.set(from, []);
    for (const dep of deps) {
      const to = layerOf(dep);
      if (to === from || !graph.has(dep)) continue;
      if (!layers.has(to)) layers.set(to, []);
      if (!witness.has(`${from} ${to}`)) {
        witness.set(`${from} ${to}`, `${mod} imports ${dep}`);
        layers.get(from)!.push(to);
      }
    }
  }
  return { graph: layers, witness };
}

export function violations(graph: Map<string, string[]>): string[] {
  const out: string[] = [];
  for (const cycle of findCycles(graph)) out.push(`import cycle: ${cycle.join(" → ")}`);
  const layers = layerGraph(graph);
  for (const cycle of findCycles(layers.graph)) {
    const hops = cycle.slice(1).map((to, i) => layers.witness.get(`${cycle[i]} ${to}`));
    out.push(`folder cycle: ${cycle.join(" → ")} (${hops.join("; ")})`);
  }
  for (const [mod, deps] of graph) {
    for (const dep of deps) {
      if (!graph.has(dep)) out.push(`${mod} imports ${dep}, which does not exist`);
      for (const r of RULES) if (r.from(mod) && !r.allowed(dep)) out.push(`${r.name}: ${mod} imports ${dep}`);
    }
  }
  return out;
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const graph = importGraph(walk(SRC));
  const found = violations(graph);
  if (found.length > 0) {
    for (const v of found) console.error(`check-imports: ${v}`);
    process.exit(1);
  }
  console.log(`check-imports: ${graph.size} modules under src/, no cycle (of modules or of folders), every layering rule holds`);
}
