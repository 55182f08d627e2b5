// `sandgate audit NAME`: the sandbox's egress decisions (allow, deny, dropped),
// newest last, paged by cursor.

import { Command, InvalidArgumentError } from "commander";
import { PAGE, SEQ, intArg } from "./args.js";
import { GatewayClient } from "./client.js";
import { printJson, table, when } from "./format.js";

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
  event: { method?: string; protocol?: string; host?: string; port?: number; path?: string; reason?: string; rule?: string; lockdown?: string };
}

function decision(v: string): string {
  if (v !== "allow" && v !== "deny" && v !== "dropped") throw new InvalidArgumentError("must be allow, deny or dropped");
  return v;
}

const target = (a: AuditView): string => {
  const e = a.event;
  if (a.decision === "dropped") return "(records dropped by the gateway's rate limit)";
  return `${e.method ?? (e.protocol ?? "").toUpperCase()} ${e.host ?? "?"}:${e.port ?? "?"}${e.path ?? ""}`;
};

export function auditCommand(global: () => Common): Command {
  return new Command("audit")
    .description("show a sandbox's egress decisions (repeats are counted, not repeated)")
    .argument("<name>", "sandbox name or id")
    .option("--tail <n>", "only the last N records (default 100)", intArg("--tail", PAGE))
    .option("--after <seq>", "records after this sequence number (all of them, page by page)", intArg("--after", SEQ))
    .option("--decision <d>", "only allow, deny or dropped", decision)
    .option("--json", "print as JSON (one array)")
    .action(async (name: string, o: { tail?: number; after?: number; decision?: string; json?: boolean }) => {
      const client = new GatewayClient(global());
      const rows: AuditView[] = [];
      const base = o.decision ? `&decision=${o.decision}` : "";
      if (o.after === undefined) {
        const r = await client.request<{ audit: AuditView[] }>("GET", `/v1/sandboxes/${encodeURIComponent(name)}/audit?tail=${o.tail ?? 100}${base}`);
        rows.push(...r.audit);
      } else {
        for (let after = o.after; ; ) {
          const r = await client.request<{ audit: AuditView[]; next: number | null }>("GET", `/v1/sandboxes/${encodeURIComponent(name)}/audit?after=${after}&limit=1000${base}`);
          rows.push(...r.audit);
          if (r.next === null) break;
          after = r.next;
        }
      }
      if (o.json) return printJson(rows);
      if (rows.length === 0) return void process.stdout.write("no audit records\n");
      process.stdout.write(
        table(
          ["SEQ", "TIME", "GEN", "DECISION", "COUNT", "TARGET", "WHY"],
          rows.map((a) => [String(a.seq), when(a.time), String(a.generation), a.decision, String(a.count), target(a), a.event.lockdown ?? a.event.reason ?? a.event.rule ?? "-"]),
        ) + "\n",
      );
    });
}
