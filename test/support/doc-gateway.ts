// The gateway a docs page's example runs against: the local-exec TEST DOUBLE (real busybox
// programs, /sandbox a temp dir) behind a real gateway, started before the file's tests
// and closed after them.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll } from "vitest";
import { startTestGateway, type TestGateway } from "./gateway-fixture.js";
import { LocalExecDriver } from "./local-exec-driver.js";

export interface DocGateway {
  t: TestGateway;
  driver: LocalExecDriver;
  /** A scratch directory, removed after the tests. */
  dir: string;
}

/** Registers the hooks; the fields are set once beforeAll has run. */
export function docGateway(prefix: string): DocGateway {
  const g = {} as DocGateway;
  beforeAll(async () => {
    g.dir = mkdtempSync(join(tmpdir(), prefix));
    g.driver = new LocalExecDriver(join(g.dir, "ws"), g.dir);
    g.driver.processOptions = true;
    g.t = await startTestGateway(g.driver);
  });
  afterAll(async () => {
    await g.t.close();
    rmSync(g.dir, { recursive: true, force: true });
  });
  return g;
}
