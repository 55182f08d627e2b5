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
    target: "node24",
    bundle: false,
    sourcemap: "linked",
    logLevel: "silent",
  });
  if (result.errors.length > 0) throw new Error(`building the CLI for tests failed: ${result.errors[0]?.text}`);
  if (relative(PROJECT_ROOT, CLI_BUILD_DIR).includes("/")) throw new Error("CLI_BUILD_DIR must sit directly under the project root");
}

/** package.json engines: the suite on an older node would test what no user runs. */
const NODE_MIN: readonly [number, number] = [24, 5];

export default async function setup(): Promise<void> {
  const [major = 0, minor = 0] = process.versions.node.split(".").map(Number);
  if (major < NODE_MIN[0] || (major === NODE_MIN[0] && minor < NODE_MIN[1])) {
    throw new Error(`the tests need Node ${NODE_MIN.join(".")} or later, and this is node ${process.version} (${process.execPath}): run them through scripts/test.sh, or source scripts/node-env.sh first`);
  }
  // A stray SANDGATE_HOME/URL/TOKEN of the developer is never used by tests.
  delete process.env.SANDGATE_HOME;
  delete process.env.SANDGATE_URL;
  delete process.env.SANDGATE_TOKEN;
  await buildCli();
}
