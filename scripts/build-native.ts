// Build time only: compiles the supervisor's Node-API addon (native/orig-dst.c: the original
// destination of a redirected connection, which node has no API for) with the C compiler and
// the running node's headers. Node-API is stable across Node versions, so the one build serves
// whichever node the images carry. No node-gyp: one C file, no libraries.
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync } from "node:fs";
import { dirname, join } from "node:path";
import { PROJECT_ROOT } from "../src/driver/docker/supervisor-bundle.js";

export const ORIG_DST_SOURCE = join(PROJECT_ROOT, "native", "orig-dst.c");

/** Where node_api.h is: beside the running node (PREFIX/bin/node → PREFIX/include/node), else npm's nodedir. */
export function nodeIncludeDir(env: NodeJS.ProcessEnv = process.env): string {
  const candidates = [join(dirname(dirname(process.execPath)), "include", "node"), ...(env.npm_config_nodedir ? [join(env.npm_config_nodedir, "include", "node")] : []), "/usr/include/node"];
  const found = candidates.find((d) => existsSync(join(d, "node_api.h")));
  if (found === undefined) throw new Error(`node_api.h not found in ${candidates.join(", ")}: install node's headers (Debian: nodejs or libnode-dev) or set npm_config_nodedir`);
  return found;
}

export function buildOrigDstAddon(outFile: string): string {
  mkdirSync(dirname(outFile), { recursive: true });
  const cc = process.env.CC ?? "cc";
  try {
    execFileSync(cc, ["-O2", "-Wall", "-Wextra", "-Werror", "-shared", "-fPIC", "-I", nodeIncludeDir(), "-o", outFile, ORIG_DST_SOURCE], { stdio: ["ignore", "inherit", "inherit"] });
  } catch (err) {
    throw new Error(`cannot build the supervisor's addon ${outFile} with ${cc} (${(err as Error).message}); a C compiler is needed (Debian: gcc)`);
  }
  return outFile;
}
