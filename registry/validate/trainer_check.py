"""The trainer's own checks of what resolve writes (`recipe validate --upstream`, `recipe doctor`):
OpenTau's parser, validate() and train()'s backend guards, or lerobot-train's parser and
validate(), run on CPU by the trainer's own interpreter through the scripts in checkers/ (standard
library and the trainer only: they never import the registry). Each refusal becomes a problem at
the user's own line where its message names a field, with the library's words; what the trainer
changes without failing (OpenTau's "Overriding ...") becomes a warning (docs/rules.md, "The
trainers' own checks")."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import tempfile
from pathlib import Path

from registry.errors import Problem

CHECKERS = Path(__file__).with_name("checkers")
SCRIPTS = {"opentau": "opentau_check.py", "lerobot": "lerobot_check.py"}
TIMEOUT_S = 180  # importing a trainer takes seconds on a quiet host, tens on a loaded 2-core one
OUTPUT_CAP = 16 << 20
# ACT's and diffusion's configs fetch ResNet weights as they parse: the check stays offline
OFFLINE_FLAG = "--policy.pretrained_backbone_weights=null"
_NAMED = re.compile(r"`([A-Za-z_][\w.]*)`|--([A-Za-z_][\w.]*)=|'([A-Za-z_][\w.]*)'")


def check(recipe, env: dict[str, str] | None = None) -> list[Problem]:
    """The trainer's verdict on the recipe's files, as problems; [] for a trainer with no checker."""
    kind = recipe.data["trainer"]["kind"]
    if kind not in SCRIPTS:
        return []
    from registry.resolve import resolve
    from registry.run import environment

    bundle = resolve(recipe)
    env = dict(os.environ) if env is None else env
    python = bundle.python or environment.interpreter_of(bundle.program, env)
    where = recipe.origins.get(("trainer", "env"))
    if not python or not (os.path.isfile(python) and os.access(python, os.X_OK)):
        said = f"no {kind} interpreter to ask ({python or bundle.program} is not there)"
        return [
            Problem("warning", "upstream-check", "trainer.env", said, where, "set trainer.env to the trainer's venv")
        ]
    with tempfile.TemporaryDirectory(prefix="recipe-upstream-") as folder:
        result = _ask(kind, python, Path(folder), bundle.files)
    if isinstance(result, str):
        return [Problem("warning", "upstream-check", "trainer.env", f"{kind}'s check did not run: {result}", where)]
    return _problems(kind, result, recipe)


def _ask(kind: str, python: str, folder: Path, files: dict[str, str]) -> dict | str:
    for name, text in files.items():
        (folder / name).write_text(text)
    work = folder / "work"
    work.mkdir()  # a relative output_dir must not exist: the check runs where nothing is
    if kind == "opentau":
        case = {
            "id": "recipe",
            "config": str(folder / "opentau.json"),
            "accelerate_config": str(folder / "accelerate.yaml") if "accelerate.yaml" in files else None,
            "args": [],
        }
        argv = [python, "-I", str(CHECKERS / SCRIPTS[kind]), str(folder / "case.json")]
    else:
        case = {"id": "recipe", "args": lerobot_args(files["launch.sh"])}
        argv = [python, "-I", str(CHECKERS / SCRIPTS[kind]), str(folder / "case.json"), "-o", str(folder / "out.json")]
    (folder / "case.json").write_text(json.dumps([case]))
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "ACCELERATE_"))}
    try:
        done = subprocess.run(
            argv, cwd=work, capture_output=True, timeout=TIMEOUT_S, env={**clean, "HF_HUB_OFFLINE": "1"}
        )
    except subprocess.TimeoutExpired:
        return f"no answer within {TIMEOUT_S} s"
    except OSError as e:
        return f"cannot run {python} ({e.strerror})"
    raw = (folder / "out.json").read_bytes() if kind == "lerobot" and (folder / "out.json").exists() else done.stdout
    text = raw[:OUTPUT_CAP].decode("utf-8", "replace")
    try:  # OpenTau's checker prints a JSON line per case, LeRobot's one JSON list
        answers = json.loads(text) if kind == "lerobot" else [json.loads(x) for x in text.splitlines() if x.strip()]
        return next(a for a in answers if isinstance(a, dict) and a.get("id") == "recipe")
    except (ValueError, StopIteration, TypeError):
        tail = done.stderr.decode("utf-8", "replace").strip().splitlines()[-1:] or ["no output"]
        return f"exit {done.returncode}: {tail[0][:300]}"


def lerobot_args(launch_sh: str) -> list[str]:
    """lerobot-train's flags on launch.sh's exec line (what follows `-m MODULE`), checked offline in
    a fresh output folder of the checker's own."""
    line = next(x for x in launch_sh.splitlines() if x.startswith("exec "))
    argv = shlex.split(line)
    module = len(argv) - 1 - argv[::-1].index("-m")  # the trainer's: `python -m accelerate.commands.launch` comes first
    flags = [t for t in argv[module + 2 :] if t != "$@" and not t.startswith("--output_dir=")]
    resnet = any(f in flags for f in ("--policy.type=act", "--policy.type=diffusion"))
    named = any(f.startswith("--policy.pretrained_backbone_weights=") for f in flags)
    return flags + ([OFFLINE_FLAG] if resnet and not named else [])


def _problems(kind: str, result: dict, recipe) -> list[Problem]:
    version = result.get("lerobot") or result.get("opentau") or ""
    who = f"{kind} {version}".strip()
    found = []
    if not result.get("ok"):
        error = str(result.get("error") or "refused")
        cause = result.get("cause")
        said = error + (f" ({cause})" if cause else "")
        path, origin = locate(said, recipe.origins)
        stage = result.get("stage") or "check"
        found.append(Problem("error", f"{kind}-refuses", path, f"{who} refuses it at {stage}: {said[:600]}", origin))
    for warning in result.get("warnings") or []:
        if kind == "opentau" and "Overriding" in str(warning):  # OpenTau changed the config, and trains on
            path, origin = locate(str(warning), recipe.origins)
            found.append(Problem("warning", f"{kind}-changes", path, f"{who}: {str(warning)[:400]}", origin))
    return found


def locate(message: str, origins: dict) -> tuple[str, str | None]:
    """The recipe field a library's message names (`field`, --flag=, 'field'), by its last name
    segments, and where the user set it: the most specific one where it names several (`policy`
    and `vision_backbone`: policy.options.vision_backbone); ("", None) where it names none."""
    by_leaf: dict[str, list[tuple]] = {}
    for path in origins:
        if path and all(isinstance(p, str) for p in path):
            by_leaf.setdefault(path[-1], []).append(path)
    found = []
    for match in _NAMED.finditer(message):
        name = next(g for g in match.groups() if g)
        tail = tuple(name.split("."))
        candidates = by_leaf.get(tail[-1], [])
        # the one whose dotted tail is the name's (policy.options.dropoutt for `dropoutt`)
        best = [p for p in candidates if p[-len(tail) :] == tail] or candidates
        if best:
            found.append(min(best, key=len))
    if not found:
        return "", None
    path = max(found, key=len)
    return ".".join(path), origins[path]
