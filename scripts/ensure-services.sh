#!/usr/bin/env bash
# Makes sure the real services and binaries the tests talk to are present:
#   - Redis on 127.0.0.1:6379 (started here when not running);
#   - the Prometheus tools `prometheus`, `promtool` and `alertmanager` (Debian packages `prometheus` and
#     `prometheus-alertmanager`, whose binary is `prometheus-alertmanager`). Only the binaries are needed: the tests start them on 127.0.0.1 ephemeral
#     ports with temporary data dirs, so the packages' own system services are kept from running;
#   - headless Chromium (Debian `chromium`) for the HTML report test;
#   - libfaketime (Debian `faketime`), which steps the wall clock of a `toolwatch serve` under test.
# Whatever is missing is installed with one `apt-get update` and one `apt-get install -y`.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive

need=()
command -v redis-server >/dev/null 2>&1 || need+=(redis-server)
if ! command -v prometheus >/dev/null 2>&1 || ! command -v promtool >/dev/null 2>&1; then
  need+=(prometheus)
fi
# Debian names the binary prometheus-alertmanager; upstream tarballs name it alertmanager.
if ! command -v alertmanager >/dev/null 2>&1 && ! command -v prometheus-alertmanager >/dev/null 2>&1; then
  need+=(prometheus-alertmanager)
fi

command -v chromium >/dev/null 2>&1 || need+=(chromium)
command -v faketime >/dev/null 2>&1 || need+=(faketime)

if ((${#need[@]})); then
  if [ "$(id -u)" -ne 0 ]; then
    echo "missing: ${need[*]}; install them (apt-get install ${need[*]}) or run this script as root" >&2
    exit 1
  fi
  echo "installing ${need[*]} (Debian packages)"
  # Keep maintainer scripts from starting daemons on 9090/9093/9100 while installing: invoke-rc.d asks
  # policy-rc.d, and exit code 101 means "action forbidden". Only our own temporary file is removed.
  policy=/usr/sbin/policy-rc.d
  own_policy=0
  if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' >"$policy"
    chmod 755 "$policy"
    own_policy=1
  fi
  rc=0
  { apt-get update -qq && apt-get install -y -qq --no-install-recommends -o Dpkg::Use-Pty=0 "${need[@]}" >/dev/null; } || rc=$?
  if [ "$own_policy" -eq 1 ]; then rm -f "$policy"; fi
  if [ "$rc" -ne 0 ]; then
    echo "apt-get install ${need[*]} failed (exit $rc)" >&2
    exit "$rc"
  fi
  # In case a daemon was started anyway (no policy-rc.d honoured, or systemd present), stop it: the tests
  # run their own instances and must not find a stray one on the default ports.
  for svc in prometheus prometheus-alertmanager prometheus-node-exporter; do
    if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet "$svc" 2>/dev/null; then
      systemctl stop "$svc" >/dev/null 2>&1 || true
      systemctl disable "$svc" >/dev/null 2>&1 || true
    fi
  done
fi

if ! redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1; then
  echo "starting redis-server on 127.0.0.1:6379"
  redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no >/dev/null
  for _ in $(seq 50); do redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1 && break; sleep 0.1; done
fi
