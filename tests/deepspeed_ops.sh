#!/usr/bin/env bash
# Builds DeepSpeed's CPU shared-memory allreduce op (deepspeed_shm_comm) into the torch extension
# cache that the tests' runs use (tests/conftest.py: TORCH_EXTENSIONS_DIR, else the user cache).
#
#   bash tests/deepspeed_ops.sh        (PYTHON picks the interpreter: .venv/bin/python)
#
# Every ZeRO run on a CPU host loads this op, and torch compiles it just in time on the first one:
# about 40 s and 65 CPU-seconds on 2 cores, with each later DeepSpeed run waiting on the build lock.
# Inside the suite that compile competed with the tests for the cores; here it is one timed set-up
# step, like the side venvs. The build is keyed by the venv's paths, so a fresh clone builds it once
# and a warm one only checks it (ninja: nothing to do). The ninja that builds it must be the venv's,
# the one the runs find first on PATH: another ninja release hashes the build commands otherwise and
# takes every output for stale, so each side would rebuild the other's build.
set -euo pipefail
cd "$(dirname "$0")/.."
python="${PYTHON:-.venv/bin/python}"
export TORCH_EXTENSIONS_DIR="${TORCH_EXTENSIONS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/torch_extensions}"
PATH="$(cd "$(dirname "$python")" && pwd):$PATH" DS_ACCELERATOR=cpu "$python" - <<'PY'
from deepspeed.ops.op_builder.cpu import ShareMemCommBuilder

ShareMemCommBuilder().load(verbose=False)
PY
