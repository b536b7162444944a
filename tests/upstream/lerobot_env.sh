#!/usr/bin/env bash
# Builds the virtualenv that registry/validate/checkers/lerobot_check.py and policy_sizes.py run in: LeRobot
# 0.6.1 with its `dataset` extra and diffusers (the diffusion policy's extra), on CPU.
#
#   bash tests/upstream/lerobot_env.sh [VENV]
#
# Without VENV: built once per machine under ~/.cache/recipe/side-envs and linked as .venv-lerobot in
# the repo root (tests/upstream/side_env.sh); the tests use it unless RECIPE_LEROBOT_PYTHON names
# another interpreter. A venv of its own: LeRobot needs Python >= 3.12 and torch < 2.12, the
# project's venv has Python 3.11 and torch 2.13. Idempotent: a venv that already imports the pinned
# LeRobot is left as it is. PYTHON picks the interpreter (default: the first Python >= 3.12 found,
# pyenv's included). About 5.5 GB and 13 minutes the first time: PyPI's torch for Linux is a CUDA
# build (PyPI has no CPU one); later runs reuse it (under 2 s).
# Why each pin (the set benchmarks/results/trainers_gpu.md trained with; LeRobot 0.6.1's own ranges:
# https://github.com/huggingface/lerobot/blob/v0.6.1/pyproject.toml):
#  - torch 2.11.0 and torchvision 0.26.0: the newest pair LeRobot 0.6.1 accepts (torch<2.12,
#    torchvision<0.27), installed first and alone so that pip does not settle on an older pair.
#  - lerobot[dataset]: `lerobot.scripts.lerobot_train`, which the checker imports as lerobot-train
#    does, needs datasets and av at import.
#  - diffusers 0.39.0: LeRobot's diffusion policy (extra `diffusers-dep`, >=0.38,<0.40), which
#    policy_sizes.py builds.
set -euo pipefail
source "$(dirname "$0")/side_env.sh"

name=lerobot
lerobot=0.6.1
what="LeRobot $lerobot"
torch_pins=(torch==2.11.0 torchvision==0.26.0)
pins=("${torch_pins[@]}" "lerobot[dataset]==$lerobot" diffusers==0.39.0)

python_312() {
    local candidate
    for candidate in "${PYTHON:-}" python3 python3.12 python3.13 python3.14 \
        "$(pyenv root 2>/dev/null)"/versions/3.1[2-9]*/bin/python3; do
        if [ -n "$candidate" ] && "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 12))' 2>/dev/null; then
            echo "$candidate"
            return
        fi
    done
    echo "lerobot venv: LeRobot $lerobot needs Python >= 3.12 and none was found (set PYTHON)" >&2
    return 1
}
python=$(python_312)

ready() {
    "$1/bin/python" - "$lerobot" 2>/dev/null <<'PY'
import sys
from importlib.metadata import version

from lerobot.scripts import lerobot_train  # noqa: F401  (what the checker imports)
from lerobot.policies.diffusion import modeling_diffusion  # noqa: F401  (diffusers, for policy_sizes.py)

sys.exit(version("lerobot") != sys.argv[1])
PY
}

build() {
    "$python" -m venv "$1"
    "$1/bin/python" -m pip install -q --no-cache-dir "${torch_pins[@]}"
    "$1/bin/python" -m pip install -q --no-cache-dir "${pins[@]}"
}

side_env_main "$@"
