#!/usr/bin/env bash
# Cleanup for a private dockerd (test/support/dockerd.ts).
#   dockerd-cleanup.sh now  DIR NAMESPACE POOL_PREFIX LOCK
#   dockerd-cleanup.sh reap DIR NAMESPACE POOL_PREFIX LOCK OWNER_PID   (waits for OWNER_PID to die first)
# Kills every process whose command line names DIR/ or "-namespace NAMESPACE " (dockerd,
# its managed containerd, the shims that outlive a live-restore daemon) and all their
# descendants (the containers); deletes br-* bridges holding an address that starts with
# POOL_PREFIX (the /16 reserved for this daemon alone) and the bridge of every network in
# the daemon's store (internal networks have no address); unmounts everything under DIR;
# removes DIR and the pool LOCK file.
set -u
mode=$1 dir=$2 ns=$3 pool=$4 lock=$5

if [ "$mode" = reap ]; then
  owner=$6
  while kill -0 "$owner" 2>/dev/null; do sleep 1; done
fi

declare -A parent
roots=()
for p in /proc/[0-9]*; do
  pid=${p#/proc/}
  [ "$pid" = "$$" ] && continue
  st=$(cat "$p/stat" 2>/dev/null) || continue
  rest=${st##*) }
  read -r _state ppid _ <<<"$rest"
  parent[$pid]=$ppid
  cmd=$(tr '\0' ' ' <"$p/cmdline" 2>/dev/null) || continue
  case "$cmd" in
    *"$dir/"* | *"-namespace $ns "*) roots+=("$pid") ;;
  esac
done

victims=("${roots[@]}")
frontier=("${roots[@]}")
while [ ${#frontier[@]} -gt 0 ]; do
  next=()
  for c in "${!parent[@]}"; do
    for q in "${frontier[@]}"; do
      if [ "${parent[$c]}" = "$q" ]; then next+=("$c"); victims+=("$c"); fi
    done
  done
  frontier=("${next[@]}")
done

if [ ${#victims[@]} -gt 0 ]; then
  kill -CONT "${victims[@]}" 2>/dev/null
  kill -KILL "${victims[@]}" 2>/dev/null
  for _ in $(seq 1 50); do
    alive=0
    for q in "${victims[@]}"; do
      if [ -e "/proc/$q" ] && ! grep -q '^State:[[:space:]]*Z' "/proc/$q/status" 2>/dev/null; then alive=1; fi
    done
    [ $alive = 0 ] && break
    sleep 0.1
  done
fi

if [ -n "$pool" ] && [ "$pool" != - ]; then
  ip -o -4 addr show 2>/dev/null | awk -v pool="$pool" 'index($4, pool) == 1 { print $2 }' | sort -u |
    while read -r ifc; do
      case "$ifc" in br-*) ip link delete "$ifc" 2>/dev/null ;; esac
    done
fi

# Networks without an IPv4 address on the host (internal ones with inhibit_ipv4) are
# not found by the pool above: delete the bridge of every network this daemon's
# store knows (br- + the first 12 hex digits of the network id).
kv="$dir/data/network/files/local-kv.db"
if [ -f "$kv" ]; then
  grep -aoE 'network/[0-9a-f]{64}' "$kv" 2>/dev/null | sort -u | while read -r key; do
    ifc="br-${key:8:12}"
    if [ -e "/sys/class/net/$ifc/bridge" ]; then ip link delete "$ifc" 2>/dev/null; fi
  done
fi

for _ in 1 2 3; do
  mounts=$(awk -v d="$dir" '$5 == d || index($5, d "/") == 1 { print $5 }' /proc/self/mountinfo | sort -r)
  [ -z "$mounts" ] && break
  for m in $mounts; do umount -l "$m" 2>/dev/null; done
done

rm -rf "$dir" 2>/dev/null || { sleep 0.5; rm -rf "$dir"; }
if [ -n "$lock" ] && [ "$lock" != - ]; then rm -f "$lock"; fi
exit 0
