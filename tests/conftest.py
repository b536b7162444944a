"""Shared set-up: every test runs sealed off from the user's environment and must leave the checkout
as it found it; the bundled matrix is composed and validated once per session."""

from __future__ import annotations

import functools
import itertools
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from collections import Counter
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

# hypothesis keeps its caches (unicode tables, constants) under the working folder unless told:
# outside the checkout, which every test must leave as it found it
os.environ.setdefault("HYPOTHESIS_STORAGE_DIRECTORY", os.path.join(tempfile.gettempdir(), "recipe-hypothesis"))

pytest_plugins = ["node_lists"]  # tests/allowed_skips.txt (under CI), tests/slow.txt (tests/quick.sh)

if TYPE_CHECKING:  # registry is imported lazily: a broken module fails its tests, not the conftest
    from registry.compose import Recipe
    from registry.resolve import Bundle
    from registry.validate.report import Report

ROOT = Path(__file__).resolve().parent.parent

# --- isolation -------------------------------------------------------------------------------
# Set at import, before any test module imports registry and before any test starts a
# subprocess, so that in-process code, `recipe ...` CLI calls and the trainers they launch all
# see the same sealed environment: no user config, sources, cache or launcher settings.
USER_ENV = dict(os.environ)  # as the session found it; for git on the checkout only
SESSION_DIR = Path(tempfile.mkdtemp(prefix="recipe-tests-"))
# Variables that would change what a launched run does or where it rendezvouses.
LAUNCHER_VARS = ("MASTER_ADDR", "MASTER_PORT", "RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK")
LAUNCHER_PREFIXES = ("RECIPE_", "ACCELERATE_", "PET_", "SLURM_", "MACHINE_RANK", "MAIN_PROCESS_")


def _isolate() -> None:
    # torch builds DeepSpeed's ops once per user (~30 s each); keep reusing the user's builds rather
    # than rebuild them in every session: a build cache, not configuration.
    user_cache = USER_ENV.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    os.environ.setdefault("TORCH_EXTENSIONS_DIR", str(Path(user_cache) / "torch_extensions"))
    for name in list(os.environ):
        if name.startswith(LAUNCHER_PREFIXES) or name in LAUNCHER_VARS:
            del os.environ[name]
    for name, sub in (
        ("HOME", "home"),
        ("XDG_CONFIG_HOME", "config"),
        ("XDG_CACHE_HOME", "cache"),
        ("XDG_DATA_HOME", "data"),
        ("XDG_STATE_HOME", "state"),
    ):
        (SESSION_DIR / sub).mkdir()
        os.environ[name] = str(SESSION_DIR / sub)
    # subprocesses import this checkout's registry whatever their working directory
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), USER_ENV.get("PYTHONPATH")]))


_isolate()


def pytest_unconfigure(config):
    shutil.rmtree(SESSION_DIR, ignore_errors=True)


# --- the checkout stays clean ----------------------------------------------------------------
# Caches that tools keep in the checkout; anything else new after the session is a test writing
# into the checkout (a run directory, a recorded result, a stray file).
TOOL_CACHES = (".venv", "__pycache__", ".pytest_cache", ".ruff_cache")


def untracked() -> set[str] | None:
    """Untracked and ignored files of the checkout, tools' caches left out; None outside git."""
    try:
        out = subprocess.run(
            ["git", "status", "--porcelain", "-z", "--untracked-files=all", "--ignored", "--", "."]
            + [":(exclude).venv", ":(exclude).venv-opentau", ":(exclude).venv-skypilot", ":(exclude).venv-lerobot"],
            cwd=ROOT,
            env=USER_ENV,
            capture_output=True,
            text=True,
            timeout=60,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if out.returncode:
        return None
    found = set()
    for entry in filter(None, out.stdout.split("\0")):
        status, path = entry[:2], entry[3:]
        parts = Path(path).parts
        if status in ("??", "!!") and not any(p in TOOL_CACHES or p.endswith(".egg-info") for p in parts):
            found.add(path)
    return found


BEFORE = untracked()  # at import: collection must not write into the checkout either


@pytest.fixture(scope="session", autouse=True)
def checkout_stays_clean():
    yield
    before, after = BEFORE, untracked()
    if before is not None and after is not None and after - before:
        new = sorted(after - before)
        pytest.fail(
            f"the tests wrote {len(new)} file(s) into the checkout (write under tmp_path, or run the CLI "
            f"with cwd=tmp_path / --output-dir): " + ", ".join(new[:20]),
            pytrace=False,
        )


# --- the CLI ---------------------------------------------------------------------------------
def run_cli(*args, cwd=ROOT, env=None, timeout=60):
    """`recipe ARGS` in a fresh interpreter, as a user runs it."""
    full_env = {**os.environ, **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "registry", *args],
        cwd=cwd or ROOT,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.fixture
def cli():
    return run_cli


def spawn_cli(*args, env, cwd=ROOT):
    """`recipe ARGS` started, not waited for: many of them run side by side."""
    return subprocess.Popen(
        [sys.executable, "-m", "registry", *args],
        cwd=cwd,
        env={**os.environ, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


HEAVY = ("torch", "accelerate", "deepspeed", "transformers", "omegaconf", "jsonschema")


def heavy_imports(
    argvs: list[list[str]], heavy: tuple[str, ...] = HEAVY, codes: tuple = (0, None)
) -> subprocess.CompletedProcess:
    """Runs each `recipe ARGV` in one interpreter (each must exit with one of `codes`) and prints `HEAVY [...]`, the
    heavy packages it imported, to stderr: what the CLI's start-up path must not pay for."""
    code = (
        "import sys, runpy\n"
        f"for argv in {argvs!r}:\n"
        "    sys.argv = ['recipe', *argv]\n"
        "    try:\n"
        "        runpy.run_module('registry', run_name='__main__')\n"
        "    except SystemExit as e:\n"
        f"        assert e.code in {codes!r}, (argv, e.code)\n"
        f"heavy = sorted(m for m in sys.modules if m.split('.')[0] in {heavy!r})\n"
        "print('HEAVY', heavy, file=sys.stderr)\n"
    )
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)


def side_venv_python(venv: Path, what: str, build: str, variable: str) -> Path:
    """The python of a side environment holding an upstream project's own checker (tests/upstream/*_env.sh
    build them). Missing, the test skips, which fails the run under CI (tests/node_lists.py)."""
    python = venv / "bin" / "python"
    if not python.exists():
        pytest.skip(f"no {what} check venv at {venv} (build it: {build}, or set {variable})")
    return python


def lerobot_python() -> Path:
    """LeRobot's interpreter: RECIPE_LEROBOT_PYTHON (a GPU host's own Python), else the checkout's
    .venv-lerobot (tests/upstream/lerobot_env.sh)."""
    if USER_ENV.get("RECIPE_LEROBOT_PYTHON"):
        return Path(USER_ENV["RECIPE_LEROBOT_PYTHON"])
    return side_venv_python(
        ROOT / ".venv-lerobot", "LeRobot", "bash tests/upstream/lerobot_env.sh", "RECIPE_LEROBOT_PYTHON"
    )


_PORTS_GIVEN: set[int] = set()


def free_port() -> int:
    """A TCP port nothing listens on now, and not handed out before in this session: each launched
    multi-process run gets a rendezvous of its own, so that runs side by side (or two test sessions
    on one host) never meet on the recipes' default port; DeepSpeed's CPU all-reduce also names its
    shared-memory buffers after the port."""
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port not in _PORTS_GIVEN:
            _PORTS_GIVEN.add(port)
            return port


# --- long runs, started with the session ------------------------------------------------------
# Real training runs spend much of their time starting interpreters and waiting at barriers, and
# the tests that read them only look at their outputs: they run in background threads from the
# first test on, beside every other test, which keeps both cores of a CI runner busy. Two at a
# time: on 2 cores, more only slows the in-process tests down (measured: 165 s vs 178 s a suite).
BACKGROUND_WORKERS = 2


class Background:
    """Runs offered by test modules. A module offers them by defining `background_runs(items)`:
    given its selected tests, it returns {key: job}; each job(folder, port) runs in a thread with a
    fresh folder and a free rendezvous port. Its tests read `background.of(module)[key].result()`,
    so a job that fails fails only the tests that read it."""

    def __init__(self, session, tmp_path_factory):
        self.selected: dict[object, list] = {}
        for item in session.items:
            if getattr(item, "module", None) is not None:
                self.selected.setdefault(item.module, []).append(item)
        self.tmp_path_factory = tmp_path_factory
        self.pool = ThreadPoolExecutor(BACKGROUND_WORKERS, thread_name_prefix="background-run")
        self.started: dict[object, dict[str, Future]] = {}

    def of(self, module) -> dict[str, Future]:
        """The module's runs, started now unless they already are."""
        if module not in self.started:
            offer = getattr(module, "background_runs", None)
            jobs = offer(self.selected.get(module, [])) if offer else {}
            self.started[module] = {
                key: self.pool.submit(job, self.tmp_path_factory.mktemp(f"{module.__name__}-{key}"), free_port())
                for key, job in jobs.items()
            }
        return self.started[module]


def pytest_collection_modifyitems(config, items):
    """In one process, tests that read background runs go last (in their order), so that the runs
    go on while every other test runs. Under pytest-xdist a module's runs start at its first test,
    so those modules go first instead: the longest files start at once and the short ones fill the
    cores at the end, rather than one worker finishing a training file alone while the other idles.
    The rest follow by number of tests, as xdist would order them (pytest_configure below keeps
    xdist from reordering the files again)."""
    if not _under_xdist(config):
        items.sort(key=_reads_runs)
        return
    per_file = Counter(_file(item) for item in items)
    items.sort(key=lambda item: (not _reads_runs(item), -per_file[_file(item)]))


def _reads_runs(item) -> bool:
    return hasattr(getattr(item, "module", None), "background_runs")


def _file(item) -> str:
    return item.nodeid.split("::")[0]


def pytest_configure(config):
    if hasattr(config.option, "loadscopereorder"):  # the xdist controller: schedule files in collection order
        config.option.loadscopereorder = False


def _under_xdist(config) -> bool:
    return hasattr(config, "workerinput") or bool(getattr(config.option, "numprocesses", None))


@pytest.fixture(scope="session", autouse=True)
def background(request, tmp_path_factory, checkout_stays_clean) -> Background:
    """Starts every module's runs at the first test. Under pytest-xdist a worker does not know which
    modules it will get, so there each module's runs start at its first test instead. The runs end
    before the checkout is checked."""
    runs = Background(request.session, tmp_path_factory)
    try:
        if not hasattr(request.config, "workerinput"):
            for module in runs.selected:
                runs.of(module)
        yield runs
    finally:
        runs.pool.shutdown(wait=True, cancel_futures=True)


# --- the bundled matrix ----------------------------------------------------------------------
AXES = ("policy", "backend", "hardware")


@dataclass
class Cell:
    """One policy x backend x hardware cell: its validation report, and (composed on first use)
    its recipe and resolved bundle. Shared by every test: read, never modify."""

    name: str
    report: Report

    @functools.cached_property
    def recipe(self) -> Recipe:
        from registry.compose import compose

        return compose(self.name)

    @functools.cached_property
    def bundle(self) -> Bundle:
        from registry.resolve import resolve

        return resolve(self.recipe)


@functools.cache
def cell_names() -> tuple[str, ...]:
    from registry.sharing import sources

    return tuple("/".join(c) for c in itertools.product(*(sources.part_names(a) for a in AXES)))


@functools.cache
def bundled_matrix() -> dict[str, Cell]:
    """Every cell validated, once per session (collection-time parametrization reads it too)."""
    from registry.validate.report import validate_target

    return {name: Cell(name, validate_target(name)) for name in cell_names()}


@pytest.fixture(scope="session")
def matrix() -> dict[str, Cell]:
    return bundled_matrix()
