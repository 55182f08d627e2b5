// The gateway's host-address watcher with its real change feed (`ip -o monitor address`):
// an address added to, then removed from, a dummy interface this test creates is seen with
// no poll running (both periods an hour), so only the kernel's notification can tell it.
// The address is from 192.31.196.0/24 on the dummy interface: nothing leaves the machine.
import { spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { HostAddressWatcher } from "../../src/gateway/control/host-addresses.js";

const IFACE = `sgfeed${randomBytes(3).toString("hex")}`;

function ip(...args: string[]): void {
  const r = spawnSync("ip", args, { encoding: "utf8" });
  if (r.status !== 0) throw new Error(`ip ${args.join(" ")}: ${r.stderr}`);
}

function freeAddress(): string {
  const taken = spawnSync("ip", ["-o", "addr", "show"], { encoding: "utf8" }).stdout;
  for (let tries = 0; tries < 100; tries++) {
    const a = `192.31.196.${8 + Math.floor(Math.random() * 240)}`;
    if (!taken.includes(`inet ${a}/`)) return a;
  }
  throw new Error("no free address in 192.31.196.0/24 for the test interface");
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

beforeAll(() => {
  spawnSync("ip", ["link", "del", IFACE], { stdio: "ignore" });
  if (spawnSync("ip", ["link", "add", IFACE, "type", "dummy"], { stdio: "ignore" }).status !== 0) ip("link", "add", IFACE, "type", "bridge");
  ip("link", "set", IFACE, "up");
});

afterAll(() => {
  spawnSync("ip", ["link", "del", IFACE], { stdio: "ignore" });
});

describe("host addresses from the kernel's change feed", () => {
  it("an address added and one removed are seen without any poll", async () => {
    const addr = freeAddress();
    const sets: string[][] = [];
    const lost: string[] = [];
    const w = new HostAddressWatcher({ intervalMs: 3_600_000, backstopMs: 3_600_000, onChange: (a) => sets.push(a), onFeedLost: (why) => lost.push(why) });
    try {
      expect(w.current()).not.toContain(addr);
      // `ip monitor` subscribes a moment after it starts: until the first change is seen,
      // take the address away and add it again (a working feed sees the first or second).
      let seen = false;
      for (let attempt = 0; attempt < 20 && !seen; attempt++) {
        ip("addr", "add", `${addr}/32`, "dev", IFACE);
        for (let i = 0; i < 100 && !(seen = w.current().includes(addr)); i++) await sleep(10);
        if (!seen) ip("addr", "del", `${addr}/32`, "dev", IFACE);
      }
      expect(lost).toEqual([]);
      expect(w.current()).toContain(addr);
      ip("addr", "del", `${addr}/32`, "dev", IFACE);
      for (let i = 0; i < 500 && w.current().includes(addr); i++) await sleep(10);
      expect(w.current()).not.toContain(addr);
      expect(sets.at(-1)).not.toContain(addr);
    } finally {
      w.close();
    }
  });
});
