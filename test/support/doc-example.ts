// A documentation page's runnable example: the ```ts block after `<!-- example: NAME -->`,
// and the ```text block after it (what it prints), so a test runs the code as written.

export function docExample(page: string, name: string): { code: string; prints: string } {
  const start = page.indexOf(`<!-- example: ${name} -->`);
  if (start < 0) throw new Error(`no example ${name} in the page`);
  const m = /```ts\n([\s\S]*?)```[\s\S]*?```text\n([\s\S]*?)```/.exec(page.slice(start));
  if (!m) throw new Error(`the example ${name} has no ts block followed by a text block`);
  return { code: m[1]!, prints: m[2]! };
}
