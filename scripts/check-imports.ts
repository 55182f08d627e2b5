// `npm run check:imports` (part of the test command): the architecture's import
// rules, checked on every module under src/.
//   1. No import cycle, type-only imports included.
//   2. Contracts import no implementation: src/driver/contract.ts and src/protocol/
//      import only pure vocabulary (src/lifecycle, src/policy, the error family of
//      src/util/errors.ts) and each other; the API's
//      contracts (its request and response schemas, route table and OpenAPI document,
//      src/files/api.ts) import only that vocabulary, src/util, src/version.ts and each other.
//   3. Pure modules stay pure: src/lifecycle, src/policy and src/util import
//      nothing of the gateway, drivers, store, CLI or supervisor.
//   4. The supervisor (bundled alone into its image) imports only src/supervisor,
//      src/protocol, src/policy and src/util.
//   5. Nothing imports the CLI but the CLI; nothing outside src/gateway imports the
//      gateway, except the CLI (which starts it) and the Docker driver's home lookup.
//   6. The SDK (src/sdk, what a program imports) imports only itself, the pure
//      modules, src/files and the gateway's home lookup: never the CLI or the gateway.
//   7. The MCP server (src/mcp) imports only itself, the SDK and the pure modules: it
//      reaches the gateway as a client, never through the gateway's or the CLI's code.
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

/** The API's contracts: what the OpenAPI document is generated from. */
export const API_CONTRACTS = ["src/gateway/api/schemas.ts", "src/gateway/api/responses.ts", "src/gateway/api/routes.ts", "src/gateway/api/openapi.ts", "src/files/api.ts", "src/version.ts"];

export const RULES: Rule[] = [
  { name: "contracts import no implementation", from: (m) => m === "src/driver/contract.ts" || under("protocol")(m), allowed: (d) => under("lifecycle", "policy", "protocol")(d) || d === "src/util/errors.ts" },
  { name: "API contracts import no implementation", from: (m) => API_CONTRACTS.includes(m), allowed: (d) => under("lifecycle", "policy", "util")(d) || API_CONTRACTS.includes(d) },
  { name: "pure modules stay pure", from: under("lifecycle", "policy", "util"), allowed: under("lifecycle", "policy", "util") },
  { name: "the supervisor is self-contained", from: under("supervisor"), allowed: under("supervisor", "protocol", "policy", "util") },
  { name: "the SDK stands alone", from: under("sdk"), allowed: (d) => under("sdk", "files", "lifecycle", "policy", "util")(d) || d === "src/gateway/home.ts" },
  { name: "the MCP server is a client of the SDK", from: under("mcp"), allowed: under("mcp", "sdk", "lifecycle", "policy", "util", "version") },
  { name: "only the CLI imports the CLI", from: (m) => !under("cli")(m), allowed: (d) => !under("cli")(d) },
  {
    name: "the gateway is imported only by itself and the CLI",
    from: (m) => !under("gateway", "cli")(m),
    // The Docker driver reads the gateway id from the home directory.
    allowed: (d) => !under("gateway")(d) || d === "src/gateway/home.ts",
  },
];

export function violations(graph: Map<string, string[]>): string[] {
  const out: string[] = [];
  for (const cycle of findCycles(graph)) out.push(`import cycle: ${cycle.join(" → ")}`);
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
  console.log(`check-imports: ${graph.size} modules under src/, no cycle, every layering rule holds`);
}
