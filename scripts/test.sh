#!/usr/bin/env bash
# Run the test suite (all markers). Extra arguments go to pytest, e.g. scripts/test.sh -m unit
set -euo pipefail
cd "$(dirname "$0")/.."
exec .venv/bin/pytest -q "$@"
