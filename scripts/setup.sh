#!/usr/bin/env bash
# Installs everything Sandgate's demo and tests need on a fresh Debian machine:
# node modules (npm ci, when missing or out of date), Debian's docker.io,
# busybox-static, tmux, iproute2, the client test image's curl, git and python3, and
# the benchmarks' reference proxies tinyproxy and squid (when missing; see
# scripts/ensure-docker.sh), then builds the project.
set -euo pipefail
cd "$(dirname "$0")/.."

stamp=node_modules/.sandgate-lock
if [ ! -f "$stamp" ] || ! cmp -s package-lock.json "$stamp"; then
  echo "setup: npm ci (better-sqlite3 builds from source: about a minute on 2 cores)"
  npm ci --no-audit --no-fund --loglevel=error
  cp package-lock.json "$stamp"
fi
bash scripts/ensure-docker.sh
echo "setup: building"
npm run --silent build
