#!/usr/bin/env bash
# Builds the virtualenv that tests/upstream/skypilot_check.py runs in: SkyPilot 0.14.1 as PyPI gives it.
#
#   bash tests/upstream/skypilot_env.sh [VENV]
#
# Without VENV: built once per machine under ~/.cache/recipe/side-envs and linked as .venv-skypilot
# in the repo root (tests/upstream/side_env.sh). A venv of its own: SkyPilot pins click<8.2 and
# brings a server stack (fastapi, sqlalchemy, pandas, ...; about 460 MB) that the project's venv has
# no use for. All of its dependencies are installed: `import sky` pulls nearly all of them in before
# its task loader can run, so a --no-deps subset saves little and breaks with any release. Nothing
# here reaches a cloud: the check only loads task YAML. Idempotent: a venv that already imports the
# pinned SkyPilot is left as it is. PYTHON picks the interpreter (python3). About 50 s from PyPI.
set -euo pipefail
source "$(dirname "$0")/side_env.sh"

name=skypilot
skypilot=0.14.1
what="SkyPilot $skypilot"
python="${PYTHON:-python3}"
pins=("skypilot==$skypilot")

ready() {
    "$1/bin/python" - "$skypilot" 2>/dev/null <<'PY'
import sys
from importlib.metadata import version

import sky  # noqa: F401  (importable, not only installed)

sys.exit(version("skypilot") != sys.argv[1])
PY
}

build() {
    "$python" -m venv "$1"
    "$1/bin/python" -m pip install -q "${pins[@]}"
}

side_env_main "$@"
