// `sandgate completion bash|zsh|fish`: scripts that parse, whose commands, options and
// choices are the commander program's own, and that complete sandbox names from a
// running gateway (real gateway on the in-memory driver test double) through the
// hidden `__complete-names`, which is silent and exits 0 when there is no gateway.

import { execFile, execFileSync } from "node:child_process";
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { Command, Help } from "commander";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildProgram } from "../../src/cli/program.js";
import { completionScript, completionTree } from "../../src/cli/completion.js";
import { CLI_COMMAND, cli } from "../support/cli-runner.js";
import { MemoryDriver } from "../support/memory-driver.js";
import { startTestGateway, type TestGateway } from "../support/gateway-fixture.js";

const run = promisify(execFile);
const LONG = { timeout: 240_000 };
const has = (bin: string): boolean => {
  try {
    execFileSync("sh", ["-c", `command -v ${bin}`], { stdio: "ignore" });
    return true;
  } catch {
    return false;
  }
};

let dir: string;
let bashScript: string;
beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "sg-completion-"));
  // `sandgate` on PATH, as the scripts call it back.
  writeFileSync(join(dir, "sandgate"), `#!/bin/sh\nexec ${CLI_COMMAND} "$@"\n`);
  chmodSync(join(dir, "sandgate"), 0o755);
  const r = await cli(["completion", "bash"]);
  expect(r.code, r.stderr).toBe(0);
  bashScript = join(dir, "sandgate.bash");
  writeFileSync(bashScript, r.stdout);
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** What the bash function offers for a command line; the last word is the one completed. */
async function complete(words: string[], env: Record<string, string> = {}): Promise<string[]> {
  const script = `source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$((\${#COMP_WORDS[@]} - 1)); _sandgate; printf '%s\\n' "\${COMPREPLY[@]}"`;
  const base = Object.fromEntries(Object.entries(process.env).filter(([k]) => !["SANDGATE_URL", "SANDGATE_TOKEN", "SANDGATE_HOME"].includes(k)));
  base.PATH = `${dir}:${process.env.PATH ?? ""}`;
  const { stdout } = await run("bash", ["-c", script, "bash", bashScript, "sandgate", ...words], { env: { ...base, ...env }, timeout: 120_000 });
  return stdout.split("\n").filter(Boolean);
}

describe("the scripts", () => {
  it("bash: parses (bash -n), is registered for sandgate", async () => {
    await run("bash", ["-n", bashScript]);
    const { stdout } = await run("bash", ["-c", `source "${bashScript}"; complete -p sandgate`]);
    expect(stdout.trim()).toBe("complete -o default -F _sandgate sandgate");
  });

  it.skipIf(!has("zsh"))("zsh: parses (zsh -n)", LONG, async () => {
    const r = await cli(["completion", "zsh"]);
    writeFileSync(join(dir, "_sandgate"), r.stdout);
    await run("zsh", ["-n", join(dir, "_sandgate")]);
  });

  it.skipIf(!has("fish"))("fish: parses (fish --no-execute)", LONG, async () => {
    const r = await cli(["completion", "fish"]);
    writeFileSync(join(dir, "sandgate.fish"), r.stdout);
    await run("fish", ["--no-execute", join(dir, "sandgate.fish")]);
  });

  it("an unknown shell is exit 2 naming the choices", LONG, async () => {
    const r = await cli(["completion", "tcsh"]);
    expect(r.code).toBe(2);
    expect(r.stderr).toBe("sandgate: command-argument value 'tcsh' is invalid for argument 'shell'. Allowed choices are bash, zsh, fish. (run with --help for usage)\n");
  });

  it("the hidden command is in no script and no help", () => {
    const program = buildProgram();
    for (const shell of ["bash", "zsh", "fish"] as const) expect(completionScript(shell, program)).not.toContain("__complete-names'");
    expect(program.helpInformation()).not.toContain("__complete");
  });
});

describe("what bash completes comes from the commander program", () => {
  const program = buildProgram();
  const help = new Help();
  /** Every visible command with its path of canonical names. */
  const commands = (c: Command, path: string[] = []): [string[], Command][] => [
    [path, c],
    ...c.commands.filter((s) => !(s as unknown as { _hidden: boolean })._hidden).flatMap((s) => commands(s, [...path, s.name()])),
  ];

  it("every command's subcommands (with aliases) and every command's options, exactly", LONG, async () => {
    for (const [path, c] of commands(program)) {
      const subs = help.visibleCommands(c).flatMap((s) => [s.name(), ...s.aliases()]);
      if (subs.length > 0) expect((await complete([...path, ""])).sort(), path.join(" ")).toEqual([...subs].sort());
      const opts = help.visibleOptions(c).flatMap((o) => [o.short, o.long].filter(Boolean) as string[]);
      expect((await complete([...path, "-"])).sort(), path.join(" ")).toEqual([...opts].sort());
    }
  });

  it("a command added to the program is in its script: nothing is listed by hand", () => {
    const p = buildProgram();
    p.command("frobnicate").option("--wobble <level>", "how much").description("test only");
    const script = completionScript("bash", p);
    expect(script).toContain("'|frobnicate') REPLY='frobnicate'");
    expect(script).toContain("'frobnicate') REPLY=' --wobble '");
    expect(completionTree(p).find((n) => n.path === "frobnicate")?.options.map((o) => o.flags)).toEqual([["--wobble"], ["-h", "--help"]]);
  });

  it("option values: choices where the option has them; option values and aliases are skipped when finding the command", LONG, async () => {
    expect(await complete(["sandbox", "list", "--phase", "R"])).toEqual(["Ready", "Recovering"]);
    expect(await complete(["sandbox", "list", "--phase", "=", "St"])).toEqual(["Stopping", "Stopped"]);
    expect(await complete(["sandbox", "ls", "--format", ""])).toEqual(["table", "json", "yaml", "wide"]);
    expect(await complete(["sandbox", "ls", "--label", "a=b", "--fo"])).toEqual(["--format"]);
    expect(await complete(["completion", ""])).toEqual([]);
    // A value that happens to be a command's name is still a value.
    expect(await complete(["sandbox", "create", "--image", "list", "--no-w"])).toEqual(["--no-wait"]);
    // After -- comes the sandbox's own command line: nothing of ours.
    expect(await complete(["sandbox", "exec", "x", "--", "--"])).toEqual([]);
  });
});

describe("sandbox names from the gateway", () => {
  let t: TestGateway;
  beforeAll(async () => {
    t = await startTestGateway(new MemoryDriver());
    for (const name of ["cmp-alpha", "cmp-beta", "other"]) expect((await t.api("POST", "/v1/sandboxes", { name })).status).toBe(201);
    await t.gw.idle();
  });
  afterAll(() => t.close());

  it("__complete-names prints the names starting with the prefix, one per line", LONG, async () => {
    expect((await cli(["--home", t.home.dir, "__complete-names", "cmp-"])).stdout).toBe("cmp-alpha\ncmp-beta\n");
    expect((await cli(["--home", t.home.dir, "__complete-names"])).stdout).toBe("cmp-alpha\ncmp-beta\nother\n");
    expect((await cli(["--home", t.home.dir, "__complete-names", "zzz"])).stdout).toBe("");
  });

  it("in bash, where a command takes an existing sandbox, from the gateway the line names (--home or SANDGATE_HOME)", LONG, async () => {
    expect(await complete(["--home", t.home.dir, "sandbox", "get", "cmp-"])).toEqual(["cmp-alpha", "cmp-beta"]);
    expect(await complete(["sandbox", "delete", "o"], { SANDGATE_HOME: t.home.dir })).toEqual(["other"]);
    expect(await complete(["--home", t.home.dir, "policy", "get", "cmp-b"])).toEqual(["cmp-beta"]);
    expect(await complete(["--home", t.home.dir, "audit", "--tail", "5", "oth"])).toEqual(["other"]);
    // Not where a new name is wanted, and not past the name's position.
    expect(await complete(["--home", t.home.dir, "sandbox", "create", "cmp-"])).toEqual([]);
    expect(await complete(["--home", t.home.dir, "sandbox", "get", "other", "cmp-"])).toEqual([]);
  });

  it("no gateway, or a wrong token: no names, nothing on stderr, exit 0", LONG, async () => {
    const empty = mkdtempSync(join(tmpdir(), "sg-completion-none-"));
    try {
      for (const args of [["--home", empty], ["--url", "http://127.0.0.1:1"], ["--url", "not a url"]]) {
        const r = await cli([...args, "__complete-names", "x"]);
        expect(r, args.join(" ")).toEqual({ code: 0, stdout: "", stderr: "" });
      }
      const badToken = await cli(["--home", t.home.dir, "__complete-names"], { SANDGATE_TOKEN: "wrong" });
      expect(badToken).toEqual({ code: 0, stdout: "", stderr: "" });
      expect(await complete(["--home", empty, "sandbox", "get", ""])).toEqual([]);
    } finally {
      rmSync(empty, { recursive: true, force: true });
    }
  });
});

describe("names past the first page", () => {
  let t: TestGateway;
  /** List requests the gateway answered (its debug request log). */
  let listRequests = 0;
  beforeAll(async () => {
    t = await startTestGateway(new MemoryDriver(), {
      logSink: (line) => {
        const l = JSON.parse(line) as { msg?: string; method?: string; url?: string };
        if (l.msg === "request" && l.method === "GET" && l.url === "/v1/sandboxes") listRequests++;
      },
    });
    const names = [...Array.from({ length: 1200 }, (_, i) => `n-${String(i).padStart(4, "0")}`), "zz-last", "zz-more"];
    for (let i = 0; i < names.length; i += 50) {
      await Promise.all(names.slice(i, i + 50).map(async (name) => expect((await t.api("POST", "/v1/sandboxes", { name })).status).toBe(201)));
    }
    await t.gw.idle();
  }, 240_000);
  afterAll(() => t.close());

  it("start reading just before the prefix, so a name sorting after the first 1000 is found", LONG, async () => {
    listRequests = 0;
    expect((await cli(["--home", t.home.dir, "__complete-names", "zz-"])).stdout).toBe("zz-last\nzz-more\n");
    // One page, read from just before the prefix: not the 1000 names that sort before it.
    expect(listRequests).toBe(1);
    expect((await cli(["--home", t.home.dir, "__complete-names", "n-115"])).stdout).toBe(Array.from({ length: 10 }, (_, i) => `n-115${i}\n`).join(""));
  });
});
