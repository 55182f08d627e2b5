// What the gateway tells supervisors of its host's network: every address of the host
// (read from all interfaces, re-read, pushed on change only to supervisors that accept it)
// and the DNS servers a supervisor asks directly; and how the launch file carries both.
import type { NetworkInterfaceInfo } from "node:os";
import { describe, expect, it } from "vitest";
import { BoundaryRegistry, type SessionLink } from "../../../src/gateway/control/boundary.js";
import { HostAddressWatcher, collectHostAddresses, type AddressFeed } from "../../../src/gateway/control/host-addresses.js";
import { parseLaunchConfig, parseResolverAddress } from "../../../src/protocol/launch.js";
import { parseGatewayMessage, parseSupervisorMessage, type GatewayMessage } from "../../../src/protocol/wire.js";
import { policyFromObject } from "../../../src/policy/index.js";
import { chooseResolvers, isLoopbackResolver, parseResolvConf } from "../../../src/gateway/control/resolvers.js";
import { upstreamResolver } from "../../../src/supervisor/resolver.js";
import { TestDnsServer } from "../../support/dns-server.js";

const ifaces = (d: Record<string, { address: string; family?: string }[]>): NodeJS.Dict<NetworkInterfaceInfo[]> =>
  d as unknown as NodeJS.Dict<NetworkInterfaceInfo[]>;

describe("collectHostAddresses", () => {
  it("takes every interface's addresses, canonical, unique and sorted; IPv6 link-local is left out", () => {
    expect(
      collectHostAddresses(
        ifaces({
          lo: [{ address: "127.0.0.1" }, { address: "::1" }],
          eth0: [{ address: "192.0.2.10" }, { address: "2001:DB8:0::10" }, { address: "fe80::1234" }],
          "br-1": [{ address: "10.200.0.1" }, { address: "192.0.2.10" }],
          vethx: [{ address: "fe80::abcd" }, { address: "FEBF::1" }, { address: "fe80:0:0:0::9%vethx" }],
          // Outside fe80::/10 on either side of it: kept.
          edge: [{ address: "fec0::1" }, { address: "fe7f::1" }],
          sgtest0: [{ address: "::ffff:198.18.0.7" }, { address: "junk" }],
          gone: undefined as unknown as { address: string }[],
        }),
      ),
    ).toEqual(["10.200.0.1", "127.0.0.1", "192.0.2.10", "198.18.0.7", "2001:db8::10", "::1", "fe7f::1", "fec0::1"].sort());
  });

  it("reads this host's real interfaces (loopback at least)", () => {
    expect(collectHostAddresses()).toContain("127.0.0.1");
  });
});

describe("HostAddressWatcher", () => {
  it("tells its listener of changes only, with the set before", () => {
    let now = ["192.0.2.1"];
    const seen: [string[], string[]][] = [];
    const w = new HostAddressWatcher({ read: () => now, intervalMs: 3_600_000, feed: null, onChange: (a, b) => seen.push([a, b]) });
    try {
      expect(w.current()).toEqual(["192.0.2.1"]);
      w.poll();
      expect(seen).toEqual([]);
      now = ["192.0.2.2", "192.0.2.1", "192.0.2.2"];
      w.poll();
      w.poll();
      expect(seen).toEqual([[["192.0.2.1", "192.0.2.2"], ["192.0.2.1"]]]);
      now = ["192.0.2.2"];
      w.poll();
      expect(seen.at(-1)).toEqual([["192.0.2.2"], ["192.0.2.1", "192.0.2.2"]]);
      expect(w.current()).toEqual(["192.0.2.2"]);
    } finally {
      w.close();
    }
  });

  it("keeps the last known set when reading fails", () => {
    let fail = false;
    const seen: string[][] = [];
    const w = new HostAddressWatcher({
      read: () => {
        if (fail) throw new Error("EMFILE");
        return ["192.0.2.1"];
      },
      intervalMs: 3_600_000,
      feed: null,
      onChange: (a) => seen.push(a),
    });
    fail = true;
    w.poll();
    w.close();
    expect(seen).toEqual([]);
    expect(w.current()).toEqual(["192.0.2.1"]);
  });

  it("without a change feed, re-reads on its own every intervalMs", async () => {
    let now = ["192.0.2.1"];
    const seen: string[][] = [];
    const w = new HostAddressWatcher({ read: () => now, intervalMs: 10, feed: null, onChange: (a) => seen.push(a) });
    now = ["192.0.2.9"];
    for (let i = 0; i < 500 && seen.length === 0; i++) await new Promise((r) => setTimeout(r, 10));
    w.close();
    expect(seen).toEqual([["192.0.2.9"]]);
  });

  /** A feed the test drives: `fire` is a change line, `fail` ends the feed. */
  function testFeed(): { feed: AddressFeed; fire: () => void; fail: (why: string) => void; stopped: () => boolean } {
    let changed: () => void = () => undefined;
    let failed: (why: string) => void = () => undefined;
    let stopped = false;
    return {
      feed: (c, f) => {
        changed = c;
        failed = f;
        return () => void (stopped = true);
      },
      fire: () => changed(),
      fail: (why) => failed(why),
      stopped: () => stopped,
    };
  }
  const until = async (cond: () => boolean): Promise<void> => {
    for (let i = 0; i < 500 && !cond(); i++) await new Promise((r) => setTimeout(r, 10));
  };

  it("with a change feed, re-reads when it reports a change (a burst is one read), not on a timer", async () => {
    let now = ["192.0.2.1"];
    let reads = 0;
    const seen: string[][] = [];
    const f = testFeed();
    const w = new HostAddressWatcher({ read: () => (reads++, now), intervalMs: 5, backstopMs: 3_600_000, feed: f.feed, onChange: (a) => seen.push(a) });
    try {
      now = ["192.0.2.9"];
      await new Promise((r) => setTimeout(r, 100));
      expect(seen).toEqual([]); // the 5 ms poll is not running: the feed is
      const before = reads;
      f.fire();
      f.fire();
      f.fire();
      await until(() => seen.length > 0);
      expect(seen).toEqual([["192.0.2.9"]]);
      expect(reads - before).toBe(1);
    } finally {
      w.close();
    }
    expect(f.stopped()).toBe(true);
  });

  it("a feed that ends falls back to polling every intervalMs, says so, and catches what changed meanwhile", async () => {
    let now = ["192.0.2.1"];
    const seen: string[][] = [];
    const lost: string[] = [];
    const f = testFeed();
    const w = new HostAddressWatcher({ read: () => now, intervalMs: 10, backstopMs: 3_600_000, feed: f.feed, onChange: (a) => seen.push(a), onFeedLost: (why) => lost.push(why) });
    try {
      now = ["192.0.2.2"];
      f.fail("ip monitor exited (SIGKILL)");
      expect(lost).toEqual(["ip monitor exited (SIGKILL)"]);
      expect(seen).toEqual([["192.0.2.2"]]);
      now = ["192.0.2.3"];
      await until(() => seen.length > 1);
      expect(seen.at(-1)).toEqual(["192.0.2.3"]);
    } finally {
      w.close();
    }
  });

  it("a feed that cannot start: polling from the start, said once", async () => {
    let now = ["192.0.2.1"];
    const seen: string[][] = [];
    const lost: string[] = [];
    const w = new HostAddressWatcher({ read: () => now, intervalMs: 10, feed: () => null, onChange: (a) => seen.push(a), onFeedLost: (why) => lost.push(why) });
    now = ["192.0.2.4"];
    await until(() => seen.length > 0);
    w.close();
    expect(seen).toEqual([["192.0.2.4"]]);
    expect(lost).toEqual(["no address feed on this host"]);
  });
});

function link(sandboxId: string, accepts?: string[]): SessionLink & { sent: GatewayMessage[] } {
  const sent: GatewayMessage[] = [];
  return {
    sessionId: `s-${sandboxId}`,
    sandboxId,
    generation: 1,
    ...(accepts === undefined ? {} : { accepts: new Set(accepts) }),
    sent,
    send: (m) => void sent.push(m),
    close: () => undefined,
  };
}

describe("BoundaryRegistry host addresses", () => {
  const policy = (() => {
    const r = policyFromObject({ version: 1 });
    if (!r.ok) throw new Error("policy");
    return r.policy;
  })();

  it("sends them after welcome and before the policy, then whole on every change, only to supervisors that accept them", () => {
    const b = new BoundaryRegistry();
    try {
      b.setHostAddresses(["192.0.2.1"]);
      b.setDesired("new", 1, policy, 1);
      b.setDesired("old", 1, policy, 1);
      const fresh = link("new", ["hostAddresses"]);
      const older = link("old");
      expect(b.admit(fresh)).toEqual({ ok: true });
      expect(b.admit(older)).toEqual({ ok: true });
      expect(fresh.sent.map((m) => m.type)).toEqual(["welcome", "hostAddresses", "policy"]);
      expect(fresh.sent[1]).toEqual({ type: "hostAddresses", addresses: ["192.0.2.1"] });
      // A supervisor from before this protocol would close the session on an unknown message.
      expect(older.sent.map((m) => m.type)).toEqual(["welcome", "policy"]);

      b.setHostAddresses(["192.0.2.1", "198.18.0.7"]);
      expect(fresh.sent.at(-1)).toEqual({ type: "hostAddresses", addresses: ["192.0.2.1", "198.18.0.7"] });
      expect(older.sent.map((m) => m.type)).toEqual(["welcome", "policy"]);
    } finally {
      b.close();
    }
  });

  it("sends nothing before the gateway knows the set", () => {
    const b = new BoundaryRegistry();
    const l = link("x", ["hostAddresses"]);
    b.admit(l);
    b.close();
    expect(l.sent.map((m) => m.type)).toEqual(["welcome"]);
  });
});

describe("wire: hostAddresses and hello.accepts", () => {
  it("parses both; hello without accepts (older supervisors) still parses", () => {
    expect(parseGatewayMessage(JSON.stringify({ type: "hostAddresses", addresses: ["192.0.2.1", "::1"] }))).toEqual({
      ok: true,
      message: { type: "hostAddresses", addresses: ["192.0.2.1", "::1"] },
    });
    expect(parseGatewayMessage(JSON.stringify({ type: "hostAddresses", addresses: "192.0.2.1" })).ok).toBe(false);
    expect(parseGatewayMessage(JSON.stringify({ type: "hostAddresses", addresses: [], extra: 1 })).ok).toBe(false);
    const hello = { type: "hello", token: "t", sandboxId: "s", generation: 1, enforcedRevision: null, proxy: "listening" };
    expect(parseSupervisorMessage(JSON.stringify(hello)).ok).toBe(true);
    expect(parseSupervisorMessage(JSON.stringify({ ...hello, accepts: ["hostAddresses"] }))).toMatchObject({ ok: true, message: { accepts: ["hostAddresses"] } });
  });
});

describe("launch file: hostAddresses and resolvers", () => {
  const valid = { sandboxId: "sb", generation: 0, nonce: "n", policyRevision: 2, policy: { version: 1 } };

  it("absent (older gateways): no host addresses known, the container's own resolver", () => {
    const r = parseLaunchConfig(valid);
    expect(r.errors).toEqual([]);
    expect(r.settings).toMatchObject({ hostAddresses: [], resolvers: null });
  });

  it("reads both in canonical form", () => {
    const r = parseLaunchConfig({ ...valid, hostAddresses: ["192.0.2.1", "2001:DB8::1", "192.0.2.1"], resolvers: ["192.0.2.53", "192.0.2.54:5353", "2001:db8::53", "[2001:DB8::54]:5300"] });
    expect(r.errors).toEqual([]);
    expect(r.settings.hostAddresses).toEqual(["192.0.2.1", "2001:db8::1"]);
    expect(r.settings.resolvers).toEqual(["192.0.2.53:53", "192.0.2.54:5353", "[2001:db8::53]:53", "[2001:db8::54]:5300"]);
    expect(r.policy).toBeDefined();
  });

  it.each([
    [{ hostAddresses: "192.0.2.1" }, "hostAddresses must be a list of at most 4096 IP addresses"],
    [{ hostAddresses: ["192.0.2.1", "localhost"] }, 'hostAddresses: not an IP address: "localhost"'],
    [{ hostAddresses: [7] }, "hostAddresses: not an IP address: 7"],
    [{ hostAddresses: new Array(4097).fill("192.0.2.1") }, "hostAddresses must be a list of at most 4096 IP addresses"],
    [{ resolvers: [] }, "resolvers must be a list of 1-8 DNS server addresses"],
    [{ resolvers: "192.0.2.53" }, "resolvers must be a list of 1-8 DNS server addresses"],
    [{ resolvers: ["dns.example"] }, 'resolvers: not a DNS server address (IP, IP:port or [IPv6]:port): "dns.example"'],
  ])("a malformed entry withholds the policy: %j", (extra, error) => {
    const r = parseLaunchConfig({ ...valid, ...extra });
    expect(r.errors).toContain(error);
    expect(r.policy).toBeUndefined();
  });
});

describe("parseResolverAddress", () => {
  it.each([
    ["192.0.2.53", "192.0.2.53:53"],
    ["192.0.2.53:53", "192.0.2.53:53"],
    ["192.0.2.53:65535", "192.0.2.53:65535"],
    ["2001:db8::53", "[2001:db8::53]:53"],
    ["[2001:db8::53]", "[2001:db8::53]:53"],
    ["[2001:db8::53]:1", "[2001:db8::53]:1"],
    ["::1", "[::1]:53"],
  ])("%s -> %s", (text, value) => {
    expect(parseResolverAddress(text)).toMatchObject({ ok: true, value });
  });

  it.each(["", "dns.example", "192.0.2.53:0", "192.0.2.53:65536", "192.0.2.53:053", "192.0.2.53:", "[192.0.2.53]:53", "2001:db8::53:99999", "[2001:db8::53]:", "[2001:db8::53]:x", "1.2.3", "010.0.0.1", " 192.0.2.53", "a:b"])(
    "refuses %j",
    (text) => {
      expect(parseResolverAddress(text).ok).toBe(false);
    },
  );
});

describe("chooseResolvers", () => {
  const files = (m: Record<string, string>) => (p: string): string | null => m[p] ?? null;

  it("--resolver wins, then SANDGATE_RESOLVERS, then /etc/resolv.conf", () => {
    const readFile = files({ "/etc/resolv.conf": "nameserver 192.0.2.1\n" });
    expect(chooseResolvers({ flags: ["192.0.2.53", "192.0.2.54:5353", "192.0.2.53"], env: "192.0.2.99", readFile })).toEqual({ ok: true, resolvers: ["192.0.2.53:53", "192.0.2.54:5353"], source: "--resolver", skipped: [] });
    expect(chooseResolvers({ flags: [], env: " 192.0.2.98, [2001:db8::53]:5300 ", readFile })).toEqual({ ok: true, resolvers: ["192.0.2.98:53", "[2001:db8::53]:5300"], source: "SANDGATE_RESOLVERS", skipped: [] });
    expect(chooseResolvers({ env: "", readFile })).toEqual({ ok: true, resolvers: ["192.0.2.1:53"], source: "/etc/resolv.conf", skipped: [] });
  });

  it("refuses a malformed or loopback address given explicitly, in one line naming it", () => {
    const bad = chooseResolvers({ flags: ["dns.example"] });
    expect(bad).toEqual({ ok: false, error: '--resolver "dns.example": not a DNS server address (IP, IP:port or [IPv6]:port): "dns.example"' });
    const loop = chooseResolvers({ env: "127.0.0.53" });
    expect(loop.ok).toBe(false);
    if (!loop.ok) {
      expect(loop.error).toMatch(/^SANDGATE_RESOLVERS 127\.0\.0\.53: a loopback address is not reachable from a supervisor's container/);
      expect(loop.error).not.toContain("\n");
    }
    expect(chooseResolvers({ flags: ["::1"] }).ok).toBe(false);
    expect(chooseResolvers({ flags: Array.from({ length: 9 }, (_, i) => `192.0.2.${i + 1}`) })).toEqual({ ok: false, error: "--resolver: at most 8 DNS servers" });
  });

  it("skips loopback and malformed nameservers of the host; systemd-resolved's upstream list stands in for its stub", () => {
    const readFile = files({
      "/etc/resolv.conf": "# generated\nsearch example\nnameserver 127.0.0.53\nnameserver fe80::1%eth0\nnameserver 192.0.2.1\n",
    });
    expect(chooseResolvers({ readFile })).toEqual({ ok: true, resolvers: ["192.0.2.1:53"], source: "/etc/resolv.conf", skipped: ["127.0.0.53", "fe80::1%eth0"] });
    const stub = files({ "/etc/resolv.conf": "nameserver 127.0.0.53\noptions edns0\n", "/run/systemd/resolve/resolv.conf": "nameserver 192.0.2.8\nnameserver 2001:db8::8\n" });
    expect(chooseResolvers({ readFile: stub })).toEqual({ ok: true, resolvers: ["192.0.2.8:53", "[2001:db8::8]:53"], source: "/run/systemd/resolve/resolv.conf", skipped: ["127.0.0.53"] });
  });

  it("refuses to start when the host names only loopback resolvers, or none, or cannot be read", () => {
    expect(chooseResolvers({ readFile: files({ "/etc/resolv.conf": "nameserver 127.0.0.1\nnameserver ::1\n" }) })).toEqual({
      ok: false,
      error: "/etc/resolv.conf names only 127.0.0.1, ::1, which a supervisor's container cannot reach; give --resolver ADDR (or SANDGATE_RESOLVERS) with a DNS server the supervisors can reach",
    });
    expect(chooseResolvers({ readFile: files({ "/etc/resolv.conf": "search x\n" }) })).toMatchObject({ ok: false, error: expect.stringMatching(/^\/etc\/resolv.conf names no nameserver; give --resolver ADDR/) as string });
    expect(chooseResolvers({ readFile: files({}) })).toMatchObject({ ok: false, error: expect.stringMatching(/^cannot read \/etc\/resolv.conf/) as string });
  });

  it("parseResolvConf reads nameserver lines in order", () => {
    expect(parseResolvConf("nameserver 192.0.2.1\n# nameserver 192.0.2.2\n  nameserver\t192.0.2.3 # x\ndomain d\n")).toEqual(["192.0.2.1", "192.0.2.3"]);
    expect(isLoopbackResolver("127.1.2.3")).toBe(true);
    expect(isLoopbackResolver("192.0.2.1")).toBe(false);
  });
});

describe("upstreamResolver (the supervisor asks the host's DNS servers itself)", () => {
  it("answers from the servers; a name they do not know goes to the fallback; a server failure does not", async () => {
    const dns = await TestDnsServer.start("127.0.0.1", 0, { "known.test": "192.0.2.7" });
    // "unknown.test": a dotted name the servers do not know; "container-name": single-label, Docker's alone.
    const asked: string[] = [];
    const fallback = (host: string): Promise<string[]> => {
      asked.push(host);
      return Promise.resolve(["10.9.9.9"]);
    };
    const resolve = upstreamResolver([`127.0.0.1:${String(dns.port)}`], fallback, { timeoutMs: 500, tries: 1 });
    try {
      expect(await resolve("known.test")).toEqual(["192.0.2.7"]);
      expect(asked).toEqual([]);
      expect(await resolve("unknown.test")).toEqual(["10.9.9.9"]);
      expect(await resolve("container-name")).toEqual(["10.9.9.9"]);
      expect(asked).toEqual(["unknown.test", "container-name"]);
      // A single-label name never reaches the host's servers (a silent one must not delay it).
      expect(dns.names()).toEqual(expect.arrayContaining(["known.test", "unknown.test"]));
      expect(dns.names()).not.toContain("container-name");
    } finally {
      await dns.close();
    }
    // Nothing answers any more: the failure is reported, not papered over by the fallback.
    await expect(resolve("known.test")).rejects.toMatchObject({ code: expect.stringMatching(/^(ECONNREFUSED|ETIMEOUT)$/) as string });
    expect(asked).toEqual(["unknown.test", "container-name"]);
  });
});
