#!/usr/bin/env bash
# The main job: installs what is missing (npm ci, Debian's docker.io), builds,
# then runs a real demo on a private Docker daemon with live-restore: create a
# sandbox, run commands, enforce egress policy, restart the Docker daemon, and
# show the sandbox still Ready and still enforcing. Cleans up after itself.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/node-env.sh # Node 24 first on PATH for everything below (installed when missing)
bash scripts/setup.sh
exec node --import tsx scripts/demo.ts
