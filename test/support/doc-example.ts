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

/** A fenced code block of a Markdown page. */
export interface CodeBlock {
  /** The info string's first word (`ts` of ```` ```ts ````), "" when there is none. */
  lang: string;
  code: string;
  /** The page's line (1-based) of the block's first line of code. */
  line: number;
  /** `<!-- example: NAME -->`'s NAME right before it, else the slug of the heading it is under (`-2`, `-3` for a second and third under one heading). */
  name: string;
}

const slug = (heading: string): string =>
  heading
    .toLowerCase()
    .replace(/[^a-z0-9 _-]/g, "")
    .trim()
    .replace(/ +/g, "-");

/**
 * Every fenced code block of a page, in order (CommonMark fences: three or more backticks or
 * tildes; a backtick fence's info string has no backtick, so ```` ```text ```` in a line of
 * prose opens nothing). Headings inside blocks are not headings.
 */
export function codeBlocks(page: string): CodeBlock[] {
  const lines = page.split("\n");
  const blocks: CodeBlock[] = [];
  const perHeading = new Map<string, number>();
  let heading = "";
  let example: string | undefined;
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!;
    const tag = /^\s*<!-- example: (\S+) -->\s*$/.exec(line);
    if (tag) {
      example = tag[1];
      continue;
    }
    const h = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (h) {
      heading = slug(h[1]!);
      example = undefined;
      continue;
    }
    const open = /^(\s*)(`{3,}|~{3,})(.*)$/.exec(line);
    if (!open || (open[2]!.startsWith("`") && open[3]!.includes("`"))) {
      if (line.trim() !== "") example = undefined;
      continue;
    }
    const [, indent, fence, info] = open as unknown as [string, string, string, string];
    const close = new RegExp(`^\\s*${fence[0]}{${fence.length},}\\s*$`);
    const body: string[] = [];
    let j = i + 1;
    for (; j < lines.length && !close.test(lines[j]!); j++) body.push(lines[j]!.startsWith(indent) ? lines[j]!.slice(indent.length) : lines[j]!.trimStart());
    let name = example;
    if (name === undefined) {
      const n = (perHeading.get(heading) ?? 0) + 1;
      perHeading.set(heading, n);
      name = n === 1 ? heading : `${heading}-${n}`;
    }
    blocks.push({ lang: info.trim().split(/\s+/)[0] ?? "", code: body.map((l) => `${l}\n`).join(""), line: i + 2, name });
    example = undefined;
    i = j;
  }
  return blocks;
}
