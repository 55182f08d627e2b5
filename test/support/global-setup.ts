// Runs once per test run, before any test file.
import { readdirSync } from "node:fs";
import { join, relative } from "node:path";
import { build } from "esbuild";
import { CLI_BUILD_DIR, PROJECT_ROOT } from "./cli-build.js";

/**
 * Compiles src/ file by file (no bundle, so the CLI keeps its lazy imports) into
 * CLI_BUILD_DIR for the tests that spawn the CLI: node loads plain JS about twice as
 * fast as it transpiles through tsx, and the suite spawns the CLI some 150 times. It is
 * rebuilt on every run so a test always runs the source it sits beside.
 */
async function buildCli(): Promise<void> {
  const src = join(PROJECT_ROOT, "src");
  const entryPoints = readdirSync(src, { recursive: true, encoding: "utf8" })
    .filter((f) => f.endsWith(".ts") && !f.endsWith(".d.ts"))
    .map((f) => join(src, f));
  const result = await build({
    entryPoints,
    outdir: CLI_BUILD_DIR,
    outbase: src,
    platform: "node",
    format: "esm",
    target: "node20",
    bundle: false,
    sourcemap: "linked",
    logLevel: "silent",
  });
  if (result.errors.length > 0) throw new Error(`building the CLI for tests failed: ${result.errors[0]?.text}`);
  if (relative(PROJECT_ROOT, CLI_BUILD_DIR).includes("/")) throw new Error("CLI_BUILD_DIR must sit directly under the project root");
}

export default async function setup(): Promise<void> {
  // A stray SANDGATE_HOME/URL/TOKEN of the developer is never used by tests.
  delete process.env.SANDGATE_HOME;
  delete process.env.SANDGATE_URL;
  delete process.env.SANDGATE_TOKEN;
  await buildCli();
}
