// The files API end to end through a real gateway and HTTP, on the in-memory driver
// with execs run on this host (LocalExecDriver, a TEST DOUBLE: the real programs,
// busybox's tools, /sandbox mapped to a temp dir). Uploads and downloads, the
// trailer, every refusal as a one-line error with its status, hostile tar streams
// from the "workload" and from the client, limits: bytes, members, concurrency,
// idleness. The real container is test/integration/sandbox-cp.test.ts.
import { existsSync, lstatSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { readTar } from "../../../src/files/tar-stream.js";
import { startTestGateway, eventually, type TestGateway } from "../../support/gateway-fixture.js";
import { filesRequest } from "../../support/files-http.js";
import { LocalExecDriver } from "../../support/local-exec-driver.js";
import { archive, chunks, collect, type CraftMember } from "../../support/tar-craft.js";

let dir: string;
let driver: LocalExecDriver;
let t: TestGateway;
const NAME = "files";
const LIMITS = { maxBytes: 4 * 1024 * 1024, maxEntries: 50, perSandbox: 1, concurrent: 2, idleTimeoutMs: 1500 };

const get = (path: string, opts: Parameters<typeof filesRequest>[4] = {}) => filesRequest(t.url, t.token, "GET", `/v1/sandboxes/${NAME}/files?path=${encodeURIComponent(path)}`, opts);
const stat = (path: string) => t.api("GET", `/v1/sandboxes/${NAME}/files/stat?path=${encodeURIComponent(path)}`);
const putTar = (path: string, body: Buffer | AsyncIterable<Buffer>, headers: Record<string, string> = {}) =>
  filesRequest(t.url, t.token, "PUT", `/v1/sandboxes/${NAME}/files?path=${encodeURIComponent(path)}`, { body, headers: { "content-type": "application/x-tar", ...headers } });
const putFile = (path: string, body: Buffer, query = "", headers: Record<string, string> = {}) =>
  filesRequest(t.url, t.token, "PUT", `/v1/sandboxes/${NAME}/files?path=${encodeURIComponent(path)}${query}`, { body, headers: { "content-type": "application/octet-stream", ...headers } });

async function members(body: Buffer): Promise<{ name: string; type: string; mode: number; data: string }[]> {
  const out: { name: string; type: string; mode: number; data: string }[] = [];
  for await (const e of readTar(chunks(body, 4096))) out.push({ name: e.header.name, type: e.header.type, mode: e.header.mode, data: (await collect(e.data)).toString() });
  return out;
}

const ws = (...p: string[]): string => join(driver.workspace, ...p);

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "sg-files-api-"));
  driver = new LocalExecDriver(join(dir, "ws"), dir);
  t = await startTestGateway(driver, { files: LIMITS });
  expect((await t.api("POST", "/v1/sandboxes", { name: NAME })).status).toBe(201);
  await eventually(async () => ((await t.api("GET", `/v1/sandboxes/${NAME}`)).body.phase === "Ready" ? true : undefined));
  // The escapes lead to a decoy beside the workspace (the "workload" here runs as root on this
  // host: nothing may point a write at the host's own files, even with a guard removed).
  mkdirSync(join(dir, "decoy"));
  symlinkSync(join(dir, "decoy"), ws("evil"));
  symlinkSync("/proc/self/root", ws("link"));
  // What tests that do not upload read, and where uploads land: each test passes alone.
  mkdirSync(ws("in"));
  mkdirSync(ws("base"));
  writeFileSync(ws("base", "secret"), "s3cret", { mode: 0o600 });
  writeFileSync(ws("base", "notes.txt"), "n");
});

afterAll(async () => {
  await t.close();
  rmSync(dir, { recursive: true, force: true });
});

describe("upload and download", () => {
  it("a tar goes in with its modes and comes back out, renamed to the path's own name", async () => {
    const tar = archive([
      { name: "proj/", type: "5", mode: 0o755 },
      { name: "proj/run.sh", data: "#!/bin/sh\necho hi\n", mode: 0o755 },
      { name: "proj/secret", data: "s3cret", mode: 0o600 },
      { name: "proj/link", type: "2", linkname: "run.sh" },
    ]);
    const up = await putTar("/sandbox", tar);
    expect([up.status, up.json]).toEqual([200, { ok: true, path: "/sandbox", entries: 4, skipped: 0, bytes: 24 }]);
    expect(lstatSync(ws("proj/run.sh")).mode & 0o7777).toBe(0o755);
    expect(lstatSync(ws("proj/secret")).mode & 0o7777).toBe(0o600);
    const down = await get("/sandbox/proj");
    expect(down.status).toBe(200);
    expect(down.headers["content-type"]).toBe("application/x-tar");
    expect(down.result).toEqual({ ok: true, path: "/sandbox/proj", entries: 4, skipped: 0, bytes: 24 });
    const got = await members(down.body);
    expect(got.map((m) => [m.name, m.type, m.mode.toString(8)]).sort()).toEqual([
      ["proj/", "directory", "755"],
      ["proj/link", "symlink", "777"],
      ["proj/run.sh", "file", "755"],
      ["proj/secret", "file", "600"],
    ]);
    expect(got.find((m) => m.name === "proj/secret")?.data).toBe("s3cret");
  });

  it("a symlink inside the workspace is followed; the tar carries the asked name", async () => {
    symlinkSync(ws("base"), ws("proj-link"));
    const got = await members((await get("/sandbox/proj-link")).body);
    expect(got[0]!.name).toBe("proj-link/");
  });

  it("one file with its mode (application/octet-stream), replaced only once complete", async () => {
    const r = await putFile("/sandbox/notes.txt", Buffer.from("hello"), "&mode=0600");
    expect([r.status, r.json]).toEqual([200, { ok: true, path: "/sandbox/notes.txt", entries: 1, skipped: 0, bytes: 5 }]);
    expect(readFileSync(ws("notes.txt"), "utf8")).toBe("hello");
    expect(lstatSync(ws("notes.txt")).mode & 0o777).toBe(0o600);
    expect((await putFile("/sandbox/run", Buffer.from("#!/bin/sh\n"), "&mode=755")).status).toBe(200);
    expect(lstatSync(ws("run")).mode & 0o777).toBe(0o755);
    // A body shorter than its Content-Length: the client gives up; the old file stays.
    const short = await filesRequest(t.url, t.token, "PUT", `/v1/sandboxes/${NAME}/files?path=/sandbox/notes.txt`, {
      body: (async function* () {
        yield Buffer.from("xy");
        throw new Error("client went away");
      })(),
      headers: { "content-type": "application/octet-stream", "content-length": "10" },
    }).catch((e: unknown) => e);
    expect(short).toBeInstanceOf(Error);
    await eventually(() => (existsSync(ws("notes.txt")) && readFileSync(ws("notes.txt"), "utf8") === "hello" ? true : undefined));
  });

  it("stat: type, mode and size; 404 for a missing path", async () => {
    expect(await stat("/sandbox/base/secret")).toEqual({ status: 200, body: { path: "/sandbox/base/secret", type: "file", mode: 0o600, size: 6 } });
    expect((await stat("/sandbox/base")).body.type).toBe("directory");
    const missing = await stat("/sandbox/nope");
    expect(missing).toEqual({ status: 404, body: { error: { code: "not_found", message: `no such file or directory in sandbox "${NAME}": "/sandbox/nope"` } } });
  });

  it("a transfer is activity (--idle-stop counts it as a session)", async () => {
    const t0 = Date.now();
    expect((await stat("/sandbox/base/notes.txt")).status).toBe(200);
    const { expiry } = (await t.api("GET", `/v1/sandboxes/${NAME}`)).body as { expiry: { lastActivityAt: string | null; openSessions: number } };
    expect(Date.parse(expiry.lastActivityAt ?? "")).toBeGreaterThanOrEqual(t0);
    expect(expiry.openSessions).toBe(0);
  });

  it("the gateway's status shows transfers and their limits", async () => {
    const s = await t.api("GET", "/v1/status");
    expect(s.body.files).toEqual({ active: 0, limits: { maxBytes: LIMITS.maxBytes, maxEntries: 50, symlinkMemoryBytes: 16 * 1024 * 1024, concurrent: 2, perSandbox: 1, idleTimeoutMs: 1500 } });
  });
});

describe("refusals before anything moves", () => {
  it.each([
    ["/sandbox/../etc", 400, 'path "/sandbox/../etc" contains "..": a path must stay inside /sandbox without ".." segments'],
    ["/etc/passwd", 400, 'path "/etc/passwd" is outside /sandbox: sandbox cp reaches only the workspace'],
    ["relative", 400, 'path "relative" is relative; expected an absolute path inside /sandbox (e.g. "/sandbox/relative")'],
  ])("download %s → %i", async (path, status, message) => {
    const r = await get(path);
    expect([r.status, r.json]).toEqual([status, { error: { code: "invalid_request", message } }]);
  });

  it("a symlink out of the workspace, for a download and an upload, names where it leads", async () => {
    const execs = driver.argvs.length;
    const decoy = join(dir, "decoy");
    const a = await get("/sandbox/evil");
    expect([a.status, a.json.error.message]).toEqual([400, `path "/sandbox/evil" resolves to ${JSON.stringify(decoy)}, outside /sandbox: a symlink may not lead out of the workspace`]);
    const b = await get("/sandbox/link/etc/passwd");
    expect(b.json.error.message).toBe('path "/sandbox/link/etc/passwd" resolves to "/etc/passwd", outside /sandbox: a symlink may not lead out of the workspace');
    const c = await putTar("/sandbox/evil", archive([{ name: "sg-never", data: "x" }]));
    expect([c.status, c.json.error.message]).toEqual([400, `path "/sandbox/evil" resolves to ${JSON.stringify(decoy)}, outside /sandbox: a symlink may not lead out of the workspace`]);
    const d = await putFile("/sandbox/evil/sg-never", Buffer.from("x"));
    expect(d.status).toBe(400);
    const e = await putTar(`/sandbox/link${decoy}`, archive([{ name: "sg-never", data: "x" }]));
    expect(e.status).toBe(400);
    expect(readdirSync(decoy)).toEqual([]);
    expect(driver.argvs.length - execs).toBe(5);
  });

  it("missing query, bad mode, wrong content type, mode with a tar, no Content-Length for one file", async () => {
    expect((await filesRequest(t.url, t.token, "GET", `/v1/sandboxes/${NAME}/files`)).json).toEqual({ error: { code: "invalid_request", message: "path: required, an absolute path inside /sandbox" } });
    expect((await putFile("/sandbox/x", Buffer.from("x"), "&mode=4755")).json.error.message).toBe("mode: expected octal permissions from 000 to 777, such as 644 or 0755");
    expect((await putTar("/sandbox", Buffer.from("{}"), { "content-type": "application/json" })).json.error.message).toBe(
      'content-type must be application/x-tar (a tar, extracted into the directory path) or application/octet-stream (one file written at path); got "application/json"',
    );
    expect((await filesRequest(t.url, t.token, "PUT", `/v1/sandboxes/${NAME}/files?path=/sandbox&mode=644`, { body: archive([]), headers: { "content-type": "application/x-tar" } })).json.error.message).toBe(
      "mode: applies to a single-file upload (application/octet-stream); a tar carries each member's mode",
    );
    const chunked = await filesRequest(t.url, t.token, "PUT", `/v1/sandboxes/${NAME}/files?path=/sandbox/x`, { body: chunks(Buffer.from("abc")), headers: { "content-type": "application/octet-stream" } });
    expect([chunked.status, chunked.json.error.message]).toEqual([400, "a single-file upload (application/octet-stream) needs a Content-Length; send a tar (application/x-tar) to stream without one"]);
  });

  it("an upload over the byte limit by its Content-Length is refused before any exec (413)", async () => {
    const execs = driver.argvs.length;
    const r = await putTar("/sandbox", Buffer.alloc(LIMITS.maxBytes + 512));
    expect([r.status, r.json.error]).toEqual([413, { code: "too_large", message: `the upload is ${LIMITS.maxBytes + 512} bytes, past the limit of ${LIMITS.maxBytes} bytes per transfer (SANDGATE_CP_MAX_BYTES)` }]);
    expect(driver.argvs.length).toBe(execs);
  });

  it("a tar into a file, a file onto a directory: refused naming the rule", async () => {
    expect((await putTar("/sandbox/base/notes.txt", archive([{ name: "x" }]))).json.error.message).toBe(`"/sandbox/base/notes.txt" is not a directory in sandbox "${NAME}"; a tar is extracted into an existing directory`);
    expect((await putFile("/sandbox/base", Buffer.from("x"))).json.error.message).toBe(`"/sandbox/base" is a directory in sandbox "${NAME}"; a single-file upload names the file to write`);
  });
});

describe("hostile tar streams from the client", () => {
  it.each<[string, CraftMember[], string]>([
    ["a ../ member", [{ name: "../escape", data: "x" }], 'member "../escape" contains "..": members must stay inside the destination'],
    ["an absolute member", [{ name: "/abs-escape", data: "x" }], 'member "/abs-escape" has an absolute name; members must be relative to the destination'],
    ["a symlink then a file through it", [{ name: "up", type: "2", linkname: ".." }, { name: "up/escape", data: "x" }], 'member "up/escape" goes through the symbolic link "up" of the same archive; a member is never written through a symlink'],
    ["a hard link to outside", [{ name: "hl", type: "1", linkname: "../../etc/passwd" }], 'hard link target "../../etc/passwd" contains "..": members must stay inside the destination'],
  ])("%s is refused with 400, naming it; nothing lands outside", async (_what, ms, message) => {
    const r = await putTar("/sandbox/in", archive(ms));
    expect([r.status, r.json.error.code]).toEqual([400, "invalid_request"]);
    expect(r.json.error.message.startsWith(message)).toBe(true);
    expect(existsSync(join(driver.workspace, "..", "escape"))).toBe(false);
    expect(existsSync(ws("escape"))).toBe(false);
    expect(existsSync("/abs-escape")).toBe(false);
  });

  it("a refusal after some members says how many were written", async () => {
    const r = await putTar("/sandbox/in", archive([{ name: "ok1", data: "1" }, { name: "ok2", data: "2" }, { name: "../bad", data: "x" }]));
    expect(r.json.error.message).toBe('member "../bad" contains "..": members must stay inside the destination; the 2 members before it were written');
    expect(readFileSync(ws("in/ok2"), "utf8")).toBe("2");
  });

  it("a stream that is not tar, or ends early, is a 400", async () => {
    expect((await putTar("/sandbox/in", Buffer.from("x".repeat(1024)))).json.error.message).toBe("not a valid tar stream: a header block with a wrong checksum (not a tar stream, or a corrupt one)");
    expect((await putTar("/sandbox/in", archive([{ name: "f", data: "x" }], { end: false }))).json.error.message).toMatch(/^not a valid tar stream: the stream ended without the end-of-archive marker/);
  });

  it("a streamed upload over the byte limit is refused at the limit (413), and the gateway answers the next one", async () => {
    let sent = 0;
    async function* endless(): AsyncGenerator<Buffer> {
      yield archive([{ name: "big", data: Buffer.alloc(0), size: 0 }], { end: false });
      for (;;) {
        sent += 65536;
        yield Buffer.concat([archive([{ name: `f${sent}`, data: Buffer.alloc(64000) }], { end: false })]);
      }
    }
    const r = await putTar("/sandbox/in", endless());
    expect([r.status, r.json.error.code]).toEqual([413, "too_large"]);
    expect(sent).toBeLessThan(LIMITS.maxBytes * 4);
    expect((await putTar("/sandbox/in", archive([{ name: "after", data: "ok" }]))).status).toBe(200);
  });

  it("more members than the limit is a 413", async () => {
    const many = archive(Array.from({ length: LIMITS.maxEntries + 1 }, (_, i) => ({ name: `m${i}`, data: "" })));
    const r = await putTar("/sandbox/in", many);
    expect([r.status, r.json.error.message.startsWith(`more than ${LIMITS.maxEntries} members in one transfer`)]).toEqual([413, true]);
  });
});

describe("hostile tar streams from the workload", () => {
  const hostile = async (tar: Buffer | ((argv: string[]) => AsyncIterable<Buffer>)) => {
    driver.hostileDownload = tar;
    try {
      return await get("/sandbox/proj");
    } finally {
      driver.hostileDownload = undefined;
    }
  };

  it.each<[string, CraftMember[], string]>([
    ["a ../ member", [{ name: "proj/", type: "5" }, { name: "proj/../../x", data: "x" }], 'member "proj/../../x" contains "..": members must stay inside the destination'],
    ["an absolute member", [{ name: "/etc/cron.d/x", data: "x" }], 'member "/etc/cron.d/x" has an absolute name; members must be relative to the destination'],
    ["a member outside the asked path", [{ name: "proj/", type: "5" }, { name: "other/x", data: "x" }], 'member "other/x" is not under "proj", the path that was asked for'],
    ["a hard link out of the asked path", [{ name: "proj/", type: "5" }, { name: "proj/h", type: "1", linkname: "etc/shadow" }], 'hard link target "etc/shadow" is not under "proj", the path that was asked for'],
    ["a GNU sparse member", [{ name: "proj/", type: "5" }, { name: "proj/s", type: "S" }], 'not a valid tar stream: member "proj/s" has tar type "S"'],
  ])("%s ends the download with an error in the trailer and no end-of-archive marker", async (_what, ms, message) => {
    const r = await hostile(archive(ms));
    expect(r.status).toBe(200);
    expect(r.result.ok).toBe(false);
    expect(r.result.error.message.startsWith(message)).toBe(true);
    await expect(members(r.body)).rejects.toThrow(/ended/);
  });

  it("a tar that exits non-zero after a whole archive (a file it could not read): the copy never looks complete", async () => {
    driver.hostileExitCode = 1;
    try {
      const r = await hostile(archive([{ name: "proj/", type: "5" }, { name: "proj/readable", data: "x" }]));
      expect(r.result.error).toEqual({ code: "internal", message: 'tar in sandbox "files" failed (exit 1): tar: ./secret: Permission denied' });
      await expect(members(r.body)).rejects.toThrow(/end-of-archive marker/);
    } finally {
      driver.hostileExitCode = 0;
    }
  });

  it("device nodes and FIFOs are skipped and counted; set-id bits dropped", async () => {
    const r = await hostile(archive([{ name: "proj/", type: "5" }, { name: "proj/dev", type: "3" }, { name: "proj/p", type: "6" }, { name: "proj/suid", data: "x", mode: 0o4755 }]));
    expect(r.result).toEqual({ ok: true, path: "/sandbox/proj", entries: 2, skipped: 2, bytes: 1 });
    expect((await members(r.body)).map((m) => [m.name, m.mode.toString(8)])).toEqual([["proj/", "644"], ["proj/suid", "755"]]);
  });

  it("a member declaring more than the byte limit is refused before its data is read", async () => {
    const r = await hostile(archive([{ name: "proj", size: 1024 ** 3 }], { end: false }));
    expect(r.result.error).toEqual({ code: "too_large", message: `member "proj" is ${1024 ** 3} bytes, past the limit of ${LIMITS.maxBytes} bytes per transfer (SANDGATE_CP_MAX_BYTES)` });
  });

  it("a workload that stops sending is ended after the idle timeout, and its slot is free again", async () => {
    const r = await hostile(() =>
      (async function* () {
        yield archive([{ name: "proj/", type: "5" }], { end: false });
        await new Promise(() => undefined);
      })(),
    );
    expect(r.result.error.message).toBe("nothing moved for 1.5 s from the sandbox; the transfer was ended (SANDGATE_CP_IDLE_TIMEOUT)");
    await eventually(async () => ((await t.api("GET", "/v1/status")).body.files.active === 0 ? true : undefined));
  });
});

describe("limits and phases", () => {
  it("a second transfer on the same sandbox while one runs is refused (503) naming the limit; afterwards it goes", async () => {
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    driver.hostileDownload = () =>
      (async function* () {
        yield archive([{ name: "proj/", type: "5" }], { end: false });
        await held;
        yield archive([]);
      })();
    const first = get("/sandbox/proj");
    await eventually(async () => ((await t.api("GET", "/v1/status")).body.files.active === 1 ? true : undefined));
    const second = await get("/sandbox/proj");
    expect([second.status, second.json.error.message]).toEqual([503, `sandbox "${NAME}" already has 1 file transfers running; the limit is 1 (SANDGATE_CP_PER_SANDBOX); try again when one ends`]);
    release();
    expect((await first).result.ok).toBe(true);
    driver.hostileDownload = undefined;
    expect((await get("/sandbox/base")).result.ok).toBe(true);
  });

  it("a client that goes away mid-download frees its slot and its exec", async () => {
    writeFileSync(ws("big.bin"), Buffer.alloc(3 * 1024 * 1024, 1));
    const closed = driver.closedExecs;
    await new Promise<void>((resolve) => {
      const ac = new AbortController();
      void t.fetch(`/v1/sandboxes/${NAME}/files?path=/sandbox/big.bin`, { headers: { authorization: `Bearer ${t.token}` }, signal: ac.signal })
        .then(async (res) => {
          const reader = res.body!.getReader();
          await reader.read();
          ac.abort();
        })
        .catch(() => undefined)
        .finally(resolve);
    });
    await eventually(async () => ((await t.api("GET", "/v1/status")).body.files.active === 0 && driver.closedExecs > closed ? true : undefined));
  });

  it("a sandbox that is not Ready: 409, one line, nothing run", async () => {
    expect((await t.api("POST", `/v1/sandboxes/${NAME}/stop`)).status).toBe(202);
    await eventually(async () => ((await t.api("GET", `/v1/sandboxes/${NAME}`)).body.phase === "Stopped" ? true : undefined));
    const execs = driver.argvs.length;
    const r = await get("/sandbox");
    expect([r.status, r.json]).toEqual([409, { error: { code: "not_allowed", message: `cannot copy files with sandbox "${NAME}": it is Stopped; sandbox cp needs Ready` } }]);
    expect((await putTar("/sandbox", archive([]))).status).toBe(409);
    expect((await stat("/sandbox")).status).toBe(409);
    expect(driver.argvs.length).toBe(execs);
    expect((await get("/sandbox").then(() => filesRequest(t.url, t.token, "GET", `/v1/sandboxes/nope/files?path=/sandbox`))).status).toBe(404);
    expect((await t.api("POST", `/v1/sandboxes/${NAME}/start`)).status).toBe(202);
    await eventually(async () => ((await t.api("GET", `/v1/sandboxes/${NAME}`)).body.phase === "Ready" ? true : undefined));
  });
});
