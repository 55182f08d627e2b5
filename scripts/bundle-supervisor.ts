// Build time only: bundles the supervisor into one ESM file for node24 (esbuild is a
// devDependency; the gateway never imports it). `npm run build` writes the bundle
// the gateway puts into the supervisor image (src/driver/docker/supervisor-bundle.ts).
import { mkdir } from "node:fs/promises";
import { dirname, join } from "node:path";
import { build } from "esbuild";
import { PROJECT_ROOT } from "../src/driver/docker/supervisor-bundle.js";

export const SUPERVISOR_ENTRY = join(PROJECT_ROOT, "src", "supervisor", "main.ts");

// Bundled CommonJS dependencies may call require() for Node builtins; ESM has none.
const REQUIRE_BANNER = "import { createRequire as __sgCreateRequire } from 'module'; const require = __sgCreateRequire(import.meta.url);";

export interface BundleOptions {
  /** Default: src/supervisor/main.ts. */
  entry?: string;
  /** Also shorten identifiers (stack traces get harder to read). Default false. */
  minify?: boolean;
}

/** Bundle the supervisor into outFile (one ESM file for node24). Returns outFile. */
export async function bundleSupervisor(outFile: string, opts: BundleOptions = {}): Promise<string> {
  await mkdir(dirname(outFile), { recursive: true });
  const result = await build({
    entryPoints: [opts.entry ?? SUPERVISOR_ENTRY],
    outfile: outFile,
    platform: "node",
    format: "esm",
    bundle: true,
    target: "node24",
    // Whitespace and syntax always: V8 keeps the whole source in every supervisor's heap
    // (about 3 MiB of an idle supervisor's own memory); names stay readable in stack traces.
    minifyWhitespace: true,
    minifySyntax: true,
    minifyIdentifiers: opts.minify ?? false,
    legalComments: "none",
    banner: { js: REQUIRE_BANNER },
    logLevel: "silent",
  });
  if (result.errors.length > 0) {
    throw new Error(`esbuild: ${result.errors.map((e) => e.text).join("; ")}`);
  }
  return outFile;
}
