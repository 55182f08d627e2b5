// The supervisor's addon against the kernel: in a network namespace of its own (made for the
// test, removed after), an nftables REDIRECT sends a connection for 203.0.113.9:8443 to a
// local listener, which reads the original destination. Nothing leaves the namespace: its only
// interface is lo, and the redirect is in its output hook. Real parts: kernel, nft, the addon.
import { execFileSync, spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { createServer } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PREBUILT_ORIG_DST_ADDON } from "../../../src/driver/docker/supervisor-bundle.js";
import { loadOriginalDst } from "../../../src/supervisor/original-dst.js";

const ns = `sg-od-${randomBytes(3).toString("hex")}`;

beforeAll(() => {
  execFileSync("ip", ["netns", "add", ns]);
  execFileSync("ip", ["-n", ns, "link", "set", "lo", "up"]);
  execFileSync("ip", ["netns", "exec", ns, "nft", "-f", "-"], {
    input: "table ip t {\n chain out {\n  type nat hook output priority -100; policy accept;\n  ip daddr 203.0.113.9 tcp dport 8443 redirect to :15001\n }\n}\n",
  });
  // A route for the test address inside the namespace only (nothing is sent there: the output hook redirects first).
  execFileSync("ip", ["-n", ns, "route", "add", "203.0.113.0/24", "dev", "lo"]);
});
afterAll(() => {
  spawnSync("ip", ["netns", "del", ns]);
});

// Runs in the namespace: listens on 15001, connects to 203.0.113.9:8443, prints what the addon says.
const PROBE = `
const [module, addon] = process.argv.slice(-2);
const { loadOriginalDst } = await import(module);
const originalDst = loadOriginalDst(addon);
const net = await import("node:net");
const srv = net.createServer((s) => { try { console.log(JSON.stringify(originalDst(s))); } catch (e) { console.log(JSON.stringify({ error: e.code })); } process.exit(0); });
srv.listen(15001, "127.0.0.1", () => net.connect(8443, "203.0.113.9").on("error", () => {}).resume());
`;

describe("the original destination of a redirected connection", () => {
  it("is the address and port the client dialled", () => {
    const out = execFileSync("ip", ["netns", "exec", ns, process.execPath, "--import", "tsx", "--input-type=module", "-e", PROBE, "--", new URL("../../../src/supervisor/original-dst.ts", import.meta.url).href, PREBUILT_ORIG_DST_ADDON], { encoding: "utf8", timeout: 30_000 });
    expect(JSON.parse(out)).toEqual({ address: "203.0.113.9", port: 8443 });
  });

  it("a connection that was not redirected has none (ENOENT); a socket without a descriptor is EBADF", async () => {
    const originalDst = loadOriginalDst(PREBUILT_ORIG_DST_ADDON);
    const srv = createServer();
    const codes: string[] = [];
    await new Promise<void>((r) => srv.listen(0, "127.0.0.1", r));
    const accepted = new Promise<void>((resolve) =>
      srv.once("connection", (s) => {
        try {
          originalDst(s);
        } catch (err) {
          codes.push((err as { code: string }).code);
        }
        s.destroy();
        try {
          originalDst(s);
        } catch (err) {
          codes.push((err as { code: string }).code);
        }
        resolve();
      }),
    );
    const c = (await import("node:net")).connect((srv.address() as { port: number }).port, "127.0.0.1").on("error", () => undefined);
    await accepted;
    c.destroy();
    srv.close();
    expect(codes).toEqual(["ENOENT", "EBADF"]);
  });

  it("a missing addon is an error at load, naming the path", () => {
    expect(() => loadOriginalDst("/nonexistent/orig-dst.node")).toThrow(/nonexistent\/orig-dst\.node/);
  });
});
