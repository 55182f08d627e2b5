// `sandgate audit NAME`: the sandbox's egress decisions (allow, deny, would_deny, dropped),
// oldest first, paged by cursor; `--follow` keeps reading new ones; `--json` prints one OCSF
// event per line (JSON lines), for scripts and SIEMs.

import { Command, InvalidArgumentError } from "commander";
import { PAGE, SEQ, intArg, sinceArg } from "./args.js";
import { GatewayClient } from "./client.js";
import { table, when } from "./format.js";
import { setTimeout as sleep } from "node:timers/promises";

interface Common {
  home?: string;
  url?: string;
}

interface AuditView {
  seq: number;
  time: string;
  generation: number;
  decision: string;
  count: number;
  event: {
    method?: string;
    protocol?: string;
    host?: string;
    port?: number;
    path?: string;
    reason?: string;
    rule?: string;
    lockdown?: string;
    activity?: string;
    /** "transparent": the connection came by the transparent path, not through the proxy. */
    via?: string;
    bytesOut?: number;
    bytesIn?: number;
    /** decision "policy": a policy set directly ("policy_set"), or a proposal and what happened to it ("policy_proposal"). */
    type?: string;
    action?: string;
    proposal?: string;
    by?: string;
    revision?: number;
    note?: string;
  };
}

interface Options {
  tail?: number;
  after?: number;
  since?: string;
  decision?: string;
  follow?: boolean;
  json?: boolean;
}

const DECISIONS = ["allow", "deny", "would_deny", "dropped", "policy"];
/** How often --follow asks for new records. */
const FOLLOW_POLL_MS = 1000;
const PAGE_SIZE = 1000;

function decision(v: string): string {
  if (!DECISIONS.includes(v)) throw new InvalidArgumentError(`must be one of ${DECISIONS.join(", ")}`);
  return v;
}


const target = (a: AuditView): string => {
  const e = a.event;
  if (a.decision === "dropped") return "(records dropped by the gateway's rate limit)";
  if (a.decision === "policy") return `${e.type === "policy_set" ? "policy" : `policy proposal ${e.proposal ?? "?"}`} ${e.action ?? "?"}${e.revision === undefined ? "" : ` (revision ${e.revision})`}`;
  const what = `${e.method ?? (e.protocol ?? "").toUpperCase()} ${e.host ?? "?"}:${e.port ?? "?"}${e.path ?? ""}`;
  const how = e.via === "transparent" ? " [transparent]" : "";
  return e.activity === "close" ? `${what} (closed)${how}` : `${what}${how}`;
};

const size = (n: number | undefined): string => {
  if (n === undefined) return "-";
  if (n < 1024) return `${n}B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)}K`;
  return `${(n / 1024 / 1024).toFixed(1)}M`;
};

const HEADERS = ["SEQ", "TIME", "GEN", "DECISION", "COUNT", "TARGET", "OUT/IN", "WHY"];
const row = (a: AuditView): string[] => [
  String(a.seq),
  when(a.time),
  String(a.generation),
  a.decision,
  String(a.count),
  target(a),
  a.event.bytesOut === undefined && a.event.bytesIn === undefined ? "-" : `${size(a.event.bytesOut)}/${size(a.event.bytesIn)}`,
  a.decision === "policy" ? [`by ${a.event.by ?? "?"}`, a.event.note ?? a.event.reason].filter(Boolean).join(": ") : (a.event.lockdown ?? a.event.reason ?? a.event.rule ?? "-"),
];

export function auditCommand(global: () => Common): Command {
  return new Command("audit")
    .description("show a sandbox's egress decisions: allow, deny, would_deny (audit mode), dropped (repeats are counted, not repeated); and policy: proposals and their decisions")
    .argument("<name>", "sandbox name or id")
    .option("--tail <n>", "only the last N records (default 100; with --follow, where to start)", intArg("--tail", PAGE))
    .option("--after <seq>", "records after this sequence number (all of them, page by page)", intArg("--after", SEQ))
    .option("--since <time>", "only records at or after an RFC 3339 time, or a duration back from now (90s, 10m, 2h, 7d)", sinceArg("--since"))
    .option("--decision <d>", `only one decision: ${DECISIONS.join(", ")}`, decision)
    .option("-f, --follow", "keep printing new records as they arrive (Ctrl-C stops)")
    .option("--json", "one OCSF event per line (JSON lines)")
    .addHelpText("after", "\nA request is recorded once it is over, with its bytes and duration; a tunnel when it opens and when it closes.\n--json prints OCSF 1.3 HTTP Activity (4002) and Network Activity (4001) events, and API Activity (6003) for policy proposals; Sandgate's own fields are under \"unmapped\".")
    .action(async (name: string, o: Options) => {
      const client = new GatewayClient(global());
      const path = `/v1/sandboxes/${encodeURIComponent(name)}/audit`;
      const filter = `${o.decision ? `&decision=${o.decision}` : ""}${o.since ? `&since=${encodeURIComponent(o.since)}` : ""}${o.json ? "&format=ocsf" : ""}`;
      // Each page is printed as it arrives: nothing holds the whole trail.
      let headed = false;
      const print = (rows: unknown[]): void => {
        if (o.json) {
          if (rows.length > 0) process.stdout.write(rows.map((r) => JSON.stringify(r)).join("\n") + "\n");
          return;
        }
        if (rows.length === 0) return;
        const text = table(HEADERS, (rows as AuditView[]).map(row));
        process.stdout.write((headed ? text.slice(text.indexOf("\n") + 1) : text) + "\n");
        headed = true;
      };
      const seqOf = (r: unknown): number => (o.json ? Number((r as { metadata: { uid: string } }).metadata.uid) : (r as AuditView).seq);

      let cursor: number;
      if (o.after === undefined) {
        const r = await client.request<{ audit: unknown[] }>("GET", `${path}?tail=${o.tail ?? 100}${filter}`);
        print(r.audit);
        cursor = r.audit.length > 0 ? seqOf(r.audit.at(-1)) : 0;
        // Nothing yet: follow from the newest record there is, not from the start.
        if (r.audit.length === 0 && o.follow) {
          const newest = await client.request<{ audit: { seq: number }[] }>("GET", `${path}?tail=1`);
          cursor = newest.audit[0]?.seq ?? 0;
        }
      } else {
        cursor = o.after;
        for (;;) {
          const r = await client.request<{ audit: unknown[]; next: number | null }>("GET", `${path}?after=${cursor}&limit=${PAGE_SIZE}${filter}`);
          print(r.audit);
          if (r.audit.length > 0) cursor = seqOf(r.audit.at(-1));
          if (r.next === null) break;
        }
      }
      if (!o.follow) {
        if (!headed && !o.json) process.stdout.write("no audit records\n");
        return;
      }
      let stop = false;
      process.once("SIGINT", () => (stop = true));
      while (!stop) {
        await sleep(FOLLOW_POLL_MS);
        for (;;) {
          const r = await client.request<{ audit: unknown[]; next: number | null }>("GET", `${path}?after=${cursor}&limit=${PAGE_SIZE}${filter}`);
          print(r.audit);
          if (r.audit.length > 0) cursor = seqOf(r.audit.at(-1));
          if (r.next === null || stop) break;
        }
      }
    });
}
