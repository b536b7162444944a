#!/usr/bin/env bash
# Builds OpenTau's environment: OpenTau 0.14.0 and just what its train() needs on CPU, the one
# registry/validate/checkers/opentau_check.py parses in and `recipe run examples/pi07-tiny.yaml --rehearse` trains in
# (trainer.env; docs/rehearsal.md).
#
#   bash tests/upstream/opentau_env.sh [VENV]
#
# Without VENV: built once per machine under ~/.cache/recipe/side-envs and linked as .venv-opentau in
# the repo root (tests/upstream/side_env.sh). A venv of its own: OpenTau needs transformers 4.57, the
# project's venv has 5.x. Idempotent: a venv that already imports the pinned OpenTau is left as it
# is. PYTHON picks the interpreter (python3). About 6.2 GB, 3 minutes from this machine's disk.
# Why each pin (docs: shared/brief/OPENTAU_CHECK.md):
#  - torch 2.14.1 and torchvision 0.29.1, first and alone: training builds its dataset with torchvision
#    (ToTensor, transforms.v2), and PyPI's torchvision does not load beside the local CPU wheel of torch
#    2.13.0; this pair lies on this machine's disk for Python 3.11 (a CUDA build that runs on the CPU).
#    Resolved together with the rest, pip may pick a newer pair and download it.
#  - huggingface_hub<1: transformers 4.57 refuses to import next to hub 1.x (which newer datasets pull).
#  - opentau with --no-deps --ignore-requires-python: the wheel says Python 3.10 and lists dependencies
#    that neither parsing nor training on this path touches (deepspeed, mediapipe, onnxruntime-gpu, ...).
#  - gymnasium, wandb and termcolor: train.py imports them at module level (wandb stays disabled).
set -euo pipefail
source "$(dirname "$0")/side_env.sh"

name=opentau
opentau=0.14.0
what="OpenTau $opentau (train)"
python="${PYTHON:-python3}"
pins=(
    transformers==4.57.6 huggingface_hub==0.36.2 datasets==5.0.1 accelerate==1.15.0 draccus==0.11.6
    jsonlines==4.0.0 pillow==13.0.0 imageio==2.38.1 einops==0.8.2 gymnasium==1.4.0 wandb==0.31.0 termcolor==3.3.0
)
torch_pins=(torch==2.14.1 torchvision==0.29.1)

ready() {
    "$1/bin/python" - "$opentau" 2>/dev/null <<'PY'
import sys
from importlib.metadata import version

from opentau.scripts import train  # noqa: F401  (what opentau-train runs, not only installed)

sys.exit(version("opentau") != sys.argv[1])
PY
}

build() {
    "$python" -m venv "$1"
    "$1/bin/python" -m pip install -q "${torch_pins[@]}"
    "$1/bin/python" -m pip install -q "${torch_pins[@]}" "${pins[@]}"
    "$1/bin/python" -m pip install -q --no-deps --ignore-requires-python "opentau==$opentau"
}

side_env_main "$@"
