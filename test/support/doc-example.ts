// A documentation page's runnable example: the ```ts block after `<!-- example: NAME -->`,
// and the ```text block after it (what it prints), so a test runs the code as written.

import ts from "typescript";

export function docExample(page: string, name: string): { code: string; prints: string } {
  const start = page.indexOf(`<!-- example: ${name} -->`);
  if (start < 0) throw new Error(`no example ${name} in the page`);
  const m = /```ts\n([\s\S]*?)```[\s\S]*?```text\n([\s\S]*?)```/.exec(page.slice(start));
  if (!m) throw new Error(`the example ${name} has no ts block followed by a text block`);
  return { code: m[1]!, prints: m[2]! };
}

/** The example's TypeScript as an ES module Node runs (types stripped, nothing else changed). */
export function exampleModule(code: string): string {
  return ts.transpileModule(code, { compilerOptions: { target: ts.ScriptTarget.ES2022, module: ts.ModuleKind.ESNext } }).outputText;
}
