"""The trainer's own Python environment, checked before anything is launched.

OpenTau (Python 3.10, transformers 4.57) and LeRobot (Python >= 3.12) cannot share an environment
with each other, and rarely with the registry (docs/failure-modes.md §27). `trainer.env` names
the trainer's; without it, the Python behind the launcher on PATH runs the trainer. Either way
`recipe run` asks that Python, before launch, whether it holds the trainer's package, and which
version: a missing one is one line saying how to install it, a version outside what the adapter
was proven against is a warning. The policy's own extra (`lerobot[diffusion]` needs diffusers) is
asked the same way, from the requirements the installed package itself declares for it
(docs/preflight.md §host-trainer-env).
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import sys
import tempfile
import time
from functools import cache
from pathlib import Path

from registry import untrusted
from registry.errors import Exit, RecipeError
from registry.run import probe

# what changes a run besides the recipe: their versions are recorded in the run's lock
# (registry/run/envlock.py) and asked of the trainer's Python together with its own package
RECORDED = ("torch", "accelerate", "deepspeed", "transformers")
ASK_TIMEOUT_S = 60
# the second line of a relocatable console script: python is found beside the script's real path
RELOCATABLE = '\'\'\'exec\' "$(dirname -- "$(realpath -- "$0")")"/\''
ASK_MAX_BYTES = 1 << 20  # the probe's report is a few hundred bytes
HEAD_BYTES = 512  # a launcher's #! line, and the line after it (pip's trampoline for long paths)


def interpreter_of(program: str, env: dict[str, str]) -> str | None:
    """The Python a console script runs under, from its #! line (pip writes the interpreter's
    path there, or a /bin/sh line that execs it); None where it is not a Python script."""
    found = program if "/" in program else shutil.which(program, path=env.get("PATH"))
    try:  # its head only, of a regular file: a FIFO or a huge file on PATH is not read whole
        head = untrusted.head(found, HEAD_BYTES).decode("utf-8", "replace").splitlines() if found else []
    except untrusted.Rejected:
        return None
    if not head or not head[0].startswith("#!"):
        return None
    words = head[0][2:].split()
    if words and words[0].endswith("/env") and len(words) > 2 and words[1] == "-S":
        words = words[2:]  # `#!/usr/bin/env -S python -u`: env splits the rest into the command
    elif words and words[0].endswith("/env") and len(words) > 1:
        return shutil.which(words[1], path=env.get("PATH")) if words[1].startswith("python") else None
    if words and os.path.basename(words[0]).startswith("python"):
        return words[0]
    if len(head) > 1 and head[1].startswith(RELOCATABLE):  # uv's and pip's relocatable launcher:
        name = head[1][len(RELOCATABLE) :].split("'")[0]  # the python beside the script, links resolved
        return os.path.join(os.path.dirname(os.path.realpath(found)), name) if name.startswith("python") else None
    if len(head) > 1:  # pip's launcher for long paths: '''exec' "/path/to/python" "$0" "$@"
        match = re.match(r"""^'''exec' (?:"([^"]+)"|(\S+))""", head[1])  # quoted: a path with spaces
        return (match.group(1) or match.group(2)) if match else None
    return None


def ask(python: str, package: str | None = None, extra: str | None = None, needs: tuple[str, ...] = ()) -> dict:
    """What the interpreter says of itself (registry/run/probe.py): its Python version, the
    versions of RECORDED and the trainer's package (None where absent), torch's CUDA release and
    NCCL, and with `extra` what `package[extra]` requires. Asked once per interpreter and question
    in a process: the pre-launch check and the lock's environment share one answer."""
    wanted = (*RECORDED, package, *needs) if package else RECORDED
    return _ask(python, (*wanted, f"{package}[{extra}]") if package and extra else wanted)


@cache
def _ask(python: str, packages: tuple[str, ...]) -> dict:
    # its output is read capped in bytes and time, and checked field by field: a broken or hostile
    # interpreter is one line, never a traceback or memory without end (docs/failure-modes.md §70)
    try:
        # `python -c` puts its working folder first on sys.path: asked from an empty folder, a
        # module planted where the user stands (a run folder from elsewhere) is never imported
        with tempfile.TemporaryDirectory(prefix="recipe-ask-") as empty:
            code, out = untrusted.run_output(
                [python, "-c", _probe_source(), *packages], limit=ASK_MAX_BYTES, timeout=ASK_TIMEOUT_S, cwd=empty
            )
        if not out.strip():
            raise untrusted.Rejected(f"it exited with code {code} and printed no report")
        return answer(untrusted.loads(out, "its report"), "its report")
    except untrusted.Rejected as e:
        raise RecipeError(f"{python}: cannot ask it for its packages ({e})", Exit.NOT_FOUND) from None


def answer(found, where: str) -> dict:
    """The probe's report (registry/run/probe.py) with every field its readers use checked:
    python a string; packages a mapping of name to a version string or None; torch_cuda and nccl
    a string or None; extras a mapping of `pkg[extra]` to None or a list of requirements, each
    with a name and spec string, a version string or None and ok a bool or None. Rejected naming
    the first field that is not."""
    expect = untrusted.expect
    expect(found, dict, where, "the report")
    out = {"python": expect(found.get("python"), str, where, "python")}
    out["packages"] = expect(found.get("packages"), dict, where, "packages")
    for name, version in out["packages"].items():
        expect(name, str, where, "a package's name")  # printed by verify and doctor as it is
        _optional(version, str, where, f"packages.{name}")
    for key in ("torch_cuda", "nccl"):
        out[key] = _optional(found.get(key), str, where, key)
    if found.get("extras") is not None:
        out["extras"] = expect(found["extras"], dict, where, "extras")
        for name, needs in out["extras"].items():
            expect(name, str, where, "an extra's name")
            for i, need in enumerate(_optional(needs, list, where, f"extras.{name}") or ()):
                at = f"extras.{name}[{i}]"
                expect(need, dict, where, at)
                expect(need.get("name"), str, where, f"{at}.name")
                expect(need.get("spec"), str, where, f"{at}.spec")
                _optional(need.get("version"), str, where, f"{at}.version")
                _optional(need.get("ok"), bool, where, f"{at}.ok")
    return out


def _optional(value, kind, where: str, what: str):
    return None if value is None else untrusted.expect(value, kind, where, what)


@cache
def _probe_source() -> str:
    # nothing of the registry is imported there: the file's own text runs as the program
    return Path(probe.__file__).read_text(encoding="utf-8")


def _release(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", text.split("+")[0])[:3])


def check(bundle, env: dict[str, str], env_field: str | None) -> str | None:
    """Raise RecipeError (exit 127) when the trainer's Python is missing or lacks its package or
    the policy's extra; return the warnings (a version outside what the adapter was proven
    against, an extra's requirement at a version it does not ask for), one a line."""
    if not bundle.package:
        return None
    python = bundle.python or interpreter_of(bundle.program, env)
    if python is None:
        return None  # not a Python script we can read: launch.sh reports what fails
    if bundle.python and not (os.path.isfile(python) and os.access(python, os.X_OK)):
        found = None
    else:
        found = ask(python, bundle.package, getattr(bundle, "extra", None), getattr(bundle, "needs", ()))
    said = findings(bundle, python, found, env_field)
    for severity, message, hint in said:
        if severity == "error":
            raise RecipeError(f"{message} (hint: {hint})", Exit.NOT_FOUND)
    return "\n".join(f"recipe: warning: {message}" for _, message, _ in said) or None


def findings(bundle, python: str, found: dict | None, env_field: str | None) -> list[tuple[str, str, str]]:
    """(severity, message, hint) for what the trainer's Python says of itself (`found`, ask's
    answer; None where there is no Python at `python`): the trainer's package and accelerate
    missing, the policy's extra missing, versions outside what was proven or asked for."""
    where = f"trainer.env {env_field}" if env_field else f"the Python behind {bundle.program}"
    if found is None:
        return [("error", f"trainer.env {env_field}: no Python at {python}", bundle.install_hint)]
    wanted = [bundle.package] + (["accelerate"] if "accelerate" in bundle.command else [])
    wanted += [n for n in getattr(bundle, "needs", ()) if n not in wanted]
    missing = [name for name in wanted if not found["packages"].get(name)]
    if missing:
        text = f"{where} ({python}, Python {found.get('python', '?')}) has no {' or '.join(missing)}"
        return [("error", text, bundle.install_hint)]
    version, extra = found["packages"][bundle.package], getattr(bundle, "extra", None)
    lacking, off = extra_status(found, bundle.package, extra)
    if lacking:
        text = (
            f"{where} ({python}) has {bundle.package} {version} without its {extra} extra, which the policy"
            f" needs: no {', '.join(lacking)}"
        )
        return [("error", text, extra_hint(python, bundle.package, extra, version))]
    out = [
        (
            "warning",
            f"{bundle.package}[{extra}] in {where} asks for {r['name']}{r['spec']}, and it has {r['name']} {r['version']}",
            extra_hint(python, bundle.package, extra, version),
        )
        for r in off
    ]
    low, high = bundle.proven or (None, None)
    if low and not (_release(low) <= _release(version) < _release(high)):
        out.append(
            (
                "warning",
                f"{bundle.package} {version} in {where} is outside the versions this adapter was proven against"
                f" (>= {low}, < {high}); check the run's own config before trusting it",
                bundle.install_hint,
            )
        )
    return out


def extra_status(found: dict, package: str | None, extra: str | None) -> tuple[list[str], list[dict]]:
    """What an interpreter's answer (ask) says of `package[extra]`: the requirements it lacks, as
    `name spec`, and those present at a version outside the spec. Both empty where no extra is
    asked or the package declares none."""
    if not package or not extra:
        return [], []
    needs = (found.get("extras") or {}).get(f"{package}[{extra}]") or []
    lacking = [f"{r['name']}{r['spec']}" for r in needs if not r.get("version")]
    return lacking, [r for r in needs if r.get("version") and r.get("ok") is False]


def extra_hint(python: str, package: str, extra: str, version: str) -> str:
    return f"{shlex.quote(python)} -m pip install {shlex.quote(f'{package}[{extra}]=={version}')}"


def report(warning: str | None) -> None:
    if warning:
        print(warning, file=sys.stderr)


STALE_LOCK_S = 600  # a JIT build of a DeepSpeed op takes seconds to a few minutes


def extension_root(env: dict[str, str]) -> Path:
    """Where torch builds C++ extensions just in time: TORCH_EXTENSIONS_DIR, else the user cache."""
    if env.get("TORCH_EXTENSIONS_DIR"):
        return Path(env["TORCH_EXTENSIONS_DIR"])
    cache = env.get("XDG_CACHE_HOME") or os.path.join(env.get("HOME") or str(Path.home()), ".cache")
    return Path(cache) / "torch_extensions"


def stale_build_locks(env: dict[str, str], now: float | None = None) -> str | None:
    """A warning naming build locks older than STALE_LOCK_S. torch guards each extension build with
    a `lock` file and waits for it without limit: a build killed midway leaves it behind, and every
    later rank that needs the op (DeepSpeed builds its CPU communication op at start-up) waits
    forever without a word (docs/failure-modes.md §51)."""
    now = time.time() if now is None else now
    root, old = extension_root(env), []
    for lock in [*root.glob("*/lock"), *root.glob("*/*/lock")]:
        try:
            age = now - lock.stat().st_mtime
        except OSError:
            continue
        if age > STALE_LOCK_S:
            old.append(f"{lock} ({age / 60:.0f} min old)")
    if not old:
        return None
    return (
        f"recipe: warning: torch extension build lock{'s' if len(old) > 1 else ''} {', '.join(sorted(old))}: a"
        " build killed midway leaves its lock, and ranks that build that op wait on it without end; remove it if"
        " no build is running"
    )
