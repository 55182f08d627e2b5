// The ids the two containers run as, and the check that no host account or group
// holds them. Without user namespaces a container's uid is the host's uid: a host
// user with the same id could read the supervisor's launch token through
// /proc/PID/root, ptrace it, and write into workspaces. So both roles run as ids
// from a high range no host account uses (distinct per role), checked against the
// host's passwd, group, subuid and subgid at gateway start; a policy's process.user
// is checked the same way (and against the supervisor's id) when a policy is given.
// Pure: the caller reads the files.

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

/** An id to look for: how messages name it, and whether it is used as a uid, a gid or both. */
interface Sought {
  id: number;
  label: string;
  as: "uid" | "gid" | "both";
}

/**
 * Every way the host already uses one of the ids: a user's uid or primary gid, a group's
 * gid, or a subordinate range (a rootless runtime's user owns those ids in its containers).
 * A uid is looked for among uids, a gid among gids.
 */
function heldOnHost(sought: readonly Sought[], files: HostIdFiles): string[] {
  const conflicts: string[] = [];
  const usedAs = (s: Sought, as: "uid" | "gid"): boolean => s.as === "both" || s.as === as;
  const hit = (id: number, as: "uid" | "gid", what: string): void => {
    for (const s of sought) if (s.id === id && usedAs(s, as)) conflicts.push(`${s.label} ${id} is ${what}`);
  };
  for (const f of lines(files.passwd)) {
    if (f.length < 4) continue;
    hit(Number(f[2]), "uid", `the uid of host user ${f[0]} (/etc/passwd)`);
    hit(Number(f[3]), "gid", `the primary gid of host user ${f[0]} (/etc/passwd)`);
  }
  for (const f of lines(files.group)) {
    if (f.length < 3) continue;
    hit(Number(f[2]), "gid", `the gid of host group ${f[0]} (/etc/group)`);
  }
  for (const [text, file, as] of [
    [files.subuid, "/etc/subuid", "uid"],
    [files.subgid, "/etc/subgid", "gid"],
  ] as const) {
    for (const f of lines(text)) {
      if (f.length < 3 || !/^[0-9]+$/.test(f[1]!) || !/^[0-9]+$/.test(f[2]!)) continue;
      const start = Number(f[1]);
      const end = start + Number(f[2]);
      for (const s of sought) {
        if (usedAs(s, as) && s.id >= start && s.id < end) conflicts.push(`${s.label} ${s.id} is in the subordinate range ${start}-${end - 1} of ${f[0]} (${file})`);
      }
    }
  }
  return conflicts;
}

/** The role ids, each used as both uid and gid, against the host's accounts. Empty when the ids are free. */
export function hostIdConflicts(ids: RoleIds, files: HostIdFiles): string[] {
  return heldOnHost(
    [
      { id: ids.workload, label: "workload id", as: "both" },
      { id: ids.supervisor, label: "supervisor id", as: "both" },
    ],
    files,
  );
}

/**
 * A policy's process.user ("uid" or "uid:gid", already validated) against the host's
 * accounts and the supervisor's id: a host user holding the uid could read the workload's
 * files through /proc/PID/root, its environment, and signal or trace it; a group holding
 * the gid gets the workload's group access to its files; the supervisor's id would let the
 * workload act on the supervisor and read its launch token. The workload's own id is fine.
 * With "uid" alone the gid is the image's choice, which no host file says.
 */
export function processUserConflicts(user: string, ids: RoleIds, files: HostIdFiles): string[] {
  const [uid, gid] = user.split(":");
  const sought: Sought[] = [{ id: Number(uid), label: "uid", as: "uid" }];
  if (gid !== undefined) sought.push({ id: Number(gid), label: "gid", as: "gid" });
  const supervisor = sought.filter((s) => s.id === ids.supervisor).map((s) => `${s.label} ${s.id} is the supervisor's id (--uid-base + 1)`);
  return [...supervisor, ...heldOnHost(sought, files)];
}

/** processUserConflicts as the one line a refusal shows, or null when the user is free. */
export function processUserProblem(user: string, ids: RoleIds, files: HostIdFiles): string | null {
  const conflicts = processUserConflicts(user, ids, files);
  if (conflicts.length === 0) return null;
  return `process.user: ${conflicts.join("; ")}; a workload must run as ids that no host account, group or subordinate range holds, nor the supervisor (without process.user it runs as the gateway's workload id)`;
}
