// The Store contract (test/support/store-contract.ts) on the embedded SQLite store, each test on a file of its own.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll } from "vitest";
import { SqliteStore } from "../../../src/store/store.js";
import { storeContract } from "../../support/store-contract.js";

const dir = mkdtempSync(join(tmpdir(), "sg-store-contract-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
let n = 0;

storeContract("SQLite", (opts) => Promise.resolve(SqliteStore.open(join(dir, `state-${n++}.db`), opts)));
