// docs/sdk.md's complete example, as written: compiled by TypeScript (whose helpers run
// `await using`) and run by node against a live gateway on the local-exec TEST DOUBLE
// (real busybox programs, /sandbox a temp dir); it must print what the page says it
// prints and leave no sandbox behind (docs-types.test.ts type-checks it, with every
// TypeScript block of the docs, against the packed package). And the SDK's
// Symbol.asyncDispose: where a realm has none, TypeScript's `await using` fails
// without it and disposes with it.
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import vm from "node:vm";
import ts from "typescript";
import { describe, expect, it } from "vitest";
import { polyfillDisposal } from "../../../src/sdk/polyfill.js";
import { CLI_BUILD_DIR, PROJECT_ROOT } from "../../support/cli-build.js";
import { runNode } from "../../support/cli-runner.js";
import { docExample, exampleModule } from "../../support/doc-example.js";
import { docGateway } from "../../support/doc-gateway.js";

const SDK_IMPORT = "sandgate/sdk";

describe("docs/sdk.md", () => {
  const g = docGateway("sg-sdk-docs-");
  const example = docExample(readFileSync(join(PROJECT_ROOT, "docs", "sdk.md"), "utf8"), "agent-loop");

  it("runs as written: it prints what the page says, and its sandbox is gone when it ends", async () => {
    const js = exampleModule(example.code);
    // TypeScript's own `await using` helpers, not esbuild's.
    expect(js).toContain("__addDisposableResource");
    const sdk = pathToFileURL(join(CLI_BUILD_DIR, "sdk", "index.js")).href;
    expect(js).toContain(`from "${SDK_IMPORT}"`);
    const file = join(g.dir, "example.mjs");
    writeFileSync(file, js.replace(`from "${SDK_IMPORT}"`, `from ${JSON.stringify(sdk)}`));
    const run = await runNode([file], { cwd: g.dir, env: { ...process.env, SANDGATE_HOME: g.t.home.dir, SANDGATE_URL: undefined, SANDGATE_TOKEN: undefined } });
    expect(run.stderr).toBe("");
    expect(run.code).toBe(0);
    expect(run.stdout).toBe(example.prints);
    // Four steps, each `sh step.sh` in /sandbox with its STEP.
    const steps = g.driver.execOptions.filter((o) => o.cmd.join(" ") === "sh step.sh");
    expect(steps.map((o) => [o.cwd, o.env?.STEP])).toEqual([1, 2, 3, 4].map((n) => ["/sandbox", String(n)]));
    // `await using ... { dispose: "delete" }`: deleted at the end of the scope.
    expect((await g.t.api("GET", "/v1/sandboxes/sdk-example")).status).toBe(404);
  }, 120_000);
});

describe("Symbol.asyncDispose where a realm has none", () => {
  it("TypeScript's `await using` fails without it, and disposes (also on a throw) with the SDK's", async () => {
    const js = ts.transpileModule(
      `async function run(fail) {
        const log = [];
        try {
          await using r = { async [Symbol.asyncDispose]() { log.push("disposed"); } };
          log.push("body");
          if (fail) throw new Error("boom");
        } catch (err) {
          log.push(err.message);
        }
        return log;
      }`,
      { compilerOptions: { target: ts.ScriptTarget.ES2022, module: ts.ModuleKind.None } },
    ).outputText;
    // Node 24's realms all have it; Node 20's vm contexts did not: such a realm's Symbol is
    // emulated (the realm's own Symbol, wrapped, without asyncDispose and dispose).
    const realm = vm.createContext({});
    vm.runInContext(
      `{ const N = Symbol; const S = function Symbol(d) { return N(d); };
         for (const k of Object.getOwnPropertyNames(N)) if (!["asyncDispose", "dispose", "length", "name", "prototype"].includes(k)) S[k] = N[k];
         globalThis.Symbol = S; }`,
      realm,
    );
    expect(vm.runInContext("typeof Symbol.asyncDispose", realm)).toBe("undefined");
    vm.runInContext(js, realm);
    expect(await (vm.runInContext("run(false)", realm) as Promise<string[]>)).toEqual(["Symbol.asyncDispose is not defined."]);
    polyfillDisposal(vm.runInContext("Symbol", realm) as object);
    expect(vm.runInContext("Symbol.asyncDispose === Symbol.for('Symbol.asyncDispose')", realm)).toBe(true);
    expect(await (vm.runInContext("run(false)", realm) as Promise<string[]>)).toEqual(["body", "disposed"]);
    expect(await (vm.runInContext("run(true)", realm) as Promise<string[]>)).toEqual(["body", "disposed", "boom"]);
    // Where it is defined (every realm of Node 24, the main realm of Node 20) it is left as it is.
    const before = Symbol.asyncDispose;
    polyfillDisposal();
    expect(Symbol.asyncDispose).toBe(before);
  });
});
