// Every TypeScript block of the docs (docs/*.md and README.md), type-checked with `strict`
// as an external project sees the SDK: the project is built as `npm run build` builds the
// SDK (tsconfig.sdk.json: dist/sdk's declarations) in a copy of the checkout, packed with
// `npm pack`, and the tarball unpacked into a temp project's node_modules/sandgate (its
// dependencies linked from this checkout's node_modules, as `npm install` would hoist them);
// `sandgate/sdk` resolves through the packed package.json's `exports`, never to src/.
// A block that is a fragment (it uses `sb`, `sg`, ... from the text around it) gets the
// prelude PRELUDES names for it: declarations of its free variables, nothing else.
import { execFileSync } from "node:child_process";
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, dirname, join } from "node:path";
import ts from "typescript";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PROJECT_ROOT } from "../../support/cli-build.js";
import { codeBlocks } from "../../support/doc-example.js";

const TS_LANGS = new Set(["ts", "typescript", "tsx", "mts", "cts"]);

/** Per block (page#name, codeBlocks' name): what its free variables are. "" for a whole module. */
const PRELUDES: Record<string, string> = {
  "docs/mcp.md#progress-a-command-longer-than-the-clients-timeout": `import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
declare const client: Client;`,
  "docs/mcp.md#mcp-agent-loop": "",
  "docs/sdk.md#the-typescript-sdk": "",
  "docs/sdk.md#agent-loop": "",
  "docs/sdk.md#sandboxes": `import type { Sandgate } from "sandgate/sdk";
declare const sg: Sandgate;
declare const policyYaml: string;`,
  "docs/sdk.md#exec": `import type { Sandbox } from "sandgate/sdk";
declare const sb: Sandbox;`,
  "docs/sdk.md#files": `import type { Sandbox } from "sandgate/sdk";
import * as fs from "node:fs";
import type { Writable } from "node:stream";
declare const sb: Sandbox;
declare const data: unknown;
declare const script: string;
declare const p: string;
declare const sink: Writable;`,
  "docs/sdk.md#logs": `import type { Sandbox } from "sandgate/sdk";
declare const sb: Sandbox;`,
  "docs/sdk.md#policy": `import type { Sandbox } from "sandgate/sdk";
declare const sb: Sandbox;
declare const yaml: string;`,
  "docs/sdk.md#watching": `import type { Sandgate } from "sandgate/sdk";
declare const sg: Sandgate;`,
};

interface DocBlock {
  /** page#name */
  id: string;
  page: string;
  line: number;
  code: string;
}

function docBlocks(): DocBlock[] {
  const pages = ["README.md", ...readdirSync(join(PROJECT_ROOT, "docs")).filter((f) => f.endsWith(".md")).sort().map((f) => `docs/${f}`)];
  return pages.flatMap((page) =>
    codeBlocks(readFileSync(join(PROJECT_ROOT, page), "utf8"))
      .filter((b) => TS_LANGS.has(b.lang))
      .map((b) => ({ id: `${page}#${b.name}`, page, line: b.line, code: b.code })),
  );
}

/** `npm` as this node's own (scripts/node-env.sh's layout), else the one on PATH. */
function npm(args: string[], cwd: string): string {
  const beside = join(dirname(process.execPath), "..", "lib", "node_modules", "npm", "bin", "npm-cli.js");
  const [file, argv] = existsSync(beside) ? [process.execPath, [beside, ...args]] : ["npm", args];
  return execFileSync(file, [...argv, "--offline", "--no-audit", "--no-fund", "--no-update-notifier"], { cwd, encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
}

/** What a checkout holds that is not the project's own (installed, built, cached, VCS). */
const NOT_COPIED = new Set(["node_modules", ".cache", ".git", "dist", ".test-build", "tmp", "reports", ".stryker-tmp"]);

/** Builds the SDK in a copy of the checkout and packs it; unpacks the tarball into `consumer`'s node_modules. */
function installPackedSdk(dir: string, consumer: string): { files: string[] } {
  const stage = join(dir, "stage");
  cpSync(PROJECT_ROOT, stage, { recursive: true, filter: (src) => !NOT_COPIED.has(basename(src)) || dirname(src) !== PROJECT_ROOT.replace(/\/$/, "") });
  symlinkSync(join(PROJECT_ROOT, "node_modules"), join(stage, "node_modules"));
  // scripts/build.ts's SDK step: its declarations into dist/.
  execFileSync(process.execPath, [join(stage, "node_modules", "typescript", "bin", "tsc"), "-p", "tsconfig.sdk.json"], { cwd: stage, stdio: ["ignore", "pipe", "pipe"] });
  const packed = JSON.parse(npm(["pack", "--json", "--pack-destination", dir], stage)) as { filename: string; files: { path: string }[] }[];
  const pkg = join(consumer, "node_modules", "sandgate");
  mkdirSync(pkg, { recursive: true });
  execFileSync("tar", ["-xzf", join(dir, packed[0]!.filename), "-C", pkg, "--strip-components=1"]);
  // Its dependencies as npm would hoist them, and the consumer's own @types/node.
  const manifest = JSON.parse(readFileSync(join(pkg, "package.json"), "utf8")) as { dependencies?: Record<string, string> };
  for (const dep of [...Object.keys(manifest.dependencies ?? {}), "@types/node"]) {
    mkdirSync(dirname(join(consumer, "node_modules", dep)), { recursive: true });
    symlinkSync(join(PROJECT_ROOT, "node_modules", dep), join(consumer, "node_modules", dep));
  }
  writeFileSync(join(consumer, "package.json"), JSON.stringify({ name: "consumer", private: true, type: "module" }));
  return { files: packed[0]!.files.map((f) => f.path) };
}

describe("the docs' TypeScript blocks, as an external project sees sandgate/sdk", () => {
  const blocks = docBlocks();
  let dir: string;
  let consumer: string;
  let packedFiles: string[];

  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), "sg-docs-types-"));
    consumer = join(dir, "consumer");
    packedFiles = installPackedSdk(dir, consumer).files;
  }, 120_000);
  afterAll(() => {
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it("every block found has a prelude here, and every prelude a block", () => {
    expect(blocks.map((b) => b.id)).toEqual(Object.keys(PRELUDES));
  });

  it("the package holds the SDK's declarations where its exports say", () => {
    const manifest = JSON.parse(readFileSync(join(consumer, "node_modules", "sandgate", "package.json"), "utf8")) as { exports: Record<string, { types: string; default: string }> };
    const types = manifest.exports["./sdk"]!.types.replace(/^\.\//, "");
    expect(types).toBe("dist/sdk/index.d.ts");
    expect(packedFiles).toContain(types);
  });

  it.each([
    ["NodeNext", ts.ModuleKind.NodeNext, ts.ModuleResolutionKind.NodeNext],
    ["Bundler", ts.ModuleKind.ESNext, ts.ModuleResolutionKind.Bundler],
  ])("every block type-checks with strict (moduleResolution %s)", (_, module, moduleResolution) => {
    const files = blocks.map((b, i) => {
      const prelude = PRELUDES[b.id] ?? "";
      const file = join(consumer, `block-${i}.ts`);
      writeFileSync(file, prelude === "" ? b.code : `${prelude}\n${b.code}`);
      return { file, block: b, offset: prelude === "" ? 0 : prelude.split("\n").length };
    });
    const program = ts.createProgram(
      files.map((f) => f.file),
      {
        target: ts.ScriptTarget.ES2022,
        module,
        moduleResolution,
        lib: ["lib.es2023.d.ts"],
        types: ["node"],
        strict: true,
        noEmit: true,
        // As `tsc --init` sets it. Without it the SDK's own declarations fail too: they import
        // `ws`, whose types (@types/ws) are a devDependency an installing project lacks.
        skipLibCheck: true,
      },
    );
    const problems = ts.getPreEmitDiagnostics(program).map((d) => {
      const text = ts.flattenDiagnosticMessageText(d.messageText, "\n");
      const at = files.find((f) => f.file === d.file?.fileName);
      if (!at || !d.file || d.start === undefined) return `${d.file?.fileName ?? "(no file)"}: ${text}`;
      const line = d.file.getLineAndCharacterOfPosition(d.start).line - at.offset;
      if (line < 0) return `${at.block.id}'s prelude, line ${line + at.offset + 1}: ${text}`;
      return `${at.block.page}:${at.block.line + line} (${at.block.id}): ${text}`;
    });
    expect(problems).toEqual([]);
    // `sandgate/sdk` was the packed package's declarations.
    expect(program.getSourceFiles().map((s) => s.fileName)).toContain(join(consumer, "node_modules", "sandgate", "dist", "sdk", "index.d.ts"));
  }, 120_000);
});
