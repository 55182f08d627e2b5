// The README is a newcomer's page: short, the quickstart exactly two commands (the demo and the
// whole test suite, which .ci/run runs as written), and every page it and the docs link to there.
import { existsSync, readFileSync, readdirSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "../../..");
const read = (p: string): string => readFileSync(join(ROOT, p), "utf8");
const readme = read("README.md");

/** GitHub's anchor for a heading. */
const slug = (heading: string): string =>
  heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, "")
    .replace(/\s/g, "-");
const anchorsOf = (text: string): Set<string> => new Set([...text.matchAll(/^#{1,6}\s+(.+)$/gm)].map((m) => slug(m[1]!)));

describe("README.md", () => {
  it("is under 250 lines", () => {
    expect(readme.trimEnd().split("\n").length).toBeLessThan(250);
  });

  it("has a Quickstart of exactly two commands, the demo and the whole test suite; .ci/run runs the second", () => {
    const quick = /^## Quickstart\n([\s\S]*?)^## /m.exec(readme)?.[1] ?? "";
    const block = /```sh\n([\s\S]*?)```/.exec(quick)?.[1] ?? "";
    const commands = block
      .split("\n")
      .map((l) => l.replace(/\s+#.*$/, "").trim())
      .filter(Boolean);
    expect(commands).toEqual(["bash scripts/demo.sh", "bash scripts/test.sh"]);
    expect(read(".ci/run")).toMatch(/^exec bash scripts\/test\.sh$/m);
  });

  it("points to the CHANGELOG and the generated CLI reference", () => {
    expect(readme).toContain("](CHANGELOG.md)");
    expect(readme).toContain("](docs/cli.md)");
    expect(readme).not.toMatch(/^#+ What changed/m);
  });
});

describe("links between the README, the CHANGELOG and docs/", () => {
  const pages = ["README.md", "CHANGELOG.md", ...readdirSync(join(ROOT, "docs")).filter((f) => f.endsWith(".md")).map((f) => `docs/${f}`)];
  for (const page of pages) {
    it(`${page}: every relative link names a file that exists, and a heading where it names one`, () => {
      const text = read(page);
      const broken: string[] = [];
      for (const m of text.matchAll(/\]\(([^)\s]+)\)/g)) {
        const target = m[1]!;
        if (/^[a-z]+:/.test(target)) continue; // https:, mailto:
        const [file, anchor] = target.split("#") as [string, string | undefined];
        const path = file === "" ? page : join(dirname(page), file);
        if (!existsSync(join(ROOT, path))) {
          broken.push(`${target} (no ${path})`);
          continue;
        }
        if (anchor && path.endsWith(".md") && !anchorsOf(read(path)).has(anchor)) broken.push(`${target} (no heading #${anchor} in ${path})`);
      }
      expect(broken).toEqual([]);
    });
  }
});
