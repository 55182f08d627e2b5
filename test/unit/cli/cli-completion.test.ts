// `sandgate completion bash|zsh|fish`: scripts that parse, whose commands, options and
// choices are the commander program's own, and that complete sandbox names from a
// running gateway (real gateway on the in-memory driver test double) through the
// hidden `__complete-names`, which is silent and exits 0 when there is no gateway.

import { execFile } from "node:child_process";
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { Command, Help } from "commander";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildProgram } from "../../../src/cli/program.js";
import { completionScript, completionTree } from "../../../src/cli/completion.js";
import { CLI_COMMAND, cli } from "../../support/cli-runner.js";
import { MemoryDriver } from "../../support/memory-driver.js";
import { startTestGateway, type TestGateway } from "../../support/gateway-fixture.js";

const run = promisify(execFile);
const LONG = { timeout: 240_000 };

let dir: string;
let bashScript: string;
let zshScript: string;
let fishScript: string;
/** An empty directory: where a shell falls back to file names, it finds none. */
let emptyCwd: string;
beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "sg-completion-"));
  // `sandgate` on PATH, as the scripts call it back.
  writeFileSync(join(dir, "sandgate"), `#!/bin/sh\nexec ${CLI_COMMAND} "$@"\n`);
  chmodSync(join(dir, "sandgate"), 0o755);
  const r = await cli(["completion", "bash"]);
  expect(r.code, r.stderr).toBe(0);
  bashScript = join(dir, "sandgate.bash");
  writeFileSync(bashScript, r.stdout);
  for (const shell of ["zsh", "fish"] as const) {
    const s = await cli(["completion", shell]);
    expect(s.code, s.stderr).toBe(0);
    writeFileSync(join(dir, `sandgate.${shell}`), s.stdout);
  }
  zshScript = join(dir, "sandgate.zsh");
  fishScript = join(dir, "sandgate.fish");
  emptyCwd = join(dir, "empty");
  mkdirSync(emptyCwd);
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

/** The environment a shell completes in: our `sandgate` first on PATH, no gateway of the developer's. */
function shellEnv(env: Record<string, string>): Record<string, string> {
  const base = Object.fromEntries(Object.entries(process.env).filter(([k, v]) => v !== undefined && !["SANDGATE_URL", "SANDGATE_TOKEN", "SANDGATE_HOME"].includes(k))) as Record<string, string>;
  return { ...base, PATH: `${dir}:${process.env.PATH ?? ""}`, HOME: dir, ...env };
}

const shq = (w: string): string => `'${w.replace(/'/g, `'\\''`)}'`;
const fishq = (w: string): string => `'${w.replace(/\\/g, "\\\\").replace(/'/g, "\\'")}'`;
const END = "\x1e";

/**
 * What each shell offers for each command line (the last word is the one completed), all
 * from one process of that shell. bash: the function as `complete -F` calls it. zsh: the
 * function run as zsh's bash emulation runs it (bashcompinit's compgen calls it under
 * `emulate -L sh`), then matched against the word as zsh's own matcher does (that compgen
 * leaves the prefix to it). fish: its own completion engine (`complete -C`), without the
 * descriptions.
 */
async function completeIn(shell: "bash" | "zsh" | "fish", lines: string[][], env: Record<string, string> = {}): Promise<string[][]> {
  const file = join(dir, `probe-${shell}-${process.hrtime.bigint()}`);
  let script: string;
  let argv: string[];
  if (shell === "fish") {
    script = [`source ${fishq(fishScript)}`, ...lines.map((w) => `complete -C ${fishq(["sandgate", ...w].join(" "))}; echo ${END}`)].join("\n");
    argv = ["--no-config", file];
  } else {
    const show = shell === "bash" ? `printf '%s\\n' "\${COMPREPLY[@]}"` : "print -rl -- \${(M)COMPREPLY:#\${(b)\${@[-1]}}*}";
    const run = shell === "bash" ? "_sandgate" : "sg_run";
    script = [
      `source ${shq(shell === "bash" ? bashScript : zshScript)}`,
      "sg_run() { emulate -L sh; setopt kshglob noshglob braceexpand; _sandgate; }",
      `sg_probe() { COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); COMPREPLY=(); ${run}; ${show}; printf '${END}\\n'; }`,
      ...lines.map((w) => `sg_probe sandgate ${w.map(shq).join(" ")}`),
    ].join("\n");
    argv = shell === "zsh" ? ["-f", file] : [file];
  }
  writeFileSync(file, script + "\n");
  const { stdout } = await run(shell, argv, { env: shellEnv(env), cwd: emptyCwd, timeout: 120_000 });
  const out = stdout.split(`${END}\n`).slice(0, -1).map((block) => block.split("\n").filter(Boolean).map((l) => l.split("\t")[0]!));
  expect(out.length, `${shell} answered every line`).toBe(lines.length);
  return out;
}

describe("the scripts", () => {
  it("bash: parses (bash -n), is registered for sandgate", async () => {
    await run("bash", ["-n", bashScript]);
    const { stdout } = await run("bash", ["-c", `source "${bashScript}"; complete -p sandgate`]);
    expect(stdout.trim()).toBe("complete -o default -F _sandgate sandgate");
  });

  it("zsh: parses (zsh -n)", LONG, async () => {
    await run("zsh", ["-n", zshScript]);
    // Sourced, it registers sandgate with zsh's completion system (through bashcompinit).
    const { stdout } = await run("zsh", ["-f", "-c", 'source "$1"; print -r -- $_comps[sandgate]', "zsh", zshScript], { env: shellEnv({}), cwd: emptyCwd });
    expect(stdout.trim()).toBe("_bash_complete -o default -F _sandgate");
  });

  it("fish: parses (fish --no-execute)", LONG, async () => {
    await run("fish", ["--no-execute", fishScript]);
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
    expect(await complete(["completion", ""])).toEqual(["bash", "zsh", "fish"]);
    expect(await complete(["completion", "z"])).toEqual(["zsh"]);
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
    // start, stop and delete take several names: each position from the first on is one.
    expect(await complete(["--home", t.home.dir, "sandbox", "stop", "other", "cmp-a"])).toEqual(["cmp-alpha"]);
    expect(await complete(["--home", t.home.dir, "sandbox", "rm", "-f", "other", "cmp-alpha", "cmp-b"])).toEqual(["cmp-beta"]);
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

describe("zsh and fish offer what bash offers", () => {
  const program = buildProgram();
  const paths = (c: Command, path: string[] = []): string[][] => [path, ...c.commands.filter((s) => !(s as unknown as { _hidden: boolean })._hidden).flatMap((s) => paths(s, [...path, s.name()]))];
  /** Command lines whose last word is being completed: every command's words and options, choices, values, `--`. */
  const probes: string[][] = [
    ...paths(program).flatMap((p) => [[...p, ""], [...p, "-"]]),
    ["sandbox", "list", "--phase", "R"],
    ["sandbox", "ls", "--format", ""],
    ["sandbox", "ls", "--label", "a=b", "--fo"],
    ["sandbox", "create", "--image", "list", "--no-w"],
    ["sandbox", "exec", "x", "--", "--"],
    ["sandbox", "l"],
    ["po"],
    ["policy", "s"],
  ];
  const sorted = (r: string[][]): string[][] => r.map((c) => [...c].sort());

  it("zsh and fish: the same candidates as bash for every command's words and options, choices and values", LONG, async () => {
    const want = sorted(await completeIn("bash", probes));
    // The probes mean something: bash offers subcommands, options and choices among them.
    expect(want.filter((c) => c.length > 0).length).toBeGreaterThan(probes.length / 2);
    for (const shell of ["zsh", "fish"] as const) {
      const got = sorted(await completeIn(shell, probes));
      probes.forEach((words, i) => expect(got[i], `${shell}: sandgate ${words.join(" ")}`).toEqual(want[i]));
    }
  });

  describe("sandbox names from the gateway", () => {
    let t: TestGateway;
    beforeAll(async () => {
      t = await startTestGateway(new MemoryDriver());
      for (const name of ["shl-alpha", "shl-beta", "other"]) expect((await t.api("POST", "/v1/sandboxes", { name })).status).toBe(201);
      await t.gw.idle();
    });
    afterAll(() => t.close());

    for (const shell of ["zsh", "fish"] as const) {
      it(`${shell}: where a command takes an existing sandbox, from the gateway the line names`, LONG, async () => {
        const home = ["--home", t.home.dir];
        const got = sorted(
          await completeIn(shell, [
            [...home, "sandbox", "get", "shl-"],
            [...home, "policy", "get", "shl-b"],
            // Not where a new name is wanted, and not past the name's position.
            [...home, "sandbox", "create", "shl-"],
            [...home, "sandbox", "get", "other", "shl-"],
            // start, stop and delete take several names: each position from the first on is one.
            [...home, "sandbox", "stop", "other", "shl-a"],
          ]),
        );
        expect(got).toEqual([["shl-alpha", "shl-beta"], ["shl-beta"], [], [], ["shl-alpha"]]);
        expect(await completeIn(shell, [["sandbox", "delete", "o"]], { SANDGATE_HOME: t.home.dir })).toEqual([["other"]]);
      });
    }
  });
});
