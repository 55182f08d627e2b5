#!/usr/bin/env bash
# Installs everything Sandgate's demo and tests need on a fresh Debian machine:
# Node 24 when the machine's node is older (scripts/node-env.sh: a pinned build from the
# npm registry in .cache/node/), node modules (npm ci, when missing, out of date or built
# for another node), Debian's docker.io, busybox-static, tmux, iproute2, the default
# workload image's curl, git and python3, and the benchmarks' reference proxies tinyproxy
# and squid (when missing; see scripts/ensure-docker.sh), then builds the project.
# Everything here runs on that Node 24; test.sh and demo.sh source node-env.sh too.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/node-env.sh

# The lock file and the node it was installed for: an addon built from source is built for one ABI.
stamp=node_modules/.sandgate-lock
want="$(node --version)
$(cat package-lock.json)"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  echo "setup: npm ci on node $(node --version)"
  npm ci --no-audit --no-fund --loglevel=error
  printf '%s' "$want" >"$stamp"
fi
bash scripts/ensure-docker.sh
echo "setup: building"
npm run --silent build
