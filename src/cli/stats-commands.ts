// `sandgate sandbox stats [NAME]`: what Ready sandboxes use now (CPU, memory, pids,
// workspace, egress), refreshed every 2 s until Ctrl-C like `docker stats`, or once
// with --no-stream. Without NAME every Ready sandbox, one row each, read page by page.

import type { Command } from "commander";
import { formatBytes } from "../lifecycle/disk-size.js";
import { intArg } from "./args.js";
import { GatewayClient } from "./client.js";
import { printJson, table } from "./format.js";
import { pause } from "../util/pause.js";

interface Common {
  home?: string;
  url?: string;
  json?: boolean;
}

/** GET /v1/sandboxes/:name/stats and the rows of GET /v1/stats. */
export interface StatsView {
  name: string;
  phase: string;
  generation: number;
  time: string;
  cpuPercent: number | null;
  memory: { usedBytes: number; limitBytes: number | null } | null;
  pids: { current: number; limit: number | null } | null;
  disk: { limitBytes: number; usedBytes: number | null } | null;
  egress: { bytesOut: number; bytesIn: number; allowed: number; denied: number; wouldDeny: number; dropped: number; since: string | null };
  /** Packets the supervisor's namespace dropped (ICMP, other protocols, forwarding); null without a transparent path. */
  dropped: { icmp: number; other: number; forward: number } | null;
  error: string | null;
}

/** How often the table is refreshed while streaming. */
export const REFRESH_MS = 2000;
/** Rows per request: each is a runtime sample, so pages stay small. */
const STATS_PAGE = 50;
const LIMIT = { min: 1, max: 1_000_000 };

const enc = encodeURIComponent;
const dash = "-";

const HEADERS = ["NAME", "CPU %", "MEM USAGE / LIMIT", "MEM %", "PIDS", "DISK USED / LIMIT", "EGRESS OUT / IN", "ALLOWED", "DENIED"];

function row(s: StatsView): string[] {
  const m = s.memory;
  const d = s.disk;
  return [
    s.name,
    s.cpuPercent === null ? dash : `${s.cpuPercent.toFixed(2)}%`,
    m === null ? dash : `${formatBytes(m.usedBytes)} / ${m.limitBytes === null ? "unlimited" : formatBytes(m.limitBytes)}`,
    m?.limitBytes ? `${((m.usedBytes / m.limitBytes) * 100).toFixed(2)}%` : dash,
    s.pids === null ? dash : `${s.pids.current}${s.pids.limit === null ? "" : ` / ${s.pids.limit}`}`,
    d === null ? dash : `${d.usedBytes === null ? dash : formatBytes(d.usedBytes)} / ${formatBytes(d.limitBytes)}`,
    `${formatBytes(s.egress.bytesOut)} / ${formatBytes(s.egress.bytesIn)}`,
    String(s.egress.allowed),
    String(s.egress.denied),
  ];
}

/** Every Ready sandbox's row, page by page (at most `limit`). */
async function allRows(client: GatewayClient, limit: number): Promise<StatsView[]> {
  const rows: StatsView[] = [];
  let after: string | null = "";
  while (after !== null && rows.length < limit) {
    const q = new URLSearchParams({ limit: String(Math.min(STATS_PAGE, limit - rows.length)) });
    if (after) q.set("after", after);
    const page: { stats: StatsView[]; next: string | null } = await client.request("GET", `/v1/stats?${q.toString()}`);
    rows.push(...page.stats);
    after = page.next;
  }
  return rows;
}

export function statsCommand(sandbox: Command, global: () => Common): void {
  sandbox
    .command("stats")
    .description("resource use of Ready sandboxes: CPU, memory, pids, workspace, egress (refreshed every 2 s until Ctrl-C)")
    .argument("[name]", "only this sandbox (it must be Ready); default: every Ready sandbox, one row each")
    .option("--no-stream", "print once and exit")
    .option("--limit <n>", `without NAME: at most N sandboxes, in name order (${LIMIT.min}-${LIMIT.max})`, intArg("--limit", LIMIT))
    .option("--json", "print as JSON (streaming: one line per refresh)")
    .addHelpText(
      "after",
      `
CPU is percent of one core (200% = two cores busy), memory excludes the page cache the
kernel can drop (as docker stats shows it). Egress is the current generation's audit
trail as retained: bytes out/in, requests allowed (would_deny included) and denied.
--json adds "dropped": the workload's ICMP and other non-TCP/UDP packets its supervisor
dropped since it started (counted in the supervisor's namespace, never seen by its proxy).`,
    )
    .action(async (name: string | undefined, _o, cmd: Command) => {
      const o = { ...global(), ...cmd.opts<Common & { stream: boolean; limit?: number }>() };
      const client = new GatewayClient({ home: o.home, url: o.url });
      const read = async (): Promise<StatsView[]> =>
        name === undefined ? allRows(client, o.limit ?? Number.POSITIVE_INFINITY) : [await client.request<StatsView>("GET", `/v1/sandboxes/${enc(name)}/stats`)];
      const render = (rows: StatsView[], refresh: number): void => {
        if (o.json) {
          const value = name === undefined ? rows : rows[0];
          if (o.stream) process.stdout.write(JSON.stringify(value) + "\n");
          else printJson(value);
          return;
        }
        const text = rows.length === 0 ? "no Ready sandboxes" : table(HEADERS, rows.map(row));
        // A terminal shows one table, redrawn in place; a pipe gets each refresh after a blank line.
        const lead = !o.stream ? "" : process.stdout.isTTY ? "\x1b[2J\x1b[H" : refresh === 0 ? "" : "\n";
        process.stdout.write(`${lead}${text}\n`);
      };

      if (!o.stream) return render(await read(), 0);
      let stop = false;
      const wake = new AbortController();
      const onSigint = (): void => {
        stop = true;
        wake.abort();
      };
      process.once("SIGINT", onSigint);
      try {
        for (let refresh = 0; !stop; refresh++) {
          const rows = await read();
          if (stop) break;
          render(rows, refresh);
          await pause(REFRESH_MS, wake.signal);
        }
      } finally {
        process.off("SIGINT", onSigint);
      }
    });
}
