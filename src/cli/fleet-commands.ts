// `sandgate fleet status`: the hosts of the gateway's store (docs/fleet.md): which a gateway
// drives now, who holds each lease at which epoch, and each host's sandboxes.

import { Command } from "commander";
import type { FleetView } from "../sdk/types.js";
import { GatewayClient } from "./client.js";
import { printJson, table, when } from "./format.js";

interface Common {
  home?: string;
  url?: string;
}

export function fleetCommands(global: () => Common): Command {
  const fleet = new Command("fleet").description("the hosts of a fleet of gateways on one PostgreSQL database (docs/fleet.md)");
  fleet
    .command("status")
    .description("every host of the store: whether a gateway drives it now, its lease (gateway, pid, epoch, since) and its sandboxes")
    .option("--json", "print as JSON")
    .action(async (o: { json?: boolean }) => {
      const f = await new GatewayClient(global()).request<FleetView>("GET", "/v1/fleet");
      if (o.json) return printJson(f);
      const rows = f.hosts.map((h) => [
        `${h.host}${h.self ? " (this)" : ""}`,
        h.driven ? "driven" : "no gateway",
        h.lease === null ? "-" : `${h.lease.gatewayId} pid ${h.lease.pid}`,
        h.lease === null ? "-" : String(h.lease.epoch),
        h.lease === null ? "-" : when(h.lease.since),
        String(h.live),
        String(h.total),
      ]);
      const store = f.store === "sqlite" ? "the embedded SQLite store (one host; docs/fleet.md for a fleet)" : "PostgreSQL";
      process.stdout.write(`store: ${store}\n${table(["HOST", "STATE", "LEASE HELD BY", "EPOCH", "SINCE", "LIVE", "SANDBOXES"], rows)}\n`);
    });
  return fleet;
}
