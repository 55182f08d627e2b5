// `sandgate sandbox ...`: create, get, start, stop, delete, events, watch (list: list-commands.ts, prune: prune-command.ts, exec and connect: exec-commands.ts).

import { Command, InvalidArgumentError } from "commander";
import { PAGE, PROCESS_LIMITS as L, SEQ, WAIT, decimalArg, intArg, labelArg, secondsArg } from "./args.js";
import { GatewayClient } from "./client.js";
import { execCommands } from "./exec-commands.js";
import { statsCommand } from "./stats-commands.js";
import { portForwardCommand } from "./port-forward-command.js";
import { logsCommand } from "./logs-command.js";
import { followEvents } from "./events-follow.js";
import { listCommand } from "./list-commands.js";
import { pruneCommand } from "./prune-command.js";
import { cpCommand } from "./cp-command.js";
import { boundaryLine, readPolicyFile } from "./policy-commands.js";
import { CliError, EXIT, EXIT_INTERRUPTED, cliErrorOf } from "./errors.js";
import { watchEvents } from "../sdk/watch.js";
import { Columns, printJson, short, when } from "./format.js";
import type { EventView, SandboxView } from "../sdk/types.js";
import { waitForPhase } from "./wait.js";
import { formatBytes, parseDiskSize } from "../lifecycle/disk-size.js";
import { PHASES } from "../lifecycle/phases.js";
import { formatLabels, labelsFromPairs, type LabelPair } from "../lifecycle/labels.js";
import { envPairArg } from "./env-file.js";
import { addCreateTimeFlags, createTimeBody, expiryRows, type CreateTimeFlags } from "./create-options.js";
import { restartCommand } from "./restart-command.js";
import { drained } from "../util/drained.js";

interface Common {
  home?: string;
  url?: string;
  json?: boolean;
}
interface Waitable extends Common {
  wait: boolean;
  timeout: number;
}

const enc = encodeURIComponent;

const clientFor = (o: Common): GatewayClient => new GatewayClient({ home: o.home, url: o.url });

/** `w` as one word of a shell command line to copy: as it is when that is safe, else single-quoted. */
const shellWord = (w: string): string => (/^[\w./:@%+=,-]+$/.test(w) ? w : `'${w.replace(/'/g, `'\\''`)}'`);

/** Checked here for a one-line usage error; the gateway parses it again. */
function diskSize(v: string): string {
  const d = parseDiskSize(v);
  if (!d.ok) throw new InvalidArgumentError(d.error);
  return v;
}

function diskLine(d: SandboxView["disk"]): string {
  if (!d) return "unlimited (a workspace volume of a sandbox created before disk limits)";
  const used = d.usedBytes === null ? "not mounted" : `${formatBytes(d.usedBytes)} used`;
  return `${used} of ${formatBytes(d.limitBytes)}`;
}


function waitOptions(cmd: Command, defaultTimeoutS: number): Command {
  return cmd
    .option("--no-wait", "return as soon as the gateway has accepted the request")
    .option("--timeout <seconds>", "how long to wait", secondsArg("--timeout", WAIT), defaultTimeoutS)
    .option("--json", "print the result as JSON");
}



/** The runtime record when it is of the running generation (containers that are there), else null. */
function live(s: SandboxView): SandboxView["runtime"] {
  const running = s.phase === "Provisioning" || s.phase === "Ready" || s.phase === "Recovering";
  return running && s.runtime?.generation === s.generation ? s.runtime : null;
}

const LONGEST_PHASE = Math.max(...PHASES.map((p) => p.length));
/**
 * The least widths of `sandbox events`' columns SEQ, TIME, GEN, KIND and CHANGE: room for
 * sequence numbers to a million, a time as `when` prints it, the longest kind ("deleted") and
 * any change of phase ("Provisioning → Provisioning" is longer than any there is).
 */
const EVENT_COLUMNS = [6, "2026-12-03 13:16:36Z".length, 3, "deleted".length, 2 * LONGEST_PHASE + " → ".length];

/**
 * An event's reason and message as one line, neither saying again what the other says: a
 * message that holds the reason (a stop the gateway made) or that the reason holds (a failed
 * launch's detail) alone; a message that starts with the reason's code ("WorkloadExited: proven
 * by inspect") without it.
 */
function eventDetail(e: Pick<EventView, "reasonText" | "message">): string {
  const { reasonText: reason, message } = e;
  if (!reason) return message ?? "";
  if (!message || reason.includes(message)) return reason;
  if (message.includes(reason)) return message;
  const code = /^\w+/.exec(reason)![0];
  return `${reason}: ${message.startsWith(`${code}: `) ? message.slice(code.length + 2) : message}`;
}

function phaseLine(s: SandboxView): string {
  return `${s.name}  ${s.phase}${s.reasonText ? ` (${s.reasonText})` : ""}  generation ${s.generation}`;
}

async function lastSeq(client: GatewayClient, name: string): Promise<number> {
  const { events } = await client.request<{ events: EventView[] }>("GET", `/v1/sandboxes/${enc(name)}/events?tail=1`);
  return events.at(-1)?.seq ?? 0;
}

async function settle(client: GatewayClient, s: SandboxView, o: Waitable, until: string[], afterSeq: number, signal?: AbortSignal): Promise<void> {
  const final = o.wait
    ? await waitForPhase(client, s.name, { until, timeoutMs: o.timeout * 1000, quiet: !!o.json, afterSeq, ...(signal ? { signal } : {}) })
    : s;
  if (o.json) printJson(final ?? { name: s.name, deleted: true });
  else if (final === null) process.stdout.write(`${s.name}  deleted\n`);
  else process.stdout.write(phaseLine(final) + "\n");
}

/**
 * After a refused stop or delete: the sandbox as it is when it already is what was
 * asked (stopped, stopping; deleted), else the refusal is rethrown.
 */
async function alreadyThere(client: GatewayClient, name: string, intent: "stop" | "delete", err: unknown): Promise<SandboxView | "deleted"> {
  if (!(err instanceof CliError)) throw err;
  if (intent === "delete" && err.exitCode === EXIT.notFound) return "deleted";
  if (intent !== "stop" || err.exitCode !== EXIT.conflict) throw err;
  const now = await client.request<SandboxView>("GET", `/v1/sandboxes/${enc(name)}`);
  if (now.phase === "Stopped" || now.phase === "Completed" || now.phase === "Stopping") return now;
  throw err;
}

export function sandboxCommands(global: () => Common): Command {
  const sandbox = new Command("sandbox").description("create and manage sandboxes");
  // eslint-disable-next-line @typescript-eslint/no-unnecessary-type-parameters -- commander options are untyped
  const opts = <T extends Common>(cmd: Command): T => ({ ...global(), ...cmd.opts<T>() });

  waitOptions(
    addCreateTimeFlags(sandbox
      .command("create")
      .description("create a sandbox and wait until it is Ready")
      .argument("<name>", "sandbox name: 1-63 lowercase letters, digits and '-'")
      .argument("[command...]", "the workload's main process (after --); default: an idle process")
      .option("--image <image>", "workload image (default: the locally built sandgate workload image)")
      .option("--memory <MiB>", `memory limit in MiB (${L.memoryMb.min}-${L.memoryMb.max})`, intArg("--memory", L.memoryMb))
      .option("--cpus <n>", `CPU limit in cores (${L.cpus.min}-${L.cpus.max})`, decimalArg("--cpus", L.cpus))
      .option("--pids <n>", `process limit (${L.pids.min}-${L.pids.max})`, intArg("--pids", L.pids))
      .option("--disk <size>", "workspace (/sandbox) size, enforced by the kernel: 512M, 10G, 1GiB (default 10G)", diskSize)
      .option("-e, --env <KEY=VALUE>", "environment variable for the workload (repeatable; wins over --env-file)", envPairArg)
      .option("--label <KEY=VALUE>", "a label to select the sandbox by (repeatable; kept by the gateway, never on containers)", labelArg("--label"))
      .option("--policy <file>", "network policy YAML (see docs/policy.md); default: deny all egress")),
    180,
  ).action(async (name: string, command: string[], _o, cmd: Command) => {
    const o = opts<Waitable & { image?: string; memory?: number; cpus?: number; pids?: number; disk?: string; env?: Record<string, string>; label?: LabelPair[]; policy?: string } & CreateTimeFlags>(cmd);
    const client = clientFor(o);
    const time = createTimeBody(o);
    const resources: Record<string, number> = {};
    if (o.memory !== undefined) resources.memoryMb = o.memory;
    if (o.cpus !== undefined) resources.cpus = o.cpus;
    if (o.pids !== undefined) resources.pids = o.pids;
    const body: Record<string, unknown> = { name, env: time.env, resources, ...time.fields };
    if (o.image) body.image = o.image;
    if (o.disk !== undefined) body.disk = o.disk;
    if (o.label) {
      const l = labelsFromPairs(o.label);
      if (!l.ok) throw new CliError(`--label: ${l.error}`, EXIT.usage);
      body.labels = l.labels;
    }
    if (o.policy) body.policy = readPolicyFile(o.policy);
    if (command.length > 0) body.command = command;
    const s = await client.request<SandboxView>("POST", "/v1/sandboxes", body);
    if (!o.wait) return settle(client, s, o, ["Ready", "Completed"], 0);
    // Ctrl-C stops the wait, not the create: the gateway goes on, so say so and how to undo it.
    const interrupt = new AbortController();
    const onInterrupt = (): void => interrupt.abort();
    process.once("SIGINT", onInterrupt);
    try {
      if (!o.json) process.stderr.write(`creating sandbox "${s.name}" (${s.id})\n`);
      await settle(client, s, o, ["Ready", "Completed"], 0, interrupt.signal);
    } catch (err) {
      if (!interrupt.signal.aborted) throw err;
      const again = ["sandgate", ...(o.home ? ["--home", shellWord(o.home)] : []), ...(o.url ? ["--url", shellWord(o.url)] : []), "sandbox", "delete", s.name].join(" ");
      throw new CliError(`interrupted: sandbox "${s.name}" goes on being created; to remove it: ${again}`, EXIT_INTERRUPTED);
    } finally {
      process.off("SIGINT", onInterrupt);
    }
  });

  listCommand(sandbox, global);

  sandbox
    .command("get")
    .alias("inspect")
    .description("show one sandbox")
    .argument("<name>", "sandbox name or id")
    .option("--json", "print as JSON")
    .action(async (name: string, _o, cmd: Command) => {
      const o = opts<Common>(cmd);
      const s = await clientFor(o).request<SandboxView>("GET", `/v1/sandboxes/${enc(name)}`);
      if (o.json) return printJson(s);
      const rt = live(s);
      const rows: [string, string][] = [
        ["name", s.name],
        ["id", s.id],
        ["phase", s.phase],
        ["reason", s.reasonText ?? "-"],
        ["generation", String(s.generation)],
        ["host", s.host ?? "-"],
        ["image", s.spec.image ?? "(default workload image)"],
        ["command", s.spec.command ? s.spec.command.join(" ") : "(idle)"],
        ["resources", `${s.spec.resources.memoryMb} MiB, ${s.spec.resources.cpus} CPU, ${s.spec.resources.pids} pids`],
        ["disk", diskLine(s.disk)],
        ["labels", formatLabels(s.labels)],
        ...expiryRows(s),
        ["workload", rt ? `${short(rt.workload.id)} started ${when(rt.workload.startedAt)}` : "-"],
        ["supervisor", rt ? `${short(rt.supervisor.id)} started ${when(rt.supervisor.startedAt)}` : "-"],
        ["proxy", rt?.proxyUrl ?? "-"],
        ["boundary", boundaryLine(s.boundary)],
        ["created", when(s.createdAt)],
        ["updated", when(s.updatedAt)],
      ];
      const w = Math.max(...rows.map(([k]) => k.length));
      process.stdout.write(rows.map(([k, v]) => `${k.padEnd(w)}  ${v}`).join("\n") + "\n");
    });

  const intents: { name: "start" | "stop" | "delete"; help: string; until: string[]; method: string; path: string }[] = [
    { name: "start", help: "start a Stopped, Completed or Error sandbox as a new generation (same workspace)", until: ["Ready", "Completed"], method: "POST", path: "/start" },
    { name: "stop", help: "stop a sandbox: remove its containers, keep its workspace", until: ["Stopped"], method: "POST", path: "/stop" },
    { name: "delete", help: "delete a sandbox and everything it owns, workspace included", until: ["Deleted"], method: "DELETE", path: "" },
  ];
  /** One name's start, stop or delete, as it was for a single name. */
  const act = async (intent: (typeof intents)[number], name: string, o: Waitable, client: GatewayClient): Promise<void> => {
    if (intent.name === "start") {
      const seq = o.wait ? await lastSeq(client, name) : 0;
      const s = await client.request<SandboxView>(intent.method, `/v1/sandboxes/${enc(name)}${intent.path}`);
      return settle(client, s, o, intent.until, seq);
    }
    // Stop and delete are idempotent, as `docker stop` is: asking for what already holds
    // (or is under way) succeeds and says so.
    let seq = 0;
    let s: SandboxView;
    try {
      seq = o.wait ? await lastSeq(client, name) : 0;
      s = await client.request<SandboxView>(intent.method, `/v1/sandboxes/${enc(name)}${intent.path}`);
    } catch (err) {
      const now = await alreadyThere(client, name, intent.name, err);
      if (now === "deleted") {
        if (o.json) return printJson({ name, deleted: true, already: true });
        return void process.stdout.write(`${name}  already deleted\n`);
      }
      if (now.phase === "Stopping" && o.wait) return settle(client, now, o, intent.until, seq);
      if (o.json) return printJson(now);
      return void process.stdout.write(`${phaseLine(now)}  (already ${now.phase === "Stopping" ? "stopping" : "stopped"})\n`);
    }
    await settle(client, s, o, intent.until, seq);
  };
  for (const intent of intents) {
    const command = waitOptions(
      sandbox
        .command(intent.name)
        .description(intent.help)
        .argument("<names...>", "sandbox names or ids")
        .addHelpText("after", "\nSeveral names are taken one after another, as docker does: a failure is reported in one line,\nthe rest are still done, and the exit code is the first failure's."),
      intent.name === "start" ? 180 : 120,
    );
    if (intent.name === "delete") command.alias("rm").option("-f, --force", "accepted as docker rm's: a delete stops a running sandbox first anyway");
    command.action(async (names: string[], _o, cmd: Command) => {
      const o = opts<Waitable>(cmd);
      const client = clientFor(o);
      if (names.length === 1) return act(intent, names[0]!, o, client);
      let first: number | undefined;
      for (const name of names) {
        try {
          await act(intent, name, o, client);
        } catch (err) {
          const e = cliErrorOf(err);
          if (!(e instanceof CliError)) throw err;
          process.stderr.write(`sandgate: ${e.message}\n`);
          first ??= e.exitCode;
        }
      }
      if (first !== undefined) process.exitCode = first;
    });
  }
  pruneCommand(sandbox, global);
  restartCommand(sandbox, global);
  execCommands(sandbox, global);
  statsCommand(sandbox, global);
  portForwardCommand(sandbox, global);
  logsCommand(sandbox, global);
  cpCommand(sandbox, global);

  sandbox
    .command("events")
    .description("show a sandbox's event log (phase changes with reasons, progress); egress decisions: sandgate audit")
    .argument("<name>", "sandbox name or id")
    .option("--after <seq>", "only events after this sequence number", intArg("--after", SEQ))
    .option("--tail <n>", `only the last N events (${PAGE.min}-${PAGE.max})`, intArg("--tail", PAGE))
    .option("-f, --follow", "then keep printing new events until the sandbox is deleted (Ctrl-C stops); survives a gateway restart")
    .option("--json", "print as JSON (one array; with --follow one event per line)")
    .action(async (name: string, _o, cmd: Command) => {
      const o = opts<Common & { after?: number; tail?: number; follow?: boolean }>(cmd);
      const client = clientFor(o);
      // Followed by id: after a restart or a deletion the name may mean another sandbox.
      const target = o.follow ? (await client.request<SandboxView>("GET", `/v1/sandboxes/${enc(name)}`)).id : name;
      // Widths that fit what the columns can hold, so rows printed later (pages, -f) line up.
      const columns = new Columns(["SEQ", "TIME", "GEN", "KIND", "CHANGE", "DETAIL"], EVENT_COLUMNS);
      const row = (e: EventView): string[] => [
        String(e.seq),
        when(e.time),
        String(e.generation),
        e.kind,
        e.kind === "phase" || e.kind === "deleted" ? `${e.oldPhase ?? "-"} → ${e.newPhase ?? "gone"}` : "-",
        eventDetail(e),
      ];
      // Page by cursor: the log is never read whole at once.
      const all: EventView[] = [];
      let first = true;
      let lastPrinted = o.after ?? 0;
      for (let after = o.after ?? 0; ; ) {
        const q = o.tail ? `tail=${o.tail}${o.after ? `&after=${o.after}` : ""}` : `after=${after}&limit=1000`;
        const page = await client.request<{ events: EventView[]; next: number | null }>("GET", `/v1/sandboxes/${enc(target)}/events?${q}`);
        if (o.json && o.follow) page.events.forEach((e) => process.stdout.write(JSON.stringify(e) + "\n"));
        else if (o.json) all.push(...page.events);
        else if (page.events.length > 0 || first) {
          const rows = page.events.map(row);
          if (first) {
            columns.fit(rows);
            process.stdout.write(columns.header() + "\n");
          }
          for (const r of rows) process.stdout.write(columns.line(r) + "\n");
          first = false;
        }
        lastPrinted = page.events.at(-1)?.seq ?? lastPrinted;
        if (page.next === null) break;
        after = page.next;
      }
      if (!o.follow) {
        if (o.json) printJson(all);
        return;
      }
      const ac = new AbortController();
      process.once("SIGINT", () => ac.abort());
      const end = await followEvents({
        client: () => clientFor(o),
        id: target,
        after: lastPrinted,
        signal: ac.signal,
        note: (line) => process.stderr.write(line + "\n"),
        print: async (e) => {
          const line = o.json ? JSON.stringify(e) : columns.line(row(e));
          if (!process.stdout.write(line + "\n")) await drained(process.stdout);
        },
      });
      if (end === "gone") process.stderr.write(`sandbox ${name} is gone (deleted)\n`);
    });

  sandbox
    .command("watch")
    .description("stream phase changes as they happen (Ctrl-C to stop)")
    .argument("[name]", "only this sandbox")
    .option("--json", "one JSON object per line")
    .action(async (name: string | undefined, _o, cmd: Command) => {
      const o = opts<Common>(cmd);
      await watchStream(clientFor(o), name, !!o.json);
    });

  return sandbox;
}

/**
 * Follows /v1/watch. When the gateway disconnects a stream because this client fell
 * behind (`event: overflow`), it reconnects from the last sequence it printed, so
 * no event is lost or printed twice.
 */
async function watchStream(client: GatewayClient, name: string | undefined, json: boolean): Promise<void> {
  const ac = new AbortController();
  process.once("SIGINT", () => ac.abort());
  if (!json) process.stderr.write(`watching ${name ? `"${name}"` : "all sandboxes"} (Ctrl-C to stop)\n`);
  const events = watchEvents(client.transport, {
    signal: ac.signal,
    ...(name ? { sandbox: name } : {}),
    onResume: (after) => process.stderr.write(`(fell behind the gateway; resuming after event ${after})\n`),
  });
  try {
    for await (const { event, sandbox } of events) {
      // Respect the reader of our output: a slow one slows this stream (the gateway
      // then cuts it off and we resume), our memory does not grow.
      if (!printWatched(event, sandbox, json)) await drained(process.stdout);
    }
  } catch (err) {
    throw cliErrorOf(err);
  }
}

/** Prints one event; false when stdout asks us to wait for "drain". */
function printWatched(event: EventView, sandbox: SandboxView | null, json: boolean): boolean {
  if (json) return process.stdout.write(JSON.stringify({ event, sandbox }) + "\n");
  if (event.kind === "phase" || event.kind === "deleted") {
    const why = event.reasonText ? ` (${event.reasonText})` : "";
    return process.stdout.write(`${when(event.time)}  ${event.sandboxName}  gen ${event.generation}  ${event.oldPhase ?? "-"} → ${event.newPhase ?? "gone"}${why}\n`);
  }
  if (event.message) return process.stdout.write(`${when(event.time)}  ${event.sandboxName}  gen ${event.generation}  ${event.kind}: ${event.message}\n`);
  return true;
}
