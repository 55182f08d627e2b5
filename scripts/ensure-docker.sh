#!/usr/bin/env bash
# Make sure this machine has what the Docker integration tests and the demo need:
# dockerd (Debian's docker.io, which brings containerd and runc), busybox-static,
# tmux, iproute2, and the clients of the client test image (test/support/client-image.ts):
# curl, git (its https remote helper) and Debian's python3.11 with the stdlib urllib and
# ssl need. Installs only what is missing, with apt-get, as root.
set -euo pipefail

need=()
have() { command -v "$1" >/dev/null 2>&1 || [ -x "/usr/sbin/$1" ] || [ -x "/sbin/$1" ]; }

have dockerd || need+=(docker.io)
# busybox-static: a statically linked /bin/busybox that runs inside images without libraries.
static_busybox() { [ -x /bin/busybox ] && ! ldd /bin/busybox >/dev/null 2>&1; }
if ! static_busybox; then
  need+=(busybox-static)
fi
have tmux || need+=(tmux)
have ip || need+=(iproute2)
# Fixed paths, not PATH: the image copies these files (a pyenv python3 on PATH does not count).
[ -x /usr/bin/curl ] || need+=(curl)
[ -x /usr/lib/git-core/git-remote-http ] || need+=(git)
[ -x /usr/bin/python3.11 ] && [ -f /usr/lib/python3.11/ssl.py ] || need+=(python3-minimal)
[ -f /usr/lib/python3.11/http/client.py ] || need+=(libpython3.11-stdlib)

if [ ${#need[@]} -eq 0 ]; then
  echo "ensure-docker: dockerd, busybox (static), tmux, ip, curl, git and python3.11 are present; nothing to install"
  exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
  echo "ensure-docker: missing ${need[*]}, and installing needs root (run as root or with sudo)" >&2
  exit 1
fi

echo "ensure-docker: installing ${need[*]}"
export DEBIAN_FRONTEND=noninteractive
log=$(mktemp /tmp/ensure-docker.XXXXXX.log)
if ! apt-get update -qq >"$log" 2>&1; then
  echo "ensure-docker: apt-get update failed; last lines of $log:" >&2
  tail -n 20 "$log" >&2
  exit 1
fi
if ! apt-get install -y -qq --no-install-recommends "${need[@]}" >>"$log" 2>&1; then
  echo "ensure-docker: apt-get install ${need[*]} failed; last lines of $log:" >&2
  tail -n 20 "$log" >&2
  exit 1
fi

for bin in dockerd containerd runc; do
  if ! have "$bin"; then
    echo "ensure-docker: $bin still missing after installing ${need[*]}" >&2
    exit 1
  fi
done
if ! static_busybox; then
  echo "ensure-docker: /bin/busybox is missing or not static after installing busybox-static" >&2
  exit 1
fi
for f in /usr/bin/curl /usr/lib/git-core/git-remote-http /usr/bin/python3.11 /usr/lib/python3.11/http/client.py; do
  if [ ! -e "$f" ]; then
    echo "ensure-docker: $f still missing after installing ${need[*]}" >&2
    exit 1
  fi
done
rm -f "$log"
echo "ensure-docker: installed ${need[*]} ($(dockerd --version 2>/dev/null || echo dockerd))"
