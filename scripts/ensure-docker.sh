#!/usr/bin/env bash
# Make sure this machine has what the Docker integration tests and the demo need:
# dockerd (Debian's docker.io, which brings containerd and runc), busybox-static,
# tmux, zsh and fish (completion tests), iproute2, nftables and gcc (the transparent egress path
# and its addon), and the clients of the default workload image (src/driver/docker/workload-clients.ts):
# curl, git (its https remote helper) and Debian's python3.11 with the stdlib urllib and
# ssl need; and the reference proxies the proxy and https benchmarks compare the
# supervisor with (bench/proxy.ts, bench/https.ts): Debian's tinyproxy, squid and
# squid-langpack (squid's error templates); and PostgreSQL 15 (postgresql-15), the fleet's
# store, whose tests start throwaway clusters of their own (test/support/postgres.ts).
# Those are packaged as services: they are
# installed with a policy-rc.d that forbids starting them, so no proxy daemon is left
# running on the host (the benchmarks run their own copies in containers).
# Installs only what is missing, with apt-get, as root.
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
# The shells `sandgate completion zsh|fish` is tested in (test/unit/cli/cli-completion.test.ts).
have zsh || need+=(zsh)
have fish || need+=(fish)
have ip || need+=(iproute2)
# nft: the gateway programs each sandbox's transparent egress (a redirect in the supervisor's
# network namespace); cc: the supervisor's Node-API addon is built at `npm run build`.
have nft || need+=(nftables)
have cc || need+=(gcc)
# Fixed paths, not PATH: the image copies these files (a pyenv python3 on PATH does not count).
[ -x /usr/bin/curl ] || need+=(curl)
[ -x /usr/lib/git-core/git-remote-http ] || need+=(git)
[ -x /usr/bin/python3.11 ] && [ -f /usr/lib/python3.11/ssl.py ] || need+=(python3-minimal)
[ -f /usr/lib/python3.11/http/client.py ] || need+=(libpython3.11-stdlib)
[ -x /usr/bin/ssh ] || need+=(openssh-client)
# The benchmarks' reference proxies (fixed paths: the benches build images from these files).
proxies=()
[ -x /usr/bin/tinyproxy ] || proxies+=(tinyproxy)
[ -x /usr/sbin/squid ] && [ -x /usr/lib/squid/unlinkd ] || proxies+=(squid)
[ -d /usr/share/squid-langpack/templates ] || proxies+=(squid-langpack)
# Debian's default cluster is not started either (policy-rc.d below): tests run their own.
[ -x /usr/lib/postgresql/15/bin/initdb ] && [ -x /usr/bin/psql ] || proxies+=(postgresql-15 postgresql-client-15)

if [ ${#need[@]} -eq 0 ] && [ ${#proxies[@]} -eq 0 ]; then
  echo "ensure-docker: dockerd, busybox (static), tmux, zsh, fish, ip, curl, git, python3.11, ssh, tinyproxy, squid and postgresql-15 are present; nothing to install"
  exit 0
fi

all=("${need[@]}" "${proxies[@]}")
if [ "$(id -u)" -ne 0 ]; then
  echo "ensure-docker: missing ${all[*]}, and installing needs root (run as root or with sudo)" >&2
  exit 1
fi

echo "ensure-docker: installing ${all[*]}"
export DEBIAN_FRONTEND=noninteractive
# fish brings man-db: skip its index rebuild (a minute of CPU on 2 cores, of no use here).
echo "man-db man-db/auto-update boolean false" | debconf-set-selections 2>/dev/null || true
log=$(mktemp /tmp/ensure-docker.XXXXXX.log)
if ! apt-get update -qq >"$log" 2>&1; then
  echo "ensure-docker: apt-get update failed; last lines of $log:" >&2
  tail -n 20 "$log" >&2
  exit 1
fi
if [ ${#need[@]} -gt 0 ] && ! apt-get install -y -qq --no-install-recommends "${need[@]}" >>"$log" 2>&1; then
  echo "ensure-docker: apt-get install ${need[*]} failed; last lines of $log:" >&2
  tail -n 20 "$log" >&2
  exit 1
fi
if [ ${#proxies[@]} -gt 0 ]; then
  # policy-rc.d exit 101 ("action forbidden"): invoke-rc.d and deb-systemd-invoke start no service.
  # An existing policy-rc.d is put back afterwards.
  policy=/usr/sbin/policy-rc.d
  saved=""
  if [ -e "$policy" ]; then
    saved=$(mktemp /tmp/ensure-docker.policy-rc.d.XXXXXX)
    cp -p "$policy" "$saved"
  fi
  restore_policy() { if [ -n "$saved" ]; then cp -p "$saved" "$policy" && rm -f "$saved"; else rm -f "$policy"; fi; }
  trap restore_policy EXIT
  printf '#!/bin/sh\n# ensure-docker: start no service while the benchmark proxies and PostgreSQL are installed\nexit 101\n' >"$policy"
  chmod 755 "$policy"
  if ! apt-get install -y -qq --no-install-recommends "${proxies[@]}" >>"$log" 2>&1; then
    echo "ensure-docker: apt-get install ${proxies[*]} failed; last lines of $log:" >&2
    tail -n 20 "$log" >&2
    exit 1
  fi
  restore_policy
  trap - EXIT
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
for f in /usr/bin/curl /usr/lib/git-core/git-remote-http /usr/bin/python3.11 /usr/lib/python3.11/http/client.py \
  /usr/bin/tinyproxy /usr/sbin/squid /usr/lib/squid/unlinkd /usr/share/squid-langpack/templates \
  /usr/lib/postgresql/15/bin/initdb /usr/bin/psql; do
  if [ ! -e "$f" ]; then
    echo "ensure-docker: $f still missing after installing ${all[*]}" >&2
    exit 1
  fi
done
rm -f "$log"
echo "ensure-docker: installed ${all[*]} ($(dockerd --version 2>/dev/null || echo dockerd))"
