#!/usr/bin/env bash
# Makes sure the real services the tests talk to are present: Redis on 127.0.0.1:6379.
set -euo pipefail
if ! command -v redis-server >/dev/null 2>&1; then
  echo "installing redis-server (Debian package)"
  apt-get update -qq && apt-get install -y -qq redis-server >/dev/null
fi
if ! redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1; then
  echo "starting redis-server on 127.0.0.1:6379"
  redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no >/dev/null
  for _ in $(seq 50); do redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1 && break; sleep 0.1; done
fi
