#!/usr/bin/env bash
# Builds the virtualenv that tests/upstream/skypilot_check.py runs in: SkyPilot 0.14.1 as PyPI gives it.
#
#   bash tests/upstream/skypilot_env.sh [VENV]      (default: .venv-skypilot in the repo root)
#
# A venv of its own: SkyPilot pins click<8.2 and brings a server stack (fastapi, sqlalchemy, pandas,
# ...; about 460 MB) that the project's venv has no use for. All of its dependencies are installed:
# `import sky` pulls nearly all of them in before its task loader can run, so a --no-deps subset
# saves little and breaks with any release. Nothing here reaches a cloud: the check only loads
# task YAML. Idempotent: a venv that already imports the pinned SkyPilot is left as it is.
# PYTHON picks the interpreter (python3). About 50 s from PyPI.
set -euo pipefail

root="$(cd "$(dirname "$0")/../.." && pwd)"
venv="${1:-$root/.venv-skypilot}"
python="${PYTHON:-python3}"
skypilot=0.14.1

ready() {
    "$venv/bin/python" - "$skypilot" 2>/dev/null <<'PY'
import sys
from importlib.metadata import version

import sky  # noqa: F401  (importable, not only installed)

sys.exit(version("skypilot") != sys.argv[1])
PY
}

if [ -x "$venv/bin/python" ] && ready; then
    echo "skypilot venv: $venv is ready (SkyPilot $skypilot)"
    exit 0
fi

start=$SECONDS
"$python" -m venv "$venv"
"$venv/bin/pip" install -q "skypilot==$skypilot"
ready || { echo "skypilot venv: $venv was built but does not import sky" >&2; exit 1; }
echo "skypilot venv: built $venv in $((SECONDS - start)) s ($(du -sh "$venv" | cut -f1))"
