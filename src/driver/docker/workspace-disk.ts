// A workspace the kernel keeps to its size: one sparse ext4 image file per sandbox,
// loop-mounted on the host and bind-mounted into the workload as /sandbox. Writing
// past the size fails inside the workload with ENOSPC; the host's free space shrinks
// by at most the image's size.
//
//   <root>/<sandboxId>.img         the filesystem (sparse: holds only what was written)
//   <root>/<sandboxId>/            its mount point (the fs root: root-owned, 0700)
//   <root>/<sandboxId>/workspace/  what the workload sees as /sandbox (owned by its uid)
//
// The bind source is the directory inside the filesystem, so a workspace that is not
// mounted (after a host reboot, before the next start) has no bind source and Docker
// refuses the container: the workload never writes to the host's own disk.
// Mounts outlive the gateway; whether one is in place is read from /proc/self/mountinfo,
// so a start after a host restart mounts it again. Delete unmounts (the loop device
// is released with it: mount -o loop sets autoclear) and removes the image.

import { execFile } from "node:child_process";
import { chmodSync, chownSync, closeSync, existsSync, ftruncateSync, mkdirSync, openSync, readFileSync, renameSync, rmSync, statfsSync } from "node:fs";
import { dirname, join } from "node:path";
import { promisify } from "node:util";

const run = promisify(execFile);

/** The directory inside each filesystem that becomes /sandbox. */
export const WORKSPACE_SUBDIR = "workspace";

/** Mount points of this process's mount namespace (octal escapes of mountinfo decoded). */
export function mountPoints(mountinfo: string): Set<string> {
  const out = new Set<string>();
  for (const line of mountinfo.split("\n")) {
    const field = line.split(" ")[4];
    if (field !== undefined) out.add(field.replace(/\\([0-7]{3})/g, (_, o: string) => String.fromCharCode(parseInt(o, 8))));
  }
  return out;
}

async function tool(cmd: string, args: string[]): Promise<void> {
  try {
    await run(cmd, args, { encoding: "utf8" });
  } catch (err) {
    const e = err as { stderr?: string; message: string };
    throw new Error(`${cmd} ${args.join(" ")}: ${(e.stderr ?? "").trim() || e.message}`);
  }
}

export interface WorkspaceUsage {
  usedBytes: number;
  /** What the filesystem can hold (its size less ext4's own metadata). */
  capacityBytes: number;
}

export class WorkspaceDisks {
  constructor(readonly root: string) {}

  imagePath(sandboxId: string): string {
    return join(this.root, `${sandboxId}.img`);
  }

  mountPath(sandboxId: string): string {
    return join(this.root, sandboxId);
  }

  /** The host directory bind-mounted as /sandbox. */
  dataPath(sandboxId: string): string {
    return join(this.mountPath(sandboxId), WORKSPACE_SUBDIR);
  }

  isMounted(sandboxId: string): boolean {
    return mountPoints(readFileSync("/proc/self/mountinfo", "utf8")).has(this.mountPath(sandboxId));
  }

  /**
   * The workspace of a sandbox, created (sizeBytes) if it has none and mounted if it
   * is not; returns the bind source. Idempotent; never resizes an existing image.
   */
  async ensure(sandboxId: string, sizeBytes: number, owner: number): Promise<string> {
    mkdirSync(this.root, { recursive: true, mode: 0o700 });
    chmodSync(this.root, 0o700);
    const img = this.imagePath(sandboxId);
    if (!existsSync(img)) {
      const tmp = `${img}.tmp`;
      rmSync(tmp, { force: true });
      const fd = openSync(tmp, "w", 0o600);
      try {
        ftruncateSync(fd, sizeBytes);
      } finally {
        closeSync(fd);
      }
      try {
        // No reserved blocks (the workload is the only user); lazy init keeps creation fast.
        await tool("mkfs.ext4", ["-q", "-F", "-m", "0", "-L", "sandgate-ws", "-E", "lazy_itable_init=1,lazy_journal_init=1", tmp]);
      } catch (err) {
        rmSync(tmp, { force: true });
        throw err;
      }
      renameSync(tmp, img);
    }
    const mnt = this.mountPath(sandboxId);
    if (!this.isMounted(sandboxId)) {
      mkdirSync(mnt, { recursive: true, mode: 0o700 });
      await tool("mount", ["-t", "ext4", "-o", "loop,nosuid,nodev,noatime", img, mnt]);
    }
    if (!this.isMounted(sandboxId)) throw new Error(`workspace ${img} is not mounted at ${mnt}`);
    chmodSync(mnt, 0o700);
    const data = this.dataPath(sandboxId);
    if (!existsSync(data)) mkdirSync(data, { mode: 0o755 });
    chownSync(data, owner, owner);
    chmodSync(data, 0o755);
    return data;
  }

  /** The size of the filesystem workspace images are kept on (that of the nearest existing ancestor of the root before the first one). */
  filesystemBytes(): number | null {
    for (let dir = this.root; ; dir = dirname(dir)) {
      try {
        const st = statfsSync(dir);
        return st.blocks * st.bsize;
      } catch {
        if (dirname(dir) === dir) return null;
      }
    }
  }

  /** Used and total bytes of a mounted workspace, or null when it is not mounted. */
  usage(sandboxId: string): WorkspaceUsage | null {
    try {
      if (!this.isMounted(sandboxId)) return null;
      const st = statfsSync(this.mountPath(sandboxId));
      return { usedBytes: (st.blocks - st.bfree) * st.bsize, capacityBytes: st.blocks * st.bsize };
    } catch {
      return null;
    }
  }

  /** Unmount and delete the workspace (its containers must be gone). Idempotent. */
  async remove(sandboxId: string): Promise<void> {
    const mnt = this.mountPath(sandboxId);
    if (this.isMounted(sandboxId)) await tool("umount", [mnt]);
    if (this.isMounted(sandboxId)) throw new Error(`workspace ${mnt} is still mounted`);
    rmSync(mnt, { recursive: true, force: true });
    rmSync(this.imagePath(sandboxId), { force: true });
    rmSync(`${this.imagePath(sandboxId)}.tmp`, { force: true });
  }
}
