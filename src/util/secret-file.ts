// One way to create a secret file once (a token, a key): made with mode 0600 by the first
// caller, never overwritten, and read back by every caller, so two processes starting at once
// agree on one value. Used for the API and approver tokens, the secrets' data key, the launch
// tokens' signing key and the gateway's id.
//
// The value is written to a private temporary file (O_EXCL|O_NOFOLLOW, 0600) and hard-linked
// into place: link(2) fails with EEXIST when anything is already there (a symbolic link
// included, dangling or not), so the file is never overwritten and never seen half written.
// Reading opens it with O_NOFOLLOW and checks what was opened: a regular file owned by this
// user. A symbolic link or a file another user planted is refused, never followed or trusted.
import { randomBytes } from "node:crypto";
import { closeSync, constants, fchmodSync, fstatSync, linkSync, lstatSync, openSync, readFileSync, unlinkSync, writeSync } from "node:fs";

const MODE = 0o600;

/**
 * The content of `path`, first created with `make()`'s value when there is nothing there.
 * The file ends mode 0600 (a looser mode is tightened, as every caller did). Throws, naming
 * the path, when it is a symbolic link, not a regular file, or owned by another user.
 */
export function writeSecretFileOnce(path: string, make: () => string | Buffer): Buffer {
  // lstat: a symbolic link, even a dangling one, is something there (readOwn refuses it).
  if (lstatSync(path, { throwIfNoEntry: false }) === undefined) createExclusive(path, make());
  return readOwn(path);
}

function createExclusive(path: string, value: string | Buffer): void {
  const tmp = `${path}.tmp-${process.pid}-${randomBytes(4).toString("hex")}`;
  const fd = openSync(tmp, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, MODE);
  try {
    try {
      writeSync(fd, typeof value === "string" ? Buffer.from(value) : value);
    } finally {
      closeSync(fd);
    }
    try {
      linkSync(tmp, path);
    } catch (err) {
      // Another process made it first (or something sits there): never overwritten; readOwn decides.
      if (codeOf(err) !== "EEXIST") throw err;
    }
  } finally {
    unlinkSync(tmp);
  }
}

function readOwn(path: string): Buffer {
  let fd: number;
  try {
    fd = openSync(path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch (err) {
    if (codeOf(err) === "ELOOP") throw new Error(`refusing ${path}: it is a symbolic link (a secret file must be a regular file of this user's)`);
    throw err;
  }
  try {
    const st = fstatSync(fd);
    if (!st.isFile()) throw new Error(`refusing ${path}: it is not a regular file`);
    const uid = process.geteuid?.();
    if (uid !== undefined && st.uid !== uid) throw new Error(`refusing ${path}: it is owned by uid ${st.uid}, not by this user (uid ${uid})`);
    if ((st.mode & 0o777) !== MODE) fchmodSync(fd, MODE);
    return readFileSync(fd);
  } finally {
    closeSync(fd);
  }
}

function codeOf(err: unknown): unknown {
  return err instanceof Error && "code" in err ? err.code : undefined;
}
