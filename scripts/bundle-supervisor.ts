// The supervisor runs in its image as one ESM file with no node_modules. `npm run build`
// can prebuild it at dist/supervisor/supervisor.mjs; otherwise it is bundled on demand
// into .cache/ (esbuild is a devDependency, so it is imported only on that path).
import { existsSync } from "node:fs";
import { mkdir } from "node:fs/promises";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

/** The repository (or installed package) root: this file is at {src,dist}/driver/docker/. */
export const PROJECT_ROOT = fileURLToPath(new URL("../../../", import.meta.url));
export const SUPERVISOR_ENTRY = join(PROJECT_ROOT, "src", "supervisor", "main.ts");
export const PREBUILT_SUPERVISOR_BUNDLE = join(PROJECT_ROOT, "dist", "supervisor", "supervisor.mjs");
export const CACHED_SUPERVISOR_BUNDLE = join(PROJECT_ROOT, ".cache", "supervisor", "supervisor.mjs");

// Bundled CommonJS dependencies may call require() for Node builtins; ESM has none.
const REQUIRE_BANNER = "import { createRequire as __sgCreateRequire } from 'module'; const require = __sgCreateRequire(import.meta.url);";

export interface BundleOptions {
  /** Default: src/supervisor/main.ts. */
  entry?: string;
  minify?: boolean;
}

/** Bundle the supervisor into outFile (one ESM file for node20). Returns outFile. */
export async function bundleSupervisor(outFile: string, opts: BundleOptions = {}): Promise<string> {
  let esbuild: typeof import("esbuild");
  try {
    esbuild = await import("esbuild");
  } catch (err) {
    throw new Error(
      `cannot bundle the supervisor: esbuild is not installed (${String(err)}); ` +
        `install dev dependencies or build ${PREBUILT_SUPERVISOR_BUNDLE} with npm run build`,
    );
  }
  await mkdir(dirname(outFile), { recursive: true });
  const result = await esbuild.build({
    entryPoints: [opts.entry ?? SUPERVISOR_ENTRY],
    outfile: outFile,
    platform: "node",
    format: "esm",
    bundle: true,
    target: "node20",
    minify: opts.minify ?? false,
    legalComments: "none",
    banner: { js: REQUIRE_BANNER },
    logLevel: "silent",
  });
  if (result.errors.length > 0) {
    throw new Error(`esbuild: ${result.errors.map((e) => e.text).join("; ")}`);
  }
  return outFile;
}

/** The prebuilt bundle when present, else a fresh bundle under .cache/supervisor/. */
export async function resolveSupervisorBundle(opts: { onProgress?: (msg: string) => void } = {}): Promise<string> {
  if (existsSync(PREBUILT_SUPERVISOR_BUNDLE)) return PREBUILT_SUPERVISOR_BUNDLE;
  opts.onProgress?.(`bundling the supervisor (${SUPERVISOR_ENTRY}) into ${CACHED_SUPERVISOR_BUNDLE}`);
  return bundleSupervisor(CACHED_SUPERVISOR_BUNDLE);
}
