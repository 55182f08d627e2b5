// The architecture's import rules (scripts/check-imports.ts) on synthetic graphs,
// and on the real tree.
import { describe, expect, it } from "vitest";
import { findCycles, importsOf, layerOf, violations } from "../../../scripts/check-imports.js";

const g = (edges: Record<string, string[]>): Map<string, string[]> => new Map(Object.entries(edges));

describe("importsOf", () => {
  it("sees every form of a relative import, and no package or string that only looks like one", () => {
    const text = [
      'import { a } from "./a.js";',
      'import type { B } from "../b.js";',
      "import {\n  c,\n  d,\n} from './c.js';",
      'import "./side-effect.js";',
      'export * from "./e.js";',
      'export { f } from "./f.js";',
      'const g = await import("./g.js");',
      'import { z } from "zod";',
      'import "node:fs";',
      'const s = "import ./not.js";',
    ].join("\n");
    expect(importsOf(text)).toEqual(["./a.js", "../b.js", "./c.js", "./side-effect.js", "./e.js", "./f.js", "./g.js"]);
  });
});

describe("findCycles", () => {
  it("finds a two-module cycle and a longer one, once each", () => {
    const cycles = findCycles(g({ "src/a.ts": ["src/b.ts"], "src/b.ts": ["src/a.ts", "src/c.ts"], "src/c.ts": ["src/d.ts"], "src/d.ts": ["src/c.ts", "src/e.ts"], "src/e.ts": ["src/c.ts"] }));
    expect(cycles.map((c) => c.join(">"))).toEqual(["src/a.ts>src/b.ts>src/a.ts", "src/c.ts>src/d.ts>src/c.ts", "src/c.ts>src/d.ts>src/e.ts>src/c.ts"]);
  });

  it("a DAG has none, a self-import is one", () => {
    expect(findCycles(g({ "src/a.ts": ["src/b.ts", "src/c.ts"], "src/b.ts": ["src/c.ts"], "src/c.ts": [] }))).toEqual([]);
    expect(findCycles(g({ "src/a.ts": ["src/a.ts"] }))).toEqual([["src/a.ts", "src/a.ts"]]);
  });
});

describe("layering rules", () => {
  it("names each broken rule", () => {
    const found = violations(
      g({
        "src/driver/contract.ts": ["src/driver/docker/docker-driver.ts"],
        "src/driver/docker/docker-driver.ts": ["src/gateway/sandboxes/service.ts"],
        "src/gateway/sandboxes/service.ts": [],
        "src/policy/evaluate.ts": ["src/store/store.ts"],
        "src/store/store.ts": [],
        "src/supervisor/proxy.ts": ["src/gateway/control/boundary.ts"],
        "src/gateway/control/boundary.ts": [],
        "src/protocol/wire.ts": ["src/util/missing.ts"],
        "src/sdk/exec.ts": ["src/cli/exec-options.ts", "src/gateway/api/exec-ws.ts", "src/home.ts", "src/files/api.ts"],
        "src/cli/exec-options.ts": [],
        "src/gateway/api/exec-ws.ts": [],
        "src/home.ts": [],
        "src/files/api.ts": [],
      }),
    );
    expect(found).toEqual([
      "contracts import no implementation: src/driver/contract.ts imports src/driver/docker/docker-driver.ts",
      "the gateway is imported only by itself and the CLI: src/driver/docker/docker-driver.ts imports src/gateway/sandboxes/service.ts",
      "pure modules stay pure: src/policy/evaluate.ts imports src/store/store.ts",
      "the supervisor is self-contained: src/supervisor/proxy.ts imports src/gateway/control/boundary.ts",
      "the gateway is imported only by itself and the CLI: src/supervisor/proxy.ts imports src/gateway/control/boundary.ts",
      "src/protocol/wire.ts imports src/util/missing.ts, which does not exist",
      "contracts import no implementation: src/protocol/wire.ts imports src/util/missing.ts",
      "the SDK stands alone: src/sdk/exec.ts imports src/cli/exec-options.ts",
      "only the CLI imports the CLI: src/sdk/exec.ts imports src/cli/exec-options.ts",
      "the SDK stands alone: src/sdk/exec.ts imports src/gateway/api/exec-ws.ts",
      "the gateway is imported only by itself and the CLI: src/sdk/exec.ts imports src/gateway/api/exec-ws.ts",
    ]);
  });

  it("the API's contracts (src/api, the OpenAPI document's sources) import only vocabulary and each other", () => {
    const found = violations(
      g({
        "src/api/routes.ts": ["src/api/schemas.ts", "src/api/responses.ts", "src/api/route-contract.ts", "src/files/api.ts", "src/lifecycle/spec.ts"],
        "src/api/route-contract.ts": ["src/lifecycle/spec.ts"],
        "src/api/schemas.ts": ["src/policy/index.ts", "src/lifecycle/spec.ts"],
        "src/api/responses.ts": ["src/gateway/errors.ts"],
        "src/api/openapi.ts": ["src/api/routes.ts", "src/version.ts", "src/gateway/api/register.ts"],
        "src/gateway/api/register.ts": ["src/api/routes.ts"],
        "src/gateway/errors.ts": [],
        "src/files/api.ts": [],
        "src/version.ts": [],
        "src/policy/index.ts": [],
        "src/lifecycle/spec.ts": [],
      }),
    );
    expect(found).toEqual([
      // The gateway imports the contracts, the contracts import the gateway: a loop of folders.
      "folder cycle: src/api → src/gateway → src/api (src/api/responses.ts imports src/gateway/errors.ts; src/gateway/api/register.ts imports src/api/routes.ts)",
      "API contracts import no implementation: src/api/responses.ts imports src/gateway/errors.ts",
      "the gateway is imported only by itself and the CLI: src/api/responses.ts imports src/gateway/errors.ts",
      "API contracts import no implementation: src/api/openapi.ts imports src/gateway/api/register.ts",
      "the gateway is imported only by itself and the CLI: src/api/openapi.ts imports src/gateway/api/register.ts",
    ]);
  });

  it("what others need of the gateway is a contract: the SDK and the driver may import src/api and src/home.ts, never the gateway; src/home.ts is pure", () => {
    const found = violations(
      g({
        "src/sdk/types.ts": ["src/api/responses.ts", "src/api/schemas.ts"],
        "src/sdk/transport.ts": ["src/home.ts", "src/gateway/home.ts"],
        "src/driver/docker/docker-driver.ts": ["src/home.ts", "src/gateway/home.ts"],
        "src/api/responses.ts": [],
        "src/api/schemas.ts": [],
        "src/home.ts": ["src/util/settings.ts", "src/store/store.ts"],
        "src/util/settings.ts": [],
        "src/store/store.ts": [],
        "src/gateway/home.ts": [],
      }),
    );
    expect(found).toEqual([
      "the SDK stands alone: src/sdk/transport.ts imports src/gateway/home.ts",
      "the gateway is imported only by itself and the CLI: src/sdk/transport.ts imports src/gateway/home.ts",
      "the gateway is imported only by itself and the CLI: src/driver/docker/docker-driver.ts imports src/gateway/home.ts",
      "pure modules stay pure: src/home.ts imports src/store/store.ts",
    ]);
  });

  it("the gateway holds the store's interface; only gateway.ts opens the SQLite store, and the contract imports no implementation", () => {
    const found = violations(
      g({
        "src/gateway/gateway.ts": ["src/store/store.ts"],
        "src/gateway/sandboxes/service.ts": ["src/store/contract.ts", "src/store/store.ts"],
        "src/gateway/secrets/secret-store.ts": ["src/store/secrets-store.ts"],
        "src/store/contract.ts": ["src/driver/contract.ts", "src/lifecycle/phases.ts", "src/store/statements.ts"],
        "src/store/store.ts": ["src/store/contract.ts", "src/store/secrets-store.ts"],
        "src/store/secrets-store.ts": [],
        "src/store/statements.ts": [],
        "src/driver/contract.ts": [],
        "src/lifecycle/phases.ts": [],
      }),
    );
    expect(found).toEqual([
      "the gateway reaches the store through its contract: src/gateway/sandboxes/service.ts imports src/store/store.ts",
      "the gateway reaches the store through its contract: src/gateway/secrets/secret-store.ts imports src/store/secrets-store.ts",
      "the store's contract imports no implementation: src/store/contract.ts imports src/store/statements.ts",
    ]);
  });
});

describe("folder cycles", () => {
  it("a module's layer is its top-level folder of src/, or itself at the top", () => {
    expect(layerOf("src/driver/docker/engine/client.ts")).toBe("src/driver");
    expect(layerOf("src/home.ts")).toBe("src/home");
  });

  it("finds a loop of folders that no single module closes (store → driver → files → store), naming an import for each hop", () => {
    // No module cycle and no layering rule broken: only the folders loop.
    const graph = g({
      "src/store/store.ts": ["src/driver/contract.ts"],
      "src/driver/contract.ts": [],
      "src/driver/docker/archive.ts": ["src/files/members.ts"],
      "src/files/members.ts": [],
      "src/files/tar-stream.ts": ["src/store/store.ts"],
    });
    expect(findCycles(graph)).toEqual([]);
    expect(violations(graph)).toEqual([
      "folder cycle: src/driver → src/files → src/store → src/driver (src/driver/docker/archive.ts imports src/files/members.ts; src/files/tar-stream.ts imports src/store/store.ts; src/store/store.ts imports src/driver/contract.ts)",
    ]);
  });

  it("folders importing each other one way only are no cycle", () => {
    expect(
      violations(
        g({
          "src/store/store.ts": ["src/driver/contract.ts"],
          "src/driver/contract.ts": [],
          "src/gateway/gateway.ts": ["src/store/store.ts", "src/driver/contract.ts"],
        }),
      ),
    ).toEqual([]);
  });
});
