#!/usr/bin/env bash
# Builds the virtualenv that tests/upstream/opentau_check.py runs in: OpenTau 0.14.0 and just what
# `import opentau.configs.train` needs, on CPU.
#
#   bash tests/upstream/opentau_env.sh [VENV]
#
# Without VENV: built once per machine under ~/.cache/recipe/side-envs and linked as .venv-opentau in
# the repo root (tests/upstream/side_env.sh). A venv of its own: OpenTau needs transformers 4.57, the
# project's venv has 5.x. Idempotent: a venv that already imports the pinned OpenTau is left as it
# is. PYTHON picks the interpreter (python3). About 1.5 GB, 55 s from scratch.
# Why each pin (docs: shared/brief/OPENTAU_CHECK.md):
#  - torch first and alone: 2.13.0 is the local CPU wheel; resolved together with the rest, pip may
#    pick a newer CUDA build (5.9 GB).
#  - no torchvision: PyPI's wheels link the CUDA torch and fail to load on the CPU one; opentau_check.py
#    puts an import-only stand-in in its place.
#  - huggingface_hub<1: transformers 4.57 refuses to import next to hub 1.x (which newer datasets pull).
#  - opentau with --no-deps --ignore-requires-python: the wheel says Python 3.10 and lists training-only
#    dependencies (deepspeed, wandb, mediapipe, ...) that parsing a config does not touch.
set -euo pipefail
source "$(dirname "$0")/side_env.sh"

name=opentau
opentau=0.14.0
what="OpenTau $opentau"
python="${PYTHON:-python3}"
pins=(
    transformers==4.57.6 huggingface_hub==0.36.2 datasets==5.0.1 accelerate==1.15.0 draccus==0.11.6
    jsonlines==4.0.0 pillow==13.0.0 imageio==2.38.1 einops==0.8.2
)

ready() {
    "$1/bin/python" - "$opentau" 2>/dev/null <<'PY'
import sys
from importlib.metadata import version

import opentau  # noqa: F401  (importable, not only installed)

sys.exit(version("opentau") != sys.argv[1])
PY
}

build() {
    "$python" -m venv "$1"
    "$1/bin/python" -m pip install -q torch==2.13.0
    "$1/bin/python" -m pip install -q torch==2.13.0 "${pins[@]}"
    "$1/bin/python" -m pip install -q --no-deps --ignore-requires-python "opentau==$opentau"
}

side_env_main "$@"
