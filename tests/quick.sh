#!/usr/bin/env bash
# The everyday test run: the suite less tests/slow.txt (real runs, whole-matrix sweeps, the fuzzer,
# git remotes) and the upstream checks, which need the side venvs. About a minute on 2 cores; CI
# (.ci/run) runs everything.
#
#   bash tests/quick.sh [PYTEST_ARGS...]       (PYTHON picks the interpreter: .venv/bin/python)
set -euo pipefail
cd "$(dirname "$0")/.."
exec "${PYTHON:-.venv/bin/python}" -m pytest -q -n auto --dist loadfile -m "not gpu and not slow and not upstream" "$@"
