#!/usr/bin/env bash
# The suite under load from a copy of itself (issue 10.5): clones HEAD twice into
# $SOAK_DIR, runs the whole suite PASSES times in a row in copy A while copy B runs
# it over and over beside it, and prints each pass's closing line. Exit 0 only when
# every pass of copy A passed. Not part of the test command (it takes hours on 2 cores).
#   bash scripts/soak.sh [PASSES]        (default 3; SOAK_DIR default /var/tmp/sandgate-soak)
set -uo pipefail
cd "$(dirname "$0")/.."
passes="${1:-3}"
case "$passes" in '' | *[!0-9]* | 0) echo "soak: PASSES must be a whole number from 1, got '$passes'" >&2; exit 2 ;; esac
dir="${SOAK_DIR:-/var/tmp/sandgate-soak}"
rev="$(git rev-parse HEAD)"
rm -rf "$dir" && mkdir -p "$dir"
for copy in a b; do
  git clone --quiet "$PWD" "$dir/$copy" && git -C "$dir/$copy" checkout --quiet "$rev" || exit 1
  # One install at a time.
  (cd "$dir/$copy" && bash scripts/setup.sh >"$dir/$copy-setup.log" 2>&1) || { echo "soak: setup of copy $copy failed (see $dir/$copy-setup.log)" >&2; exit 1; }
done
echo "soak: $rev, $passes pass(es) of copy A beside copy B (logs in $dir)"

touch "$dir/b.running"
(
  n=0
  while [ -f "$dir/b.running" ]; do
    n=$((n + 1))
    (cd "$dir/b" && bash scripts/test.sh >"$dir/b-$n.log" 2>&1)
    echo "copy B run $n: $(tail -n 1 "$dir/b-$n.log")" >>"$dir/b-summary.log"
  done
) &
bpid=$!

failed=0
for i in $(seq 1 "$passes"); do
  (cd "$dir/a" && bash scripts/test.sh >"$dir/a-$i.log" 2>&1)
  rc=$?
  line="$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$dir/a-$i.log" | tail -n 1)"
  echo "copy A pass $i: rc $rc, ${line:-no closing line} ($(date -u +%H:%M:%SZ), load $(cut -d' ' -f1-3 /proc/loadavg))"
  [ "$rc" -eq 0 ] || failed=1
done
rm -f "$dir/b.running"
echo "soak: waiting for copy B's current run to end"
wait "$bpid"
cat "$dir/b-summary.log" 2>/dev/null
[ "$failed" -eq 0 ] && echo "soak: every pass passed" || echo "soak: a pass failed (see $dir/a-*.log)"
exit "$failed"
