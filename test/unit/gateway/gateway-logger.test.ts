// The gateway's JSON log lines: each names its component exactly once (issue 31, item 14),
// and secrets are redacted by path.
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { createLogger } from "../../../src/gateway/logger.js";

const dir = mkdtempSync(join(tmpdir(), "sg-logger-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function linesOf(write: (log: ReturnType<typeof createLogger>) => void): string[] {
  const file = join(dir, `log-${Math.random().toString(36).slice(2)}.jsonl`);
  const log = createLogger({ destination: file });
  write(log);
  log.flush();
  return readFileSync(file, "utf8").trim().split("\n");
}

const occurrences = (line: string, key: string): number => line.split(`"${key}":`).length - 1;

describe("the gateway's log lines", () => {
  it("name their component once: the gateway's own lines, a component's, and a component's child's", () => {
    const lines = linesOf((log) => {
      log.info("started");
      const audit = log.child({ component: "audit" });
      audit.warn({ sandboxId: "sbx_1" }, "dropped");
      audit.child({ sandboxId: "sbx_2" }).info("kept");
      log.child({ sandboxId: "sbx_3" }).info("no component of its own");
    });
    expect(lines.map((l) => occurrences(l, "component"))).toEqual([1, 1, 1, 1]);
    expect(lines.map((l) => (JSON.parse(l) as { component: string }).component)).toEqual(["gateway", "audit", "audit", "gateway"]);
  });

  it("redact tokens and authorization headers", () => {
    const [line] = linesOf((log) => log.info({ token: "s3cret", headers: { authorization: "Bearer s3cret" } }, "request"));
    expect(line).not.toContain("s3cret");
    expect(JSON.parse(line!)).toMatchObject({ token: "[redacted]", headers: { authorization: "[redacted]" } });
  });
});
