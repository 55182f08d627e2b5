// writeSecretFileOnce: the one way the gateway creates a token, key or id file in its home.
import { chmodSync, chownSync, existsSync, lchownSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { writeSecretFileOnce } from "../../../src/util/secret-file.js";

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "sandgate-secret-file-"));
});
afterEach(() => {
  rmSync(dir, { recursive: true, force: true });
});

const mode = (p: string): number => statSync(p).mode & 0o777;
const isRoot = process.geteuid?.() === 0;

describe("writeSecretFileOnce", () => {
  it("creates the file with mode 0600 and returns its content; no temporary file is left", () => {
    const p = join(dir, "token");
    expect(writeSecretFileOnce(p, () => "abc\n").toString()).toBe("abc\n");
    expect(mode(p)).toBe(0o600);
    expect(readdirSync(dir)).toEqual(["token"]);
  });

  it("never overwrites an existing file: the second caller reads the first one's value, make() not called", () => {
    const p = join(dir, "token");
    writeSecretFileOnce(p, () => "first\n");
    let called = false;
    const again = writeSecretFileOnce(p, () => {
      called = true;
      return "second\n";
    });
    expect(again.toString()).toBe("first\n");
    expect(called).toBe(false);
  });

  it("keeps a file that is already there (written by an older gateway) and tightens a looser mode to 0600", () => {
    const p = join(dir, "key");
    writeFileSync(p, "old\n", { mode: 0o644 });
    chmodSync(p, 0o644);
    expect(writeSecretFileOnce(p, () => "new\n").toString()).toBe("old\n");
    expect(mode(p)).toBe(0o600);
  });

  it("refuses a symbolic link to a file, and neither follows nor changes its target", () => {
    const target = join(dir, "elsewhere");
    writeFileSync(target, "attacker's value\n", { mode: 0o644 });
    chmodSync(target, 0o644);
    const p = join(dir, "token");
    symlinkSync(target, p);
    expect(() => writeSecretFileOnce(p, () => "mine\n")).toThrow(`refusing ${p}: it is a symbolic link`);
    expect(mode(target)).toBe(0o644);
    expect(readFileSync(target, "utf8")).toBe("attacker's value\n");
  });

  it("refuses a dangling symbolic link, and creates nothing where it points", () => {
    const target = join(dir, "not-yet");
    const p = join(dir, "token");
    symlinkSync(target, p);
    expect(() => writeSecretFileOnce(p, () => "mine\n")).toThrow(/it is a symbolic link/);
    expect(existsSync(target)).toBe(false);
    expect(lstatSync(p).isSymbolicLink()).toBe(true);
    expect(readdirSync(dir)).toEqual(["token"]);
  });

  it("refuses what is not a regular file", () => {
    const p = join(dir, "token");
    mkdirSync(p);
    expect(() => writeSecretFileOnce(p, () => "x")).toThrow(`refusing ${p}: it is not a regular file`);
  });

  it.skipIf(!isRoot)("refuses a file another user planted (and a symbolic link another user planted), changing neither", () => {
    const p = join(dir, "token");
    writeFileSync(p, "planted\n", { mode: 0o644 });
    chmodSync(p, 0o644);
    chownSync(p, 65534, 65534);
    expect(() => writeSecretFileOnce(p, () => "mine\n")).toThrow(`refusing ${p}: it is owned by uid 65534, not by this user (uid 0)`);
    expect(mode(p)).toBe(0o644);

    const target = join(dir, "target");
    writeFileSync(target, "x");
    const link = join(dir, "approver-token");
    symlinkSync(target, link);
    lchownSync(link, 65534, 65534); // the link itself belongs to the other user
    expect(() => writeSecretFileOnce(link, () => "mine\n")).toThrow(/it is a symbolic link/);
  });

  it("accepts a Buffer value as it is", () => {
    const p = join(dir, "key");
    const value = Buffer.from([0, 1, 2, 255]);
    expect(writeSecretFileOnce(p, () => value)).toEqual(value);
  });

  it("fails, naming the path, where the directory does not exist", () => {
    expect(() => writeSecretFileOnce(join(dir, "missing", "token"), () => "x")).toThrow(/ENOENT/);
  });
});
