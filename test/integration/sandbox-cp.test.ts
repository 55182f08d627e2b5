// `sandbox cp` and the files API on a real Docker sandbox: files and directories
// both ways through the real CLI, modes kept and ownership the workload's user
// inside, and every attack of a hostile workload or a careless upload: symlinks
// out of /sandbox (to /etc, to /proc/self/root), tar members with "..", absolute
// names, a symlink then a member through it, hard links out, a workload whose tar
// lies (an image whose /bin/tar is the workload's script), a huge sparse file,
// a tree deeper than PATH_MAX, names with newlines. And the bound that matters
// most: a 1 GiB file moves without the gateway holding it (peak RSS growth, a
// bound measured by the kernel, not a time).
import { execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { cli, type CliRun } from "../support/cli-runner.js";
import { startDockerFixture, type DockerFixture } from "../support/docker-fixture.js";
import { filesRequest } from "../support/files-http.js";
import { cliExec, docker, waitPhase } from "../support/sandbox-helpers.js";
import { archive, type CraftMember } from "../support/tar-craft.js";
import { DEFAULT_IDS } from "../../src/driver/docker/rootfs.js";

const NAME = "cp";
const HOSTILE = "cp-hostile";
const GIB = 1024 ** 3;
const MIB = 1024 ** 2;

let fx: DockerFixture;
let dir: string;
let n = 0;
let sandboxId: string;

const sh = (script: string, name = NAME) => cliExec(fx, name, ["sh", "-c", script]);
const cp = (...args: string[]): Promise<CliRun> => cli(["sandbox", "cp", ...args], fx.cliEnv);
const scratch = (): string => {
  const d = join(dir, `t${++n}`);
  mkdirSync(d);
  return d;
};
function oneLine(r: CliRun): string {
  const lines = r.stderr.trim().split("\n");
  expect(lines, r.stderr).toHaveLength(1);
  expect(r.stderr).not.toMatch(/\bat .+:\d+:\d+/);
  return lines[0]!;
}
const putTar = (path: string, body: Buffer | AsyncIterable<Buffer>, name = NAME) =>
  filesRequest(fx.t.url, fx.t.token, "PUT", `/v1/sandboxes/${name}/files?path=${encodeURIComponent(path)}`, { body, headers: { "content-type": "application/x-tar" } });

/** The workspace's filesystem on the host: only the workspace directory (and ext4's lost+found) may be at its root. */
const hostMountRoot = (): string => join(fx.dockerd.workspaceRoot, sandboxId);

/** Peak resident memory of this process (the gateway runs in it) since the last reset, in bytes. */
function resetPeak(): number {
  writeFileSync("/proc/self/clear_refs", "5");
  return Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync("/proc/self/status", "utf8"))![1]) * 1024;
}
const peak = (): number => Number(/VmHWM:\s+(\d+) kB/.exec(readFileSync("/proc/self/status", "utf8"))![1]) * 1024;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "sg-cp-it-"));
  fx = await startDockerFixture({ name: "cp" });
  const created = await fx.t.api("POST", "/v1/sandboxes", { name: NAME, disk: "2G" });
  if (created.status !== 201) throw new Error(`create: ${JSON.stringify(created.body)}`);
  sandboxId = created.body.id as string;
  await waitPhase(fx, NAME, "Ready", { ms: 120_000 });
  // The workload's traps, made by the workload itself.
  const r = await sh("ln -s /etc /sandbox/evil && ln -s /proc/self/root /sandbox/link && ln -s /etc/passwd /sandbox/pw && mkdir -p /sandbox/in && printf 'x' > /sandbox/in/keep");
  expect(r.code, r.stderr).toBe(0);
}, 300_000);

afterAll(async () => {
  await fx?.close();
  // rm -rf: node's rmSync recurses, and a copied tree may be 2000 levels deep.
  execFileSync("rm", ["-rf", dir]);
});

describe("copies both ways, through the real CLI", () => {
  it("a directory in: modes kept (0755 runs, 0600 stays), owned by the workload's user inside", async () => {
    const src = join(scratch(), "proj");
    mkdirSync(join(src, "sub"), { recursive: true });
    writeFileSync(join(src, "run.sh"), "#!/bin/sh\necho ran-inside\n", { mode: 0o755 });
    writeFileSync(join(src, "secret"), "s3cret", { mode: 0o600 });
    writeFileSync(join(src, "sub", "a\nb"), "newline name");
    const r = await cp(src, `${NAME}:/sandbox/proj`);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toBe(`copied 5 entries (44 B) to ${NAME}:/sandbox/proj\n`);
    const uid = DEFAULT_IDS.workload;
    const st = await sh("cd /sandbox/proj && stat -c '%a %u:%g %n' run.sh secret sub && /sandbox/proj/run.sh && cat 'sub/a\nb' && ls sub | od -c | head -1");
    expect(st.code, st.stderr).toBe(0);
    expect(st.stdout.split("\n").slice(0, 4)).toEqual([`755 ${uid}:${uid} run.sh`, `600 ${uid}:${uid} secret`, `755 ${uid}:${uid} sub`, "ran-inside"]);
    expect(st.stdout).toContain("newline name");
  });

  it("a directory out: modes kept, symlinks as symlinks, into an existing directory under its own name", async () => {
    const prep = await sh("mkdir -p /sandbox/out/d && printf 'hello' > /sandbox/out/d/f && chmod 600 /sandbox/out/d/f && ln -s /etc/shadow /sandbox/out/d/shadow-link && printf '#!/bin/sh\\n' > /sandbox/out/x.sh && chmod 755 /sandbox/out/x.sh");
    expect(prep.code, prep.stderr).toBe(0);
    const d = scratch();
    const r = await cp(`${NAME}:/sandbox/out`, d);
    expect(r.code, r.stderr).toBe(0);
    expect(readFileSync(join(d, "out", "d", "f"), "utf8")).toBe("hello");
    expect(statSync(join(d, "out", "d", "f")).mode & 0o777).toBe(0o600);
    expect(statSync(join(d, "out", "x.sh")).mode & 0o777).toBe(0o755);
    // The link arrives as a link, pointing where it pointed; nothing of the host's /etc/shadow was read.
    const { readlinkSync } = await import("node:fs");
    expect(readlinkSync(join(d, "out", "d", "shadow-link"))).toBe("/etc/shadow");
  });

  it("one file out to a new name, and back in over an existing file", async () => {
    const d = scratch();
    expect((await cp(`${NAME}:/sandbox/out/d/f`, join(d, "renamed"))).code).toBe(0);
    expect(readFileSync(join(d, "renamed"), "utf8")).toBe("hello");
    writeFileSync(join(d, "renamed"), "changed");
    expect((await cp(join(d, "renamed"), `${NAME}:/sandbox/out/d/f`)).code).toBe(0);
    expect((await sh("cat /sandbox/out/d/f")).stdout).toBe("changed");
  });
});

describe("symlinks out of /sandbox, made by the workload", () => {
  it.each([
    [`${NAME}:/sandbox/evil`, '"/sandbox/evil" resolves to "/etc"'],
    [`${NAME}:/sandbox/evil/passwd`, '"/sandbox/evil/passwd" resolves to "/etc/passwd"'],
    [`${NAME}:/sandbox/link`, '"/sandbox/link" resolves to "/"'],
    [`${NAME}:/sandbox/link/etc/passwd`, '"/sandbox/link/etc/passwd" resolves to "/etc/passwd"'],
    [`${NAME}:/sandbox/pw`, '"/sandbox/pw" resolves to "/etc/passwd"'],
  ])("copying out of %s fails clearly (exit 2), nothing written", async (src, resolved) => {
    const d = scratch();
    const r = await cp(src, d);
    expect(r.code).toBe(2);
    expect(oneLine(r)).toBe(`sandgate: path ${resolved}, outside /sandbox: a symlink may not lead out of the workspace`);
    expect(readdirSync(d)).toEqual([]);
  });

  it.each([`${NAME}:/sandbox/evil`, `${NAME}:/sandbox/evil/sg-planted`, `${NAME}:/sandbox/link/tmp`, `${NAME}:/sandbox/link/etc/sg-planted`, `${NAME}:/sandbox/pw`])(
    "copying into %s fails clearly, touching neither the host nor the workload's /etc",
    async (dest) => {
      const d = scratch();
      writeFileSync(join(d, "sg-planted"), "planted");
      const before = await sh("ls -la /etc /tmp; cat /etc/passwd");
      const r = await cp(join(d, "sg-planted"), dest);
      expect(r.code).toBe(2);
      expect(oneLine(r)).toMatch(/^sandgate: path "\/sandbox\/(evil|link|pw)[^"]*" resolves to "[^"]*", outside \/sandbox: a symlink may not lead out of the workspace$/);
      expect((await sh("ls -la /etc /tmp; cat /etc/passwd")).stdout).toBe(before.stdout);
      expect(existsSync("/etc/sg-planted")).toBe(false);
      expect(existsSync("/tmp/sg-planted")).toBe(false);
    },
  );
});

describe("a hostile tar uploaded through the API", () => {
  it.each<[string, CraftMember[], string]>([
    ["../x", [{ name: "../x", data: "x" }], 'member "../x" contains ".."'],
    ["/abs", [{ name: "/abs-sg", data: "x" }], 'member "/abs-sg" has an absolute name'],
    ["a symlink member then a file through it", [{ name: "esc", type: "2", linkname: "/tmp" }, { name: "esc/sg-through", data: "x" }], 'member "esc/sg-through" goes through the symbolic link "esc" of the same archive'],
    ["a symlink member to ../../.. then a file through it", [{ name: "up", type: "2", linkname: "../../.." }, { name: "up/sg-up", data: "x" }], 'member "up/sg-up" goes through the symbolic link "up"'],
    ["a hard link pointing outside", [{ name: "hl", type: "1", linkname: "../../etc/passwd" }], 'hard link target "../../etc/passwd" contains ".."'],
    ["a hard link by absolute name", [{ name: "hl2", type: "1", linkname: "/etc/shadow" }], 'hard link target "/etc/shadow" has an absolute name'],
  ])("%s is refused (400) and nothing lands outside /sandbox, in the workload or on the host", async (_what, members, message) => {
    const r = await putTar("/sandbox/in", archive(members));
    expect(r.status).toBe(400);
    expect(r.json.error.message.startsWith(message)).toBe(true);
    // Where each would land if it got through: outside /sandbox (and /sandbox/x for "../x" from /sandbox/in).
    // A refused stream leaves none of its symlinks either (they are written last).
    const look = await sh("for p in /x /sandbox/x /abs-sg /tmp/sg-through /sg-up /hl /hl2 /sandbox/in/esc /sandbox/in/up /sandbox/in/hl /sandbox/in/hl2; do [ -e \"$p\" ] || [ -L \"$p\" ] && echo \"$p\"; done; true");
    expect(look.stdout).toBe("");
    expect(readdirSync(hostMountRoot()).sort()).toEqual(["lost+found", "workspace"]);
    expect(existsSync(join(fx.dockerd.workspaceRoot, "x"))).toBe(false);
  });

  it("a member named through a symlink the workload made (in /sandbox) lands only where the workload could write", async () => {
    // /sandbox/evil -> /etc: the upload may name "evil/x"; tar runs as the workload's user, whose /etc is read-only.
    const r = await putTar("/sandbox", archive([{ name: "evil/sg-through-existing", data: "x" }]));
    expect(r.status).not.toBe(200);
    expect((await sh("ls /etc")).stdout).not.toContain("sg-through-existing");
  });
});

describe("a workload whose tar lies", () => {
  let outside: string;
  beforeAll(async () => {
    // An image like the default one, but its /bin/sh (busybox's shell runs its own tar, whatever
    // /bin/tar is) answers a download with whatever the workload put in /sandbox/.tar.
    const fakeSh = [
      "#!/usr/local/bin/node",
      'const a = process.argv.slice(2);',
      'if (a[0] === "-c" && a[1].includes("tar -cf -")) {',
      '  process.stdout.write("SGOK\\n");',
      '  process.stdout.write(require("fs").readFileSync("/sandbox/.tar"));',
      "} else {",
      '  process.exitCode = require("child_process").spawnSync("/bin/busybox", ["sh", ...a], { stdio: "inherit" }).status ?? 1;',
      "}",
      "",
    ].join("\n");
    const ref = fx.driver.imageRefs!.workload.ref;
    const b64 = Buffer.from(fakeSh).toString("base64");
    const mk = await docker(fx, "run", "--name", "sg-mk-hostile", "--user", "0", "--entrypoint", "/bin/busybox", ref, "sh", "-c", `echo ${b64} | base64 -d > /bin/sh.fake && rm /bin/sh && mv /bin/sh.fake /bin/sh && chmod 755 /bin/sh`);
    expect(mk.code, mk.stderr).toBe(0);
    const commit = await docker(fx, "commit", "--change", 'ENTRYPOINT ["sleep"]', "--change", 'CMD ["2147483647"]', "sg-mk-hostile", "sg-hostile-tar:1");
    expect(commit.code, commit.stderr).toBe(0);
    await docker(fx, "rm", "-f", "sg-mk-hostile");
    const created = await fx.t.api("POST", "/v1/sandboxes", { name: HOSTILE, image: "sg-hostile-tar:1", disk: "64M" });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    await waitPhase(fx, HOSTILE, "Ready", { ms: 120_000 });
    expect((await sh("mkdir /sandbox/x", HOSTILE)).code).toBe(0);
    outside = scratch();
    writeFileSync(join(outside, "keep"), "original");
  }, 180_000);

  const lie = async (tar: Buffer): Promise<void> => {
    const r = await filesRequest(fx.t.url, fx.t.token, "PUT", `/v1/sandboxes/${HOSTILE}/files?path=/sandbox/.tar`, { body: tar, headers: { "content-type": "application/octet-stream" } });
    expect(r.status, JSON.stringify(r.json)).toBe(200);
  };

  it.each<[string, () => CraftMember[], RegExp]>([
    ["a ../ member", () => [{ name: "x/", type: "5" }, { name: "x/../../sg-escaped", data: "x" }], /^sandgate: member "x\/..\/..\/sg-escaped" contains ".."/],
    ["an absolute member", () => [{ name: `${outside}/keep`, data: "pwned" }], /has an absolute name/],
    ["a symlink to the host then a file through it", () => [{ name: "x/", type: "5" }, { name: "x/l", type: "2", linkname: outside }, { name: "x/l/keep", data: "pwned" }], /goes through the symbolic link "x\/l"/],
    ["a member outside the path asked for", () => [{ name: "x/", type: "5" }, { name: "y", data: "pwned" }], /is not under "x", the path that was asked for/],
    ["a hard link to a host file", () => [{ name: "x/", type: "5" }, { name: "x/h", type: "1", linkname: `../..${outside}/keep` }], /hard link target .* contains ".."/],
    ["a device node and a set-uid file", () => [{ name: "x/", type: "5" }, { name: "x/dev", type: "3" }, { name: "x/suid", data: "#!/bin/sh\n", mode: 0o4755 }], /^$/],
  ])("%s: refused or neutralised, nothing outside the destination", async (_what, members, message) => {
    await lie(archive(members()));
    const d = scratch();
    const r = await cp(`${HOSTILE}:/sandbox/x`, d);
    if (message.source === "^$") {
      expect(r.code, r.stderr).toBe(0);
      expect(r.stdout).toMatch(/skipped 1 /);
      expect(statSync(join(d, "x", "suid")).mode & 0o7777).toBe(0o755);
      expect(existsSync(join(d, "x", "dev"))).toBe(false);
    } else {
      expect(r.code).not.toBe(0);
      expect(oneLine(r)).toMatch(message);
    }
    expect(readFileSync(join(outside, "keep"), "utf8")).toBe("original");
    expect(readdirSync(outside)).toEqual(["keep"]);
    expect(existsSync(join(dir, "sg-escaped"))).toBe(false);
  });

  it("a stream that stops short: the copy fails, never looks complete", async () => {
    await lie(archive([{ name: "x/", type: "5" }, { name: "x/f", data: "x".repeat(5000) }]).subarray(0, 2048));
    const r = await cp(`${HOSTILE}:/sandbox/x`, "-");
    expect(r.code).not.toBe(0);
    expect(oneLine(r)).toMatch(/^sandgate: not a valid tar stream: the stream ended inside the data of "x\/f"/);
  });
});

describe("what a workload can put in its workspace", () => {
  it("a 1 TiB sparse file is refused by its declared size, before its data is read (413 in the trailer)", async () => {
    const mk = await sh("truncate -s 1099511627776 /sandbox/sparse-huge && du -k /sandbox/sparse-huge");
    expect(mk.code, mk.stderr).toBe(0);
    expect(Number(mk.stdout.split(/\s/)[0])).toBeLessThan(1024);
    const r = await cp(`${NAME}:/sandbox/sparse-huge`, scratch());
    expect(r.code).toBe(2);
    expect(oneLine(r)).toBe(`sandgate: member "sparse-huge" is ${1024 ** 4} bytes, past the limit of ${16 * GIB} bytes per transfer (SANDGATE_CP_MAX_BYTES)`);
    await sh("rm /sandbox/sparse-huge");
  });

  it("a tree deeper than PATH_MAX: refused by name length, in one line", async () => {
    // Two chains of 1200 levels, each under PATH_MAX, one moved into the other: 4800 bytes deep.
    const mk = await sh("a=$(printf 'a/%.0s' $(seq 1 1200)); b=$(printf 'b/%.0s' $(seq 1 1200)); mkdir -p /sandbox/deep/$a /sandbox/tail/$b && mv /sandbox/tail /sandbox/deep/$a && echo done");
    expect(mk.stdout.trim(), mk.stderr).toBe("done");
    // As a tar on stdout, the gateway meets the names past 4096 bytes (or busybox's tar gives up first).
    const raw = await cp(`${NAME}:/sandbox/deep`, "-");
    expect(raw.code).not.toBe(0);
    expect(oneLine(raw)).toMatch(/^sandgate: (member ".*" has a name of \d+ bytes; the limit is 4096|tar in sandbox "cp" failed \(exit 1\): tar: deep\/a\/a.*…[^"]*: File name too long.*)$/);
    // Into a local directory, the destination's own path runs out first: one clear line too.
    const r = await cp(`${NAME}:/sandbox/deep`, scratch());
    expect(r.code).not.toBe(0);
    expect(oneLine(r)).toMatch(/^sandgate: (cannot write ".*" under ".*": the path is too long for this system \(ENAMETOOLONG\)|member ".*" has a name of \d+ bytes; the limit is 4096|tar in sandbox "cp" failed .*)$/);
  }, 300_000);

  it("a FIFO is skipped (never opened: the copy does not hang); names with newlines round-trip", async () => {
    expect((await sh("mkdir -p /sandbox/odd && mkfifo /sandbox/odd/fifo && printf 'n' > '/sandbox/odd/new\nline'")).code).toBe(0);
    const d = scratch();
    const r = await cp(`${NAME}:/sandbox/odd`, d);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/skipped 1 /);
    expect(readdirSync(join(d, "odd"))).toEqual(["new\nline"]);
  });
});

describe("phases", () => {
  it("a sandbox that is not Ready: exit 5, one line, both ways", async () => {
    const created = await fx.t.api("POST", "/v1/sandboxes", { name: "cp-stopped", disk: "64M" });
    expect(created.status).toBe(201);
    await waitPhase(fx, "cp-stopped", "Ready", { ms: 120_000 });
    await fx.t.api("POST", "/v1/sandboxes/cp-stopped/stop");
    await waitPhase(fx, "cp-stopped", "Stopped", { ms: 120_000 });
    const out = await cp("cp-stopped:/sandbox", scratch());
    expect([out.code, oneLine(out)]).toEqual([5, 'sandgate: cannot copy files with sandbox "cp-stopped": it is Stopped; sandbox cp needs Ready']);
    const d = scratch();
    writeFileSync(join(d, "f"), "x");
    expect((await cp(join(d, "f"), "cp-stopped:/sandbox/f")).code).toBe(5);
  });
});

describe("streamed: the gateway never holds a transfer", () => {
  it("a 1 GiB file out of the workspace: every byte arrives, the gateway's peak memory grows by a small fraction of it", async () => {
    expect((await sh("truncate -s 1G /sandbox/one-gib")).code).toBe(0);
    const base = resetPeak();
    let bytes = 0;
    const r = await filesRequest(fx.t.url, fx.t.token, "GET", `/v1/sandboxes/${NAME}/files?path=/sandbox/one-gib`, { keep: false, onChunk: (c) => (bytes += c.length) });
    const growth = peak() - base;
    expect(r.status).toBe(200);
    expect(r.result).toEqual({ ok: true, path: "/sandbox/one-gib", entries: 1, skipped: 0, bytes: GIB });
    expect(bytes).toBe(GIB + 512 + 1024);
    expect(growth, `peak RSS grew by ${Math.round(growth / MIB)} MiB`).toBeLessThan(64 * MIB);
    await sh("rm /sandbox/one-gib");
  }, 600_000);

  it("256 MiB into the workspace from a stream: stored exactly, the gateway's peak memory grows by a small fraction of it", async () => {
    const size = 256 * MIB;
    const block = randomBytes(MIB);
    async function* body(): AsyncGenerator<Buffer> {
      yield archive([{ name: "upload.bin", size }], { end: false }).subarray(0, 512);
      for (let i = 0; i < size / MIB; i++) yield block;
      yield Buffer.alloc(1024);
    }
    const base = resetPeak();
    const r = await putTar("/sandbox", body());
    const growth = peak() - base;
    expect([r.status, r.json]).toEqual([200, { ok: true, path: "/sandbox", entries: 1, skipped: 0, bytes: size }]);
    expect(growth, `peak RSS grew by ${Math.round(growth / MIB)} MiB`).toBeLessThan(32 * MIB);
    const check = await sh("stat -c %s /sandbox/upload.bin && head -c 1048576 /sandbox/upload.bin | md5sum && tail -c 1048576 /sandbox/upload.bin | md5sum");
    const { createHash } = await import("node:crypto");
    const md5 = createHash("md5").update(block).digest("hex");
    expect(check.stdout.split("\n").slice(0, 3).map((l) => l.split(" ")[0])).toEqual([String(size), md5, md5]);
    await sh("rm /sandbox/upload.bin");
  }, 600_000);
});
