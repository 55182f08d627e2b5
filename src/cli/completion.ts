// `sandgate completion bash|zsh|fish`: a completion script for the shell. Commands,
// subcommands, options and option choices are read from the commander program itself
// (what `--help` shows), so the script cannot drift from the CLI; sandbox names come
// from the gateway at completion time through the hidden `sandgate __complete-names
// PREFIX`, which prints nothing (and exits 0) when the gateway does not answer.

import { Argument, Command, Help, type Option } from "commander";
import { GatewayClient } from "./client.js";
import type { SandboxSummaryView } from "../sdk/types.js";
import { checkSandboxName } from "../lifecycle/spec.js";
import { VERSION } from "../version.js";

export const SHELLS = ["bash", "zsh", "fish"] as const;
type Shell = (typeof SHELLS)[number];

/** Names offered at most per completion (pages of the list API), and the time to find them. */
export const COMPLETE_NAMES = { pageSize: 1000, pages: 5, timeoutMs: 2000 };

export interface CompletionOption {
  flags: string[];
  /** It takes a value (`--limit <n>`). */
  value: boolean;
  choices: string[] | null;
  description: string;
}

export interface CompletionNode {
  /** Canonical command names from the root ("" is the root). */
  path: string;
  commands: { name: string; aliases: string[]; description: string }[];
  options: CompletionOption[];
  /** Index of the positional argument that is a sandbox's name or id, or -1. */
  sandboxArg: number;
  /** That argument is variadic (`delete <names...>`): every position from it on is a name. */
  sandboxArgVariadic: boolean;
  /** Positional arguments with a fixed set of values (`completion <shell>`), by index. */
  argChoices: { index: number; choices: string[] }[];
}

/**
 * An argument that names an existing sandbox: the CLI's arguments say so in their
 * description ("sandbox name or id"; `watch [name]`: "only this sandbox"). A new
 * sandbox's name (create) or a secret's name is not one.
 */
export function namesSandbox(a: Argument): boolean {
  return /^(sandbox names? or ids?|only this sandbox)$/.test(a.description);
}

/** Every visible command of the program, depth first, with what completes at it. */
export function completionTree(program: Command): CompletionNode[] {
  const help = new Help();
  const nodes: CompletionNode[] = [];
  const visit = (cmd: Command, path: string): void => {
    const commands = help.visibleCommands(cmd);
    nodes.push({
      path,
      commands: commands.map((c) => ({ name: c.name(), aliases: c.aliases(), description: c.description() })),
      options: help.visibleOptions(cmd).map((o: Option) => ({
        flags: [o.short, o.long].filter((f): f is string => !!f),
        value: o.required || o.optional,
        choices: o.argChoices ? [...o.argChoices] : null,
        description: o.description,
      })),
      sandboxArg: cmd.registeredArguments.findIndex(namesSandbox),
      sandboxArgVariadic: cmd.registeredArguments.some((a) => namesSandbox(a) && a.variadic),
      argChoices: cmd.registeredArguments.flatMap((a, index) => (a.argChoices ? [{ index, choices: [...a.argChoices] }] : [])),
    });
    // The implicit `help` command has no subcommands of its own to visit.
    for (const c of cmd.commands) if (!(c as unknown as { _hidden: boolean })._hidden) visit(c, path ? `${path} ${c.name()}` : c.name());
  };
  visit(program, "");
  return nodes;
}

/** Where a node's sandbox name goes, as the scripts read it: "1", or "1+" when variadic. */
const nameAt = (n: CompletionNode): string => `${n.sandboxArg}${n.sandboxArgVariadic ? "+" : ""}`;

/** A word in single quotes for sh (bash, zsh) or fish. */
const shq = (s: string): string => `'${s.replace(/'/g, `'\\''`)}'`;
const fishq = (s: string): string => `'${s.replace(/\\/g, "\\\\").replace(/'/g, "\\'")}'`;

/** A `case` over the nodes: pattern(s) → REPLY='...'; REPLY=default otherwise. */
function shCase(fn: string, subject: string, arms: [patterns: string[], reply: string][], fallback: string): string {
  const lines = arms.filter(([p]) => p.length > 0).map(([p, r]) => `    ${p.map(shq).join("|")}) REPLY=${shq(r)} ;;`);
  return `${fn}() {\n  case ${subject} in\n${lines.join("\n")}\n    *) REPLY=${shq(fallback)} ;;\n  esac\n}`;
}

function bashScript(nodes: CompletionNode[]): string {
  const sub = shCase(
    "_sandgate_sub",
    `"$1|$2"`,
    nodes.flatMap((n) => n.commands.map((c) => [[c.name, ...c.aliases].map((w) => `${n.path}|${w}`), c.name] as [string[], string])),
    "",
  );
  const words = shCase("_sandgate_words", `"$1"`, nodes.filter((n) => n.commands.length > 0).map((n) => [[n.path], n.commands.flatMap((c) => [c.name, ...c.aliases]).join(" ")]), "");
  const opts = shCase("_sandgate_opts", `"$1"`, nodes.map((n) => [[n.path], n.options.flatMap((o) => o.flags).join(" ")]), "");
  const valopts = shCase("_sandgate_valopts", `"$1"`, nodes.map((n) => [[n.path], ` ${n.options.filter((o) => o.value).flatMap((o) => o.flags).join(" ")} `]), " ");
  const choices = shCase(
    "_sandgate_choices",
    `"$1|$2"`,
    nodes.flatMap((n) => n.options.filter((o) => o.choices).map((o) => [o.flags.map((f) => `${n.path}|${f}`), o.choices!.join(" ")] as [string[], string])),
    "",
  );
  const namearg = shCase("_sandgate_namearg", `"$1"`, nodes.filter((n) => n.sandboxArg >= 0).map((n) => [[n.path], nameAt(n)]), "-1");
  const argchoices = shCase("_sandgate_argchoices", `"$1|$2"`, nodes.flatMap((n) => n.argChoices.map((a) => [[`${n.path}|${a.index}`], a.choices.join(" ")] as [string[], string])), "");
  return `# sandgate ${VERSION} completion for bash, generated by \`sandgate completion bash\` from the CLI itself.
# Now:        source <(sandgate completion bash)
# Every shell: sandgate completion bash > ~/.local/share/bash-completion/completions/sandgate
# Sandbox names come from the gateway (\`sandgate __complete-names\`); none when it is not running.

${sub}

${words}

${opts}

${valopts}

${choices}

${namearg}

${argchoices}

# The command so far is "cmd", never "path": zsh, which runs this function, ties "path" to PATH.
_sandgate() {
  local cur=\${COMP_WORDS[COMP_CWORD]} cmd= pos=0 skip=0 opt= i w
  local -a globals=()
  COMPREPLY=()
  for ((i = 1; i < COMP_CWORD; i++)); do
    w=\${COMP_WORDS[i]}
    if ((skip)); then
      # bash splits --opt=value at '=' (COMP_WORDBREAKS): the value follows it.
      [[ $w == = ]] && continue
      skip=0
      [[ -z $cmd && ( $opt == --home || $opt == --url ) ]] && globals+=("$opt" "$w")
      continue
    fi
    case $w in
      --) return 0 ;;
      --home=*|--url=*) [[ -z $cmd ]] && globals+=("$w"); continue ;;
      -*)
        _sandgate_valopts "$cmd"
        if [[ $w != *=* && $REPLY == *" $w "* ]]; then skip=1; opt=$w; fi
        continue ;;
    esac
    _sandgate_sub "$cmd" "$w"
    if [[ -n $REPLY ]]; then cmd=\${cmd:+$cmd }$REPLY; pos=0; else pos=$((pos + 1)); fi
  done
  [[ $cur == = ]] && cur=
  if ((skip)); then
    _sandgate_choices "$cmd" "$opt"
    [[ -n $REPLY ]] && COMPREPLY=($(compgen -W "$REPLY" -- "$cur"))
    return 0
  fi
  if [[ $cur == -* ]]; then
    _sandgate_opts "$cmd"
    COMPREPLY=($(compgen -W "$REPLY" -- "$cur"))
    return 0
  fi
  _sandgate_words "$cmd"
  if [[ -n $REPLY ]]; then
    COMPREPLY=($(compgen -W "$REPLY" -- "$cur"))
    return 0
  fi
  _sandgate_argchoices "$cmd" "$pos"
  if [[ -n $REPLY ]]; then
    COMPREPLY=($(compgen -W "$REPLY" -- "$cur"))
    return 0
  fi
  _sandgate_namearg "$cmd"
  if [[ $REPLY == "$pos" || ( $REPLY == *+ && $pos -ge \${REPLY%+} ) ]]; then
    COMPREPLY=($(compgen -W "$(command sandgate "\${globals[@]}" __complete-names "$cur" 2>/dev/null)" -- "$cur"))
  fi
  return 0
}

complete -o default -F _sandgate sandgate
`;
}

/** zsh runs the bash script through its bash-completion emulation (bashcompinit). */
function zshScript(nodes: CompletionNode[]): string {
  return `#compdef sandgate
# sandgate ${VERSION} completion for zsh, generated by \`sandgate completion zsh\` from the CLI itself.
# Now:        source <(sandgate completion zsh)
# Every shell: sandgate completion zsh > "\${fpath[1]}/_sandgate"   (then: compinit)
autoload -U +X compinit && compinit
autoload -U +X bashcompinit && bashcompinit

${bashScript(nodes).replace(/^#.*\n/gm, "")}`;
}

function fishScript(nodes: CompletionNode[]): string {
  const sw = (fn: string, subject: string, arms: [string[], string][], fallback: string): string => {
    const cases = arms.filter(([p]) => p.length > 0).map(([p, r]) => `        case ${p.map(fishq).join(" ")}\n            echo ${fishq(r)}`);
    return `function ${fn}\n    switch ${subject}\n${cases.join("\n")}\n        case '*'\n            echo ${fishq(fallback)}\n    end\nend`;
  };
  const sub = sw("__sandgate_sub", `"$argv[1]|$argv[2]"`, nodes.flatMap((n) => n.commands.map((c) => [[c.name, ...c.aliases].map((w) => `${n.path}|${w}`), c.name] as [string[], string])), "");
  const valopts = sw("__sandgate_valopts", `"$argv[1]"`, nodes.map((n) => [[n.path], ` ${n.options.filter((o) => o.value).flatMap((o) => o.flags).join(" ")} `]), " ");
  const lines: string[] = [];
  for (const n of nodes) {
    const at = `__sandgate_at ${fishq(n.path)}`;
    for (const c of n.commands) {
      for (const w of [c.name, ...c.aliases]) lines.push(`complete -c sandgate -n ${fishq(at)} -f -a ${fishq(w)} -d ${fishq(c.description)}`);
    }
    for (const o of n.options) {
      const flags = o.flags.map((f) => (f.startsWith("--") ? `-l ${fishq(f.slice(2))}` : `-s ${fishq(f.slice(1))}`)).join(" ");
      const value = o.choices ? ` -x -a ${fishq(o.choices.join(" "))}` : o.value ? " -r" : "";
      lines.push(`complete -c sandgate -n ${fishq(at)} ${flags}${value} -d ${fishq(o.description)}`);
    }
    for (const a of n.argChoices) lines.push(`complete -c sandgate -n ${fishq(`__sandgate_at ${fishq(n.path)} ${a.index}`)} -f -a ${fishq(a.choices.join(" "))}`);
    if (n.sandboxArg >= 0) lines.push(`complete -c sandgate -n ${fishq(`__sandgate_at ${fishq(n.path)} ${nameAt(n)}`)} -f -a '(__sandgate_names)'`);
  }
  return `# sandgate ${VERSION} completion for fish, generated by \`sandgate completion fish\` from the CLI itself.
# Now:        sandgate completion fish | source
# Every shell: sandgate completion fish > ~/.config/fish/completions/sandgate.fish

${sub}

${valopts}

# Prints "PATH<tab>POSITION<tab>GLOBALS...": the command the line is in, how many of its
# positional arguments are given, and the --home/--url given before it.
function __sandgate_state
    set -l words (commandline -opc)
    set -e words[1]
    set -l path ''
    set -l pos 0
    set -l skip 0
    set -l opt ''
    set -l globals
    for w in $words
        if test $skip = 1
            set skip 0
            if test -z "$path"; and contains -- $opt --home --url
                set -a globals $opt $w
            end
            continue
        end
        switch $w
            case '--'
                echo -- "--"
                return
            case '--home=*' '--url=*'
                test -z "$path"; and set -a globals $w
                continue
            case '-*'
                if not string match -q -- '*=*' $w; and string match -q -- "* $w *" (__sandgate_valopts "$path")
                    set skip 1
                    set opt $w
                end
                continue
        end
        set -l s (__sandgate_sub "$path" $w)
        if test -n "$s"
            set path (string trim -- "$path $s")
            set pos 0
        else
            set pos (math $pos + 1)
        end
    end
    string join \\t -- "$path" $pos $globals
end

# True when the line is in the command PATH (and, given POSITION, at that positional argument;
# POSITION+ is that one or any after it).
function __sandgate_at
    set -l state (string split \\t -- (__sandgate_state))
    test "$state[1]" = "$argv[1]"; or return 1
    test (count $argv) -lt 2; and return 0
    if string match -q -- '*+' $argv[2]
        test -n "$state[2]"; and test "$state[2]" -ge (string trim -r -c + -- $argv[2])
    else
        test "$state[2]" = "$argv[2]"
    end
end

function __sandgate_names
    set -l state (string split \\t -- (__sandgate_state))
    command sandgate $state[3..-1] __complete-names (commandline -ct) 2>/dev/null
end

${lines.join("\n")}
`;
}

export function completionScript(shell: Shell, program: Command): string {
  const nodes = completionTree(program);
  return shell === "bash" ? bashScript(nodes) : shell === "zsh" ? zshScript(nodes) : fishScript(nodes);
}

/**
 * Names starting with `prefix`, in name order: the list is read from just before the
 * prefix (names sort by byte), page by page until past it, within COMPLETE_NAMES.
 */
export async function completeNames(client: GatewayClient, prefix: string, signal: AbortSignal): Promise<string[]> {
  const names: string[] = [];
  // The prefix less its last character (and trailing '-') is a name sorting before every name the prefix starts.
  const stem = prefix.slice(0, -1).replace(/-+$/, "");
  let after: string | null = stem && checkSandboxName(stem) === null ? stem : "";
  for (let n = 0; n < COMPLETE_NAMES.pages && after !== null; n++) {
    const q = new URLSearchParams({ view: "lean", limit: String(COMPLETE_NAMES.pageSize) });
    if (after) q.set("after", after);
    const res = await client.raw("GET", `/v1/sandboxes?${q.toString()}`, undefined, signal);
    if (!res.ok) return names;
    const page = (await res.json()) as { sandboxes: SandboxSummaryView[]; next: string | null };
    for (const s of page.sandboxes) {
      if (s.name.startsWith(prefix)) names.push(s.name);
      else if (s.name > prefix) return names;
    }
    after = page.next;
  }
  return names;
}

export function completionCommands(program: Command, global: () => { home?: string; url?: string }): void {
  program
    .command("completion")
    .description("print a shell completion script (commands, options, and sandbox names from the gateway)")
    .addArgument(new Argument("<shell>", "bash, zsh or fish").choices(SHELLS))
    .addHelpText("after", "\nExamples:\n  source <(sandgate completion bash)\n  sandgate completion fish > ~/.config/fish/completions/sandgate.fish")
    .action((shell: Shell) => {
      process.stdout.write(completionScript(shell, program));
    });

  // For the scripts: the names of sandboxes starting with PREFIX, one per line. Never an
  // error: a gateway that is not running (or a bad token) gives no names, exit 0.
  program
    .command("__complete-names", { hidden: true })
    .argument("[prefix]", "", "")
    .action(async (prefix: string) => {
      try {
        const names = await completeNames(new GatewayClient(global()), prefix, AbortSignal.timeout(COMPLETE_NAMES.timeoutMs));
        if (names.length > 0) process.stdout.write(names.join("\n") + "\n");
      } catch {
        // nothing to offer
      }
    });
}
