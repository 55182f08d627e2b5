// docs/cli.md is the CLI reference generated from the program itself: rendered again here, in
// memory, it must be what the file holds, or the file is out of date.
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { CLI_DOCS_COMMAND, CLI_DOCS_PATH, renderCliDocs } from "../../../scripts/gen-cli-docs.js";
import { buildProgram } from "../../../src/cli/program.js";

describe("docs/cli.md", () => {
  const rendered = renderCliDocs();

  it(`is what the program says of itself now (else run \`${CLI_DOCS_COMMAND}\` and commit docs/cli.md)`, () => {
    const onDisk = readFileSync(CLI_DOCS_PATH, "utf8");
    if (onDisk !== rendered) {
      const a = onDisk.split("\n");
      const b = rendered.split("\n");
      const i = a.findIndex((line, n) => line !== b[n]);
      const at = i < 0 ? Math.min(a.length, b.length) + 1 : i + 1;
      expect.fail(`docs/cli.md is out of date (first difference at line ${at}: ${JSON.stringify(a[at - 1] ?? "")} vs ${JSON.stringify(b[at - 1] ?? "")}); run \`${CLI_DOCS_COMMAND}\` and commit docs/cli.md`);
    }
  });

  it("has a section for every visible command, recursively, and every option of each", () => {
    const walk = (c: ReturnType<typeof buildProgram>, path: string[]): void => {
      const name = [...path, c.name()].join(" ");
      expect(rendered).toContain(`\`${name}\``);
      for (const o of c.options) if (!o.hidden) expect(rendered, `${name} ${o.flags}`).toContain(`| \`${o.flags}`);
      for (const s of c.createHelp().visibleCommands(c)) if (s.name() !== "help") walk(s, [...path, c.name()]);
    };
    walk(buildProgram(), []);
  });
});
