// The ids the two containers run as, and the check that no host account or group
// holds them. Without user namespaces a container's uid is the host's uid: a host
// user with the same id could read the supervisor's launch token through
// /proc/PID/root, ptrace it, and write into workspaces. So both roles run as ids
// from a high range no host account uses (distinct per role), checked against the
// host's passwd, group, subuid and subgid at gateway start. Pure: the caller reads
// the files.

export interface RoleIds {
  /** uid and gid of the workload's processes; owner of the workspace. */
  workload: number;
  /** uid and gid of the supervisor; owner of its launch files. */
  supervisor: number;
}

export const DEFAULT_UID_BASE = 2_000_000_000;
/**
 * Above every 16-bit id (nobody is 65534) and the usual subordinate ranges'
 * start; base+1 stays within a signed 32-bit id (what Docker, runc and the
 * policy's process.user accept).
 */
export const UID_BASE_RANGE = { min: 65_536, max: 2_147_483_646 } as const;

export function roleIds(base: number): RoleIds {
  return { workload: base, supervisor: base + 1 };
}

/** `--uid-base` / SANDGATE_UID_BASE: a decimal integer in UID_BASE_RANGE, else a one-line error. */
export function parseUidBase(text: string): { ok: true; base: number } | { ok: false; error: string } {
  const range = `an integer from ${UID_BASE_RANGE.min} to ${UID_BASE_RANGE.max}`;
  if (!/^[0-9]{1,10}$/.test(text)) return { ok: false, error: `invalid uid base ${JSON.stringify(text)}: expected ${range}` };
  const n = Number(text);
  if (n < UID_BASE_RANGE.min || n > UID_BASE_RANGE.max) return { ok: false, error: `invalid uid base ${text}: expected ${range}` };
  return { ok: true, base: n };
}

/** The host's account databases, as text (a missing file is ""). */
export interface HostIdFiles {
  passwd: string;
  group: string;
  subuid: string;
  subgid: string;
}

function lines(text: string): string[][] {
  return text
    .split("\n")
    .map((l) => l.trim())
    .filter((l) => l !== "" && !l.startsWith("#"))
    .map((l) => l.split(":"));
}

/**
 * Every way the host already uses one of the ids: a user's uid or primary gid,
 * a group's gid, or a subordinate range (a rootless runtime's user owns those
 * ids in its containers). Empty when the ids are free.
 */
export function hostIdConflicts(ids: RoleIds, files: HostIdFiles): string[] {
  const conflicts: string[] = [];
  const wanted = new Map<number, string>([
    [ids.workload, "workload"],
    [ids.supervisor, "supervisor"],
  ]);
  const hit = (id: number, what: string): void => {
    const role = wanted.get(id);
    if (role !== undefined) conflicts.push(`${role} id ${id} is ${what}`);
  };
  for (const f of lines(files.passwd)) {
    if (f.length < 4) continue;
    hit(Number(f[2]), `the uid of host user ${f[0]} (/etc/passwd)`);
    hit(Number(f[3]), `the primary gid of host user ${f[0]} (/etc/passwd)`);
  }
  for (const f of lines(files.group)) {
    if (f.length < 3) continue;
    hit(Number(f[2]), `the gid of host group ${f[0]} (/etc/group)`);
  }
  for (const [text, file] of [
    [files.subuid, "/etc/subuid"],
    [files.subgid, "/etc/subgid"],
  ] as const) {
    for (const f of lines(text)) {
      if (f.length < 3 || !/^[0-9]+$/.test(f[1]!) || !/^[0-9]+$/.test(f[2]!)) continue;
      const start = Number(f[1]);
      const end = start + Number(f[2]);
      for (const [id, role] of wanted) {
        if (id >= start && id < end) conflicts.push(`${role} id ${id} is in the subordinate range ${start}-${end - 1} of ${f[0]} (${file})`);
      }
    }
  }
  return conflicts;
}
