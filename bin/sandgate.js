#!/usr/bin/env -S node --
// Thin launcher: runs the compiled CLI when built, else the TypeScript source via tsx.
// "node --" (the shebang): node reads no option of its own after it. Without it node takes
// NODE_OPTIONS from a `--env-file FILE` anywhere on the command line, and that flag here is
// the sandbox's (`sandbox create --env-file`), never the CLI's.
// Refuses an older node first, in one line: the code below it is built for Node 24, and
// 24.5 is the first whose http and https honour NODE_USE_ENV_PROXY (package.json engines).
const [major, minor] = process.versions.node.split(".").map(Number);
if (major < 24 || (major === 24 && minor < 5)) {
  process.stderr.write(
    `sandgate: needs Node.js 24.5 or later, and ${process.execPath} is node ${process.version}; ` +
      "scripts/setup.sh installs Node 24 into .cache/node/ (put its bin/ first on PATH: see README, Quickstart)\n",
  );
  process.exit(2);
}
const { existsSync } = await import("node:fs");
const { dirname, join } = await import("node:path");
const { fileURLToPath, pathToFileURL } = await import("node:url");

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const built = join(root, "dist", "cli", "main.js");
if (existsSync(built)) {
  await import(pathToFileURL(built).href);
} else {
  const { register } = await import("tsx/esm/api");
  register();
  await import(pathToFileURL(join(root, "src", "cli", "main.ts")).href);
}
