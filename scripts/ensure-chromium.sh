#!/usr/bin/env bash
# Make sure Debian's headless-capable `chromium` is installed (used by the HTML report test).
# Runs `apt-get update` once and `apt-get install -y chromium` only when chromium is missing.
# Without root (or without apt-get) it prints a notice and exits 0: the browser test then skips.
set -euo pipefail

if command -v chromium >/dev/null 2>&1; then
    exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "ensure-chromium: apt-get not found; install chromium by hand to run the HTML report test" >&2
    exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
        SUDO="sudo -n"
    else
        echo "ensure-chromium: not root; install chromium by hand to run the HTML report test" >&2
        exit 0
    fi
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends chromium >/dev/null
command -v chromium >/dev/null 2>&1
