// `npx tsx scripts/settings-docs.ts`: writes the settings table (src/gateway/settings.ts)
// into docs/configuration.md, between its markers. test/unit/gateway/gateway-settings.test.ts
// fails when the two differ.
import { readFileSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { settingsDocTable } from "../src/gateway/settings.js";

export const CONFIGURATION_DOC = join(resolve(dirname(fileURLToPath(import.meta.url)), ".."), "docs", "configuration.md");
export const BEGIN = "<!-- settings table: generated from src/gateway/settings.ts by `npx tsx scripts/settings-docs.ts`; do not edit -->";
export const END = "<!-- end of settings table -->";

/** The doc's text with its table replaced by the one the settings table makes. */
export function withTable(doc: string): string {
  const a = doc.indexOf(BEGIN);
  const b = doc.indexOf(END);
  if (a < 0 || b < a) throw new Error(`${CONFIGURATION_DOC} has no settings table markers`);
  return `${doc.slice(0, a + BEGIN.length)}\n${settingsDocTable()}\n${doc.slice(b)}`;
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  writeFileSync(CONFIGURATION_DOC, withTable(readFileSync(CONFIGURATION_DOC, "utf8")));
}
