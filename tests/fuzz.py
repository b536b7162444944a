"""Fuzzing the `recipe` command line in-process (issue 13): hypothesis strategies that build cases,
and `run_case`, which plays one.

A `Case` is a few files (recipe YAML, an accelerate yaml, DeepSpeed or OpenTau JSON) and one to
three `recipe` argvs, run one after another through `registry.commands.main` in a fresh temporary
folder (the working directory while they run), with stdout and stderr captured. The property each
call must keep: it returns an int exit code, 0, 1 or 2 (argparse's SystemExit(2) counts as a usage
error); no other exception escapes ("traceback"); it ends within TIMEOUT_S ("hang", interrupted by
SIGALRM in the main thread); and it starts no process, opens no socket and writes nothing outside
its folder ("forbidden", refused by an audit hook). `run_case` returns the first call that broke
it, as an `Outcome` with the exception's type and the innermost registry frame.

Strategies, one per kind of input (`STRATEGIES`):
  files      recipe files: real keys from the schemas mixed with junk keys, values of every type
             (huge ints, nan/inf, control characters, nesting), random `extends`, raw YAML mutations;
             then validate / estimate / resolve / show / run --dry-run / diff, with overrides
  overrides  bundled cells with type-correct but out-of-range values on real keys, wrong types,
             malformed override syntax and axis swaps
  names      random names (`a/b/c`, `x@1`, `team:foo`, `../x`) for every verb that takes one
  imports    accelerate yaml + DeepSpeed JSON (+ OpenTau JSON or lerobot-train flags), real ones
             from tests/data/corpus mutated or built from the field tables; `recipe import` (then
             estimate / resolve of what it wrote) or `recipe validate --accelerate-config`
  datasets   a LeRobot dataset folder whose meta/info.json is hostile (deep nesting, huge and
             non-finite numbers, wrong types, not UTF-8) and a pretrained checkpoint's config.json,
             a recipe pointing at them; then doctor / estimate / run --dry-run

Never `recipe run` without --dry-run, never `bench`. Used by tests/test_fuzz.py (3,000 cases, fixed
seed, in CI) and benchmarks/fuzz.py (100,000 cases, several processes).
"""

from __future__ import annotations

import contextlib
import copy
import functools
import io
import itertools
import json
import os
import shutil
import signal
import string
import sys
import tempfile
import threading
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "data" / "corpus"
TIMEOUT_S = 10.0
OK_CODES = (0, 1, 2)
AXES = ("policy", "backend", "hardware")


# --- the runner ------------------------------------------------------------------------------
@dataclass
class Case:
    files: dict[str, bytes]  # relative path -> content, written into the case's folder
    calls: list[list[str]]  # recipe argvs, run in order

    def __repr__(self) -> str:  # what hypothesis prints for a falsifying example
        return f"Case(files={sorted(self.files)!r}, calls={self.calls!r})"


@dataclass
class Outcome:
    kind: str  # ok | traceback | hang | forbidden | exit-code
    argv: list[str] = field(default_factory=list)
    rc: object = None
    exc_type: str = ""
    location: str = ""  # innermost frame in registry/ (else innermost): file:line function
    message: str = ""
    traceback: str = ""
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.kind == "ok"

    @property
    def key(self) -> str:
        """What groups outcomes of one bug: kind, exception type and where it was raised."""
        return f"{self.kind} {self.exc_type} at {self.location}".strip()


class Hang(BaseException):
    """Raised by SIGALRM in a call that ran past TIMEOUT_S (a BaseException: `except Exception` in
    the code under test does not swallow it)."""


class Forbidden(BaseException):
    """Raised by the audit hook: the call tried to start a process, open a socket or write outside
    its folder."""


_ACTIVE = threading.local()  # .folder: the case's folder while a call runs in this thread
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC
_PROCESS_EVENTS = {"subprocess.Popen", "os.system", "os.exec", "os.spawn", "os.posix_spawn", "os.fork", "pty.spawn"}
_SOCKET_EVENTS = {"socket.connect", "socket.bind", "socket.getaddrinfo", "socket.sendto", "urllib.Request"}
_PATH_EVENTS = {"os.mkdir", "os.rename", "os.remove", "os.rmdir", "os.symlink", "os.link", "os.truncate", "os.chmod"}


# git commands resolve uses to record where a recipe file was committed (registry/sharing/git.py):
# local reads, allowed; anything else git does (clone, fetch) is not.
_GIT_READS = {"rev-parse", "log", "status", "ls-files", "show", "cat-file", "rev-list", "describe", "diff"}


def _audit(event: str, args: tuple) -> None:
    folder = getattr(_ACTIVE, "folder", None)
    if folder is None:
        return
    if event == "subprocess.Popen" and _git_read(args[1]):
        return
    if event in _PROCESS_EVENTS or event in _SOCKET_EVENTS:
        raise Forbidden(f"{event} {args!r:.200}")
    made = os.path.abspath(os.fsdecode(args[0])) if event == "os.mkdir" else ""
    if made and os.path.dirname(made) == tempfile.gettempdir() and not os.path.exists(made):
        _ACTIVE.temps.append(os.path.realpath(args[0]))  # a temporary folder of its own, removed by the end
        return
    if event == "open":
        path, mode, flags = args
        writes = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
            mode is None and isinstance(flags, int) and flags & _WRITE_FLAGS
        )
        if writes:
            _inside(folder, path, event)
    elif event in _PATH_EVENTS:
        for path in args[:2] if event in ("os.rename", "os.symlink", "os.link") else args[:1]:
            _inside(folder, path, event)


def _git_read(argv) -> bool:
    if isinstance(argv, (str, bytes)) or not argv:
        return False
    words = [os.fsdecode(w) if isinstance(w, (str, bytes, os.PathLike)) else "" for w in argv]
    subcommands = [w for w in words[1:] if not w.startswith("-")]
    return os.path.basename(words[0]) == "git" and bool(subcommands) and subcommands[0] in _GIT_READS


def _inside(folder: str, path, event: str) -> None:
    if isinstance(path, int) or path is None:
        return
    text = os.fsdecode(path)
    if "__pycache__" in text:
        return  # the interpreter caching a module imported lazily
    full = os.path.realpath(os.path.join(os.getcwd(), text))
    # the verdict cache (registry/validate/verdicts.py) is the product's own, under XDG_CACHE_HOME
    kept = os.path.realpath(verdicts_folder())
    if not any(full == root or full.startswith(root + os.sep) for root in (folder, kept, *_ACTIVE.temps)):
        raise Forbidden(f"{event} outside the case's folder: {text!r}")


def verdicts_folder() -> str:
    from registry.validate import verdicts

    return str(verdicts.folder().parent)  # $XDG_CACHE_HOME/recipe, made on the way


@functools.cache
def _install_hook() -> None:
    sys.addaudithook(_audit)


def _location(tb) -> str:
    frames = traceback.extract_tb(tb)
    if not frames:
        return "?"
    ours = [f for f in frames if f"{os.sep}registry{os.sep}" in f.filename]
    frame = (ours or frames)[-1]
    name = frame.filename
    with contextlib.suppress(ValueError):
        name = str(Path(name).relative_to(ROOT))
    where = f"{name}:{frame.lineno} {frame.name}"
    last = frames[-1]
    if ours and last is not frame:
        where += f" (in {Path(last.filename).name}:{last.lineno} {last.name})"
    return where


def _on_alarm(signum, frame):
    raise Hang(f"ran past {TIMEOUT_S:g} s")


def run_call(argv: list[str], timeout: float = TIMEOUT_S) -> Outcome:
    """One `recipe` call in the current directory, its output captured."""
    from registry.commands import main

    alarm = threading.current_thread() is threading.main_thread()
    if alarm:
        previous = signal.signal(signal.SIGALRM, _on_alarm)
        signal.setitimer(signal.ITIMER_REAL, timeout)
    out, err = io.StringIO(), io.StringIO()
    start = time.perf_counter()
    outcome = Outcome("ok", list(argv))
    _ACTIVE.folder, _ACTIVE.temps = os.path.realpath(os.getcwd()), []
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = main(list(argv))
        outcome.rc = rc
        if type(rc) is bool or not isinstance(rc, int) or int(rc) not in OK_CODES:
            outcome.kind, outcome.message = "exit-code", f"returned {rc!r}"
    except SystemExit as e:
        outcome.rc = e.code
        if e.code != 2:
            outcome.kind, outcome.message = "exit-code", f"SystemExit({e.code!r})"
    except (Hang, Forbidden) as e:
        outcome.kind = "hang" if isinstance(e, Hang) else "forbidden"
        outcome.exc_type, outcome.message = type(e).__name__, str(e)
        outcome.location, outcome.traceback = _location(e.__traceback__), traceback.format_exc()
    except BaseException as e:
        outcome.kind, outcome.exc_type, outcome.message = "traceback", type(e).__name__, str(e)[:500]
        outcome.location, outcome.traceback = _location(e.__traceback__), traceback.format_exc()
    finally:
        _ACTIVE.folder = None
        if alarm:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
    outcome.seconds = time.perf_counter() - start
    left = [t for t in _ACTIVE.temps if os.path.exists(t)]
    if outcome.ok and left:
        outcome.kind, outcome.message = "forbidden", f"left its temporary folder behind: {left[0]}"
        for t in left:
            shutil.rmtree(t, ignore_errors=True)
    if outcome.ok and not alarm and outcome.seconds > timeout:  # no SIGALRM off the main thread
        outcome.kind, outcome.message = "hang", f"took {outcome.seconds:.1f} s"
    return outcome


# Two shortcuts while a call runs (in its thread only; other threads get the real functions): the
# case's files die with its folder, so write_atomic's fsync buys nothing; and the lock asks git
# whether each bundled input is committed (four git processes a file), remembered per path here.
_REAL_FSYNC = os.fsync


def _fsync(fd) -> None:
    if getattr(_ACTIVE, "folder", None) is None:
        _REAL_FSYNC(fd)


@functools.cache
def _shortcuts():
    from registry.sharing import git

    real = git.committed
    remembered = functools.lru_cache(maxsize=4096)(lambda paths: real(list(paths)))

    def committed(paths):
        if getattr(_ACTIVE, "folder", None) is None:
            return real(paths)
        return remembered(tuple(Path(p) for p in paths))

    return git, real, committed


# The host's GPUs, for `recipe doctor` (the `datasets` strategy): nvidia-smi is a process, which
# the audit hook refuses; the call's thread sees this stand-in host instead (other threads, and
# `recipe run`'s early question in a thread of its own, ask the real nvidia-smi).
STAND_IN_GPUS = 8


@functools.cache
def _host():
    from registry.run import machine

    real = machine.gpus

    def gpus():
        if getattr(_ACTIVE, "folder", None) is None:
            return real()
        return [machine.GPU("NVIDIA H100 80GB HBM3", 81559, "550.54.15")] * STAND_IN_GPUS

    return machine, real, gpus


@contextlib.contextmanager
def _cheap():
    git, real, committed = _shortcuts()
    machine, real_gpus, gpus = _host()
    os.fsync, git.committed, machine.gpus = _fsync, committed, gpus
    try:
        yield
    finally:
        os.fsync, git.committed, machine.gpus = _REAL_FSYNC, real, real_gpus


def run_case(case: Case, timeout: float = TIMEOUT_S) -> Outcome:
    """Every call of a case in a fresh folder; the first outcome that is not ok, else the last."""
    _install_hook()
    folder = tempfile.mkdtemp(prefix="recipe-fuzz-")
    cwd = os.getcwd()
    outcome = Outcome("ok")
    try:
        for rel, content in case.files.items():
            path = Path(folder, rel)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(content)
        os.chdir(folder)
        with _cheap():
            for argv in case.calls:
                outcome = run_call(argv, timeout)
                if not outcome.ok:
                    break
    finally:
        os.chdir(cwd)
        shutil.rmtree(folder, ignore_errors=True)
    return outcome


def seal(home: str | None = None) -> str:
    """Cut a process off from the user's configuration (what tests/conftest.py does for pytest):
    no RECIPE_* variables, a HOME and XDG folders of its own; hypothesis keeps its files there too."""
    from hypothesis.configuration import set_hypothesis_home_dir

    home = home or tempfile.mkdtemp(prefix="recipe-fuzz-home-")
    for name in list(os.environ):
        if name.startswith(("RECIPE_", "ACCELERATE_", "SLURM_")):
            del os.environ[name]
    for name, sub in (("HOME", "home"), ("XDG_CONFIG_HOME", "config"), ("XDG_CACHE_HOME", "cache")):
        Path(home, sub).mkdir(parents=True, exist_ok=True)
        os.environ[name] = str(Path(home, sub))
    set_hypothesis_home_dir(str(Path(home, "hypothesis")))
    return home


# --- what the schemas and the bundled recipes declare -----------------------------------------
@dataclass(frozen=True)
class Leaf:
    path: tuple[str, ...]  # "*" stands for any key of a free-form mapping
    spec: dict  # the schema keywords of every branch that declares the field, merged

    @property
    def dotted(self) -> str:
        return ".".join(self.path)


def _branches(docs: dict, file: str, node) -> list[tuple[str, dict]]:
    """A schema node and every subschema that adds to it, with $refs followed."""
    if not isinstance(node, dict):
        return []
    out = [(file, node)]
    ref = node.get("$ref")
    if isinstance(ref, str):
        target_file, _, pointer = ref.partition("#")
        target_file = target_file or file
        target = docs.get(target_file, {})
        for part in filter(None, pointer.split("/")):
            target = target.get(part, {}) if isinstance(target, dict) else {}
        out += _branches(docs, target_file, target)
    for keyword in ("allOf", "anyOf", "oneOf"):
        for sub in node.get(keyword, []):
            out += _branches(docs, file, sub)
    for keyword in ("then", "else"):
        out += _branches(docs, file, node.get(keyword))
    return out


@functools.cache
def schema_leaves() -> tuple[Leaf, ...]:
    """Every field the recipe schema declares, by dotted path, sections included."""
    from registry.files import schema_documents

    docs = schema_documents()
    found: dict[tuple, dict] = {}

    def walk(nodes: list[tuple[str, dict]], path: tuple) -> None:
        if len(path) > 8:
            return
        children: dict[str, list] = {}
        for file, node in nodes:
            for name, sub in (node.get("properties") or {}).items():
                children.setdefault(name, []).extend(_branches(docs, file, sub))
            extra = node.get("additionalProperties")
            if isinstance(extra, dict):
                children.setdefault("*", []).extend(_branches(docs, file, extra))
        for name, subs in children.items():
            spec: dict = {}
            for _, sub in subs:
                for k, v in sub.items():
                    spec.setdefault(k, v)
            found[(*path, name)] = spec
            walk(subs, (*path, name))

    walk(_branches(docs, "recipe.schema.json", docs["recipe.schema.json"]), ())
    return tuple(Leaf(p, s) for p, s in found.items())


@functools.cache
def base_values() -> dict[str, object]:
    """Dotted path -> value for every leaf of recipes/base.yaml and the bundled parts (valid values)."""
    out: dict[str, list] = {}

    def walk(value, path):
        if isinstance(value, dict) and value:
            for k, v in value.items():
                walk(v, (*path, str(k)))
        else:
            out.setdefault(".".join(path), [])
            if value not in out[".".join(path)]:
                out[".".join(path)].append(value)

    for file in sorted((ROOT / "recipes").rglob("*.yaml")):
        if "catalog" in file.parts:
            continue
        with contextlib.suppress(yaml.YAMLError, OSError):
            data = yaml.safe_load(file.read_text(encoding="utf-8"))
            if isinstance(data, dict):
                walk({k: v for k, v in data.items() if k not in ("recipe", "results", "extends")}, ())
    return out


@functools.cache
def part_names() -> dict[str, tuple[str, ...]]:
    from registry.sharing import sources

    return {axis: tuple(sources.part_names(axis)) for axis in AXES}


@functools.cache
def cell_names() -> tuple[str, ...]:
    parts = part_names()
    return tuple("/".join(c) for c in itertools.product(*(parts[a] for a in AXES)))


@functools.cache
def tuned_names() -> tuple[str, ...]:
    return tuple(
        sorted(str(p.relative_to(ROOT / "recipes").with_suffix("")) for p in (ROOT / "recipes").glob("*/*/*.yaml"))
    )


@functools.cache
def gpu_names() -> tuple[str, ...]:
    data = yaml.safe_load((ROOT / "recipes" / "catalog" / "gpus.yaml").read_text(encoding="utf-8"))
    return tuple(sorted(k for k in data if isinstance(k, str) and k not in ("recipe", "extends")))


def pick(values):
    """st.sampled_from, built once per set of values (building strategies per draw is slow)."""
    values = tuple(values)
    try:
        return _pick(values)
    except TypeError:  # unhashable values
        return st.sampled_from(values)


@functools.cache
def _pick(values: tuple):
    return st.sampled_from(values)


# --- values ----------------------------------------------------------------------------------
HUGE_INTS = (2**31, 2**31 - 1, -(2**31), 2**53 + 1, 2**63, 2**63 - 1, -(2**63) - 1, 2**64, 10**30, -(10**30), 10**400)
ODD_FLOATS = (0.0, -0.0, 5e-324, 1e-300, -1e-300, 1e308, -1e308, 1.7976931348623157e308, 0.1, 1e-9, 0.5, 1.5)
NASTY_STRINGS = (
    "nan", "NaN", ".nan", "inf", "-inf", ".inf", "-.Inf", "Infinity", "1e999", "-1e999", "0x1F", "0o17", "0b101",
    "1_000", "١٢", "²", "yes", "no", "on", "off", "y", "n", "~", "null", "Null", "true", "True", "2001-12-14",
    "2001-12-14t21:59:43.10-05:00", "12:30:45", "1:20", "", " ", "\n", "a\nb", "trailing\n", "\t", "\r\n",
    "\x00", "\x07bell", "\x1b[31mred", "\u202eevil", "\u2028", "\ufeff", "\x85", "é", "🤖", "${HOME}", "$(id)",
    "`id`", "{train.micro_batch_size}", "{nope}", "{", "%s%n", "../../etc/passwd", "/abs/path", "C:\\x", "a" * 300,
    "'", '"', "\\", "*alias", "&anchor", "!!python/object/apply:os.system", "- item", "key: value", "[1, 2]",
    "{a: 1}", "#comment", "---", "...", "@1", "x@0", "team:foo",
)  # fmt: skip
# An alphabet of its own: hypothesis's default one costs seconds to build in each fresh process.
ALPHABET = (
    string.ascii_letters + string.digits + string.punctuation + " \t\n\r\x0b\x0c"
    + "".join(map(chr, range(0x20))) + "\x7f\x85\xa0é²³١٢\u0660\u2028\u2029\u202e\u200b\ufeff\ufffd漢ßİı🤖"
)  # fmt: skip
SHORT_TEXT = st.text(alphabet=ALPHABET, max_size=12)
LINE_TEXT = st.text(alphabet=ALPHABET, max_size=20)
_WORD = string.ascii_letters + string.digits + "_"
_identifiers = st.builds(  # [A-Za-z_][A-Za-z0-9_]{0,12}
    str.__add__, st.sampled_from(string.ascii_letters + "_"), st.text(alphabet=_WORD, max_size=12)
)
_segment_text = st.builds(  # what a name segment allows: [A-Za-z0-9][A-Za-z0-9._+-]{0,10}
    str.__add__, st.sampled_from(string.ascii_letters + string.digits), st.text(alphabet=_WORD + ".+-", max_size=10)
)
junk_keys = st.one_of(
    _identifiers,
    pick(["extends", "recipe", "results", "name", "kind", "type", "version", "<<", "", " ", "a.b", "0"]),
    SHORT_TEXT,
)
junk_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    pick(HUGE_INTS),
    st.floats(),  # nan and inf included: YAML writes them .nan and .inf, JSON NaN and Infinity
    pick(ODD_FLOATS),
    pick(NASTY_STRINGS),
    LINE_TEXT,
)
junk_values = st.recursive(
    junk_scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.one_of(junk_keys, st.integers()), inner, max_size=4)
    ),
    max_leaves=8,
)


def _types(spec: dict) -> list[str]:
    t = spec.get("type")
    if isinstance(t, str):
        return [t]
    if isinstance(t, list):
        return [x for x in t if isinstance(x, str)]
    if "enum" in spec or "const" in spec:
        return sorted({_json_type(v) for v in spec.get("enum", [spec.get("const")])})
    if "properties" in spec:
        return ["object"]
    return []


def _json_type(v) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int):
        return "integer"
    if isinstance(v, float):
        return "number"
    return {str: "string", list: "array", dict: "object"}.get(type(v), "string")


def _num(spec: dict, key: str):
    v = spec.get(key)
    return v if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def good_values(leaf: Leaf) -> list:
    """Values the schema accepts at a field (as far as a sample goes)."""
    spec, out = leaf.spec, []
    out += list(spec.get("enum", []))
    if "const" in spec:
        out.append(spec["const"])
    if "default" in spec:
        out.append(spec["default"])
    out += base_values().get(leaf.dotted, [])
    for t in _types(spec):
        lo = _num(spec, "minimum")
        lo = lo if lo is not None else _num(spec, "exclusiveMinimum")
        hi = _num(spec, "maximum")
        if t == "integer":
            lo = int(lo) + (1 if "exclusiveMinimum" in spec else 0) if lo is not None else 0
            out += [lo, lo + 1, hi if hi is not None else lo + 7]
        elif t == "number":
            base = (lo or 0) + (0.5 if "exclusiveMinimum" in spec or lo is None else 0)
            out += [base, hi if hi is not None else base + 1]
        elif t == "boolean":
            out += [True, False]
        elif t == "null":
            out.append(None)
        elif t == "string" and "pattern" not in spec and "enum" not in spec:
            out += ["x", "value"]
        elif t == "array" and not spec.get("minItems"):
            out.append([])
        elif t == "object":
            out.append({})
    return [v for v in out if v is not None or "null" in _types(spec)] or [None]


def bad_values(leaf: Leaf) -> list:
    """Type-correct values outside the field's range, and the near misses of its type."""
    spec, out = leaf.spec, []
    types = _types(spec)
    lo = _num(spec, "minimum")
    xlo = _num(spec, "exclusiveMinimum")
    hi = _num(spec, "maximum")
    xhi = _num(spec, "exclusiveMaximum")
    if "integer" in types:
        out += [0, -1, 1, 2, 3, 7, 1000, *HUGE_INTS]
        for edge in (lo, xlo, hi, xhi):
            if edge is not None:
                out += [int(edge) - 1, int(edge), int(edge) + 1]
        out += [True, 1.0, 2.5, "8"]
    if "number" in types:
        out += [*ODD_FLOATS, -1.0, 1, 0, 10**30, 2**64]
        for edge in (lo, xlo, hi, xhi):
            if edge is not None:
                out += [edge, edge - 1e-9, edge + 1e-9, edge * 2 + 1, -edge]
        out += ["1e-4", "nan", False]
    if "string" in types:
        out += ["", "x" * 1000, "a\nb", "\x00", "with space", "ÄÖ", "x/y", "-flag", "${X}", "{train.steps}", 5]
        if "maxLength" in spec:
            out.append("y" * (int(spec["maxLength"]) + 1))
    if "enum" in spec:
        for v in spec["enum"]:
            if isinstance(v, str):
                out += [v.upper(), v + " ", v[:-1], v + "\n"]
        out += ["unknown", 0, None, True]
    if "boolean" in types:
        out += ["yes", "true", 1, 0, None]
    if "array" in types:
        out += [[], [None], [[]], [1, "a"], list(range(50)), "a,b", {"0": 1}]
        items = spec.get("items") if isinstance(spec.get("items"), dict) else {}
        if items:
            out += [[v] for v in bad_values(Leaf((*leaf.path, "0"), items))[:6]]
        if "maxItems" in spec:
            out.append([good_values(Leaf(leaf.path, items))[0]] * (int(spec["maxItems"]) + 1) if items else [1] * 9)
    if "object" in types or "properties" in spec:
        out += [{}, [], "section", 0, None, {"junk": 1}]
    if "null" in types:
        out.append(None)
    return out or [None, 0, "", [], {}]


def value_for(leaf: Leaf, mostly_good: bool = True):
    """A value for a field: mostly valid, or mostly out of range; now and then anything."""
    return _value_for(leaf.path, mostly_good)


@functools.cache
def _value_for(path: tuple, mostly_good: bool):
    leaf = next(leaf for leaf in schema_leaves() if leaf.path == path)
    # copies: a drawn list or mapping is filled in later, and the samples are shared by every case
    good = st.sampled_from(good_values(leaf)).map(copy.deepcopy)
    bad = st.sampled_from(bad_values(leaf)).map(copy.deepcopy)
    return st.one_of(good, good, good, bad, bad, junk_values) if mostly_good else st.one_of(good, bad, bad, bad)


# Fields the memory estimate, the batch arithmetic and the launch files compute with: drawn as
# often as all the others together, so that out-of-range values reach that arithmetic.
HOT = (
    "policy.memory", "backend.memory", "hardware", "train.micro_batch_size", "train.gradient_accumulation_steps",
    "train.batch_size", "train.global_batch_size", "dataset.num_cams", "policy.n_obs_steps", "backend.sharding",
    "backend.version", "backend.zero_stage", "backend.offload", "backend.reduce_bucket_size", "backend.kind",
    "backend.mixed_precision", "policy.dtype", "launch",
)  # fmt: skip


@functools.cache
def leaf_choice():
    leaves = schema_leaves()
    hot = [leaf for leaf in leaves if any(leaf.dotted == h or leaf.dotted.startswith(h + ".") for h in HOT)]
    return st.one_of(st.sampled_from(leaves), st.sampled_from(hot))


def yaml_text(value) -> str:
    """A value as override text (`key=TEXT`), as a user might type it."""
    if isinstance(value, str):
        return value  # plain: the command line reads it as YAML (`yes`, `1e999`, `[1`)
    if isinstance(value, float) and value != value:
        return ".nan"
    if isinstance(value, float) and value in (float("inf"), float("-inf")):
        return ".inf" if value > 0 else "-.inf"
    if isinstance(value, (bool, int, float)) or value is None:
        return json.dumps(value)
    try:
        return json.dumps(value, ensure_ascii=False)
    except ValueError:
        return str(value)


# --- names and overrides ---------------------------------------------------------------------
@functools.cache
def _segments():
    parts = part_names()
    real = sorted({p for ps in parts.values() for p in ps} | set(AXES) | {"bundled", "base", "catalog", "gpus"})
    return st.one_of(
        pick(real),
        _segment_text,
        pick(["", ".", "..", "a" * 65, " x", "x y", "é", "١", "*", "?", "~", "$HOME", "x\n", "\x00"]),
    )


@st.composite
def names(draw) -> str:
    """A recipe name, real or not: [source:]seg/seg[@version], or a .yaml path."""
    kind = draw(st.integers(0, 9))
    if kind == 0:
        return draw(pick(cell_names() + tuned_names()))
    if kind == 1:
        return draw(SHORT_TEXT).lstrip("-")
    segs = draw(st.lists(_segments(), min_size=1, max_size=4))
    text = "/".join(segs)
    if draw(st.booleans()):
        source = draw(st.one_of(pick(["bundled", "team", "team-a", "x_y", "", "a/b", "../x"]), _segments()))
        text = f"{source}:{text}"
    if draw(st.integers(0, 2)) == 0:
        version = draw(
            st.one_of(
                st.integers(-2, 3).map(str),
                pick(["", "x", "1.0", "١", "²", "99999999999999999999", "0", "01", " 1", "1\n"]),
            )
        )
        text = f"{text}@{version}"
    if draw(st.integers(0, 5)) == 0:
        text += draw(pick([".yaml", ".yml", "/", "//x", ".YAML"]))
    if text.startswith("-"):
        text = "x" + text
    return text


MALFORMED_OVERRIDES = (
    "=3", "a..b=1", "a.=1", ".a=1", "a b=1", "train", "train.micro_batch_size", "a=b=c", "train.micro_batch_size==8",
    "train.micro_batch_size=", "train.micro_batch_size= ", "policy=", "hardware=", "backend=[1]", "hardware={a: 1}",
    "policy=nope", "hardware=8xA100 ", "backend=zero2\n", "train.0=1", "train.optimizer.betas.0=0.5",
    "train.optimizer.betas.5=1", "env.=x", "1train=1", "trаin.steps=1", "train.steps=[", "train.steps={",
    "train.steps=*a", "train.steps=&a 1", "train.steps=!!int 1", "train.steps=!!python/int 1", "train.steps=- 1",
    "train.steps=1\n2", "train.steps=a: b", "train.steps=1 # c", "train=5", "train=null", "policy.memory=[]",
    "hardware.gpu=nope", "hardware.gpu=null", "recipe.name=../x", "extends=[]", "extends=[nope]",
    "results.x=1", "env.PATH=/x", "env.X=a\nb", "env.1X=1", "launch.launcher=slurm",
)  # fmt: skip


@st.composite
def overrides(draw, max_size: int = 3) -> list[str]:
    """Overrides on real keys (valid, out of range, wrong type, as typed text) and malformed ones."""
    out = []
    for _ in range(draw(st.integers(0, max_size))):
        kind = draw(st.integers(0, 19))
        if kind <= 15:
            leaf = draw(leaf_choice())
            key = ".".join(draw(_identifiers) if p == "*" else p for p in leaf.path)
            value = draw(value_for(leaf, mostly_good=False))
            out.append(f"{key}={yaml_text(value)}")
        elif kind <= 17:
            out.append(draw(pick(MALFORMED_OVERRIDES)))
        elif kind == 18:
            axis = draw(pick(AXES))
            out.append(f"{axis}={draw(st.one_of(pick(part_names()[axis]), _segments()))}")
        else:
            key = draw(st.one_of(_identifiers, SHORT_TEXT))
            out.append(f"{key}={draw(SHORT_TEXT)}")
    return [o for o in out if not o.startswith("-")]


# --- recipe documents --------------------------------------------------------------------------
def _set(doc: dict, path: tuple, value) -> None:
    node = doc
    for key in path[:-1]:
        if not isinstance(node.get(key), dict):
            node[key] = {}
        node = node[key]
    node[path[-1]] = value


EXTENDS_JUNK = ("other.yaml", "sub/x.yaml", "r.yaml", "../x.yaml", "/etc/hosts.yaml", "nope.yaml", "x.yml", "")


@st.composite
def extends_entries(draw) -> list:
    kind = draw(st.integers(0, 9))
    if kind <= 3:
        return [draw(pick(cell_names() + tuned_names()))]
    if kind <= 5:
        parts = part_names()
        return [f"{a}/{draw(pick(parts[a]))}" for a in AXES if draw(st.integers(0, 4))]
    if kind == 6:
        return []
    entries = st.one_of(names(), pick(EXTENDS_JUNK), junk_scalars)
    return draw(st.lists(entries, max_size=3))


@st.composite
def recipe_documents(draw, wild: bool | None = None) -> dict:
    """A recipe mapping. Mostly near-valid (a real cell extended, a few real fields set, mostly to
    values the schema accepts), so that cases reach the estimate and resolve; else wild: random
    extends, junk keys and values, whole sections replaced."""
    wild = draw(st.integers(0, 9)) < 3 if wild is None else wild
    doc: dict = {}
    if not wild:
        doc["extends"] = [draw(pick(cell_names() + tuned_names()))]
        if draw(st.booleans()):
            doc["recipe"] = {"name": draw(pick(("team/run-1", "mine", "a.b+c/d-e_f")))}
        for _ in range(draw(st.integers(0, 3))):
            leaf = draw(leaf_choice())
            _set(doc, tuple(draw(_identifiers) if p == "*" else p for p in leaf.path), draw(value_for(leaf)))
        return doc
    if draw(st.integers(0, 9)):
        doc["extends"] = draw(extends_entries())
    if draw(st.integers(0, 9)) == 0:
        doc["extends"] = draw(junk_values)
    if draw(st.booleans()):
        doc["recipe"] = {"name": draw(st.one_of(names(), junk_scalars))}
    for _ in range(draw(st.integers(0, 6))):
        leaf = draw(leaf_choice())
        _set(doc, tuple(draw(_identifiers) if p == "*" else p for p in leaf.path), draw(value_for(leaf)))
    for _ in range(draw(st.integers(0, 2))):
        kind = draw(st.integers(0, 3))
        if kind == 0:  # a junk key below a real section
            leaf = draw(leaf_choice())
            _set(doc, (*leaf.path[:-1], draw(junk_keys)), draw(junk_values))
        elif kind == 1:  # a whole section replaced
            section = draw(pick(("recipe", "trainer", "policy", "dataset", "backend", "hardware", "train")))
            doc[section] = draw(junk_values)
        else:
            doc[draw(junk_keys)] = draw(junk_values)
    return doc


YAML_MUTATIONS = (
    "<<: *x\n", "a: &x [*x]\n", "!!python/object/apply:os.system ['true']\n", "x: !!binary aGk=\n", "\tkey: 1\n",
    "key: [\n", "key: {\n", "? [a]\n: 1\n", "---\nb: 1\n", "...\n", "%YAML 1.1\n", "%TAG ! tag:x,2000:\n",
    "\ufeff", "\x00", "\x85", "train:\n  steps: 1\n", "train: 1\n", "policy: !!set {a}\n", "t: 2001-12-14\n",
    "x: 1e999\n", "x: .NaN\n", "x: 0b11\n", "x: 0o7\n", "x: 1:20\n", "x: =\n", "x: !!float 1\n", "x: !custom 1\n",
    "a: &a [1]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\nc: [*b, *b, *b, *b, *b, *b, *b, *b, *b]\n",
)  # fmt: skip


@st.composite
def yaml_bytes(draw, doc, mangle: bool = True) -> bytes:
    """A document as a YAML file, sometimes (with `mangle`) mangled on the way."""
    try:
        text = yaml.safe_dump(
            doc,
            sort_keys=False,
            allow_unicode=draw(st.booleans()),
            default_flow_style=draw(pick([False, None, True])),
            width=draw(pick([80, 20, 10**6])),
        )
    except (yaml.YAMLError, ValueError, RecursionError):
        text = json.dumps(doc, default=str)
    kind = draw(st.integers(0, 14)) if mangle else -1
    lines = text.splitlines(keepends=True) or [""]
    at = draw(st.integers(0, len(lines)))
    if kind == 0:
        lines.insert(at, draw(pick(YAML_MUTATIONS)))
    elif kind == 1:
        text = "".join(lines)
        return text[: draw(st.integers(0, len(text)))].encode("utf-8", "surrogatepass")
    elif kind == 2 and lines:
        lines.insert(at, lines[min(at, len(lines) - 1)])  # a duplicated line: often a duplicate key
    elif kind == 3:
        return b"".join(x.encode("utf-8", "surrogatepass") for x in lines) + draw(
            pick([b"\xff\xfe", b"\xc3", b"\x80", b"\n\x00", b"key: \xe9\n"])
        )
    elif kind == 4:
        lines.insert(at, draw(LINE_TEXT) + "\n")
    elif kind == 5:
        return draw(pick([b"", b"\n", b"# nothing\n", b"[]\n", b"1\n", b"null\n", b"'x'\n", b"---\n..."]))
    return "".join(lines).encode("utf-8", "surrogatepass")


def _verb_calls(draw, target: str, sets: list[str], other: str) -> list[str]:
    verb = draw(pick(["validate", "estimate", "estimate", "resolve", "run", "show", "diff"]))
    if verb == "validate":
        return ["validate", target, *sets, *draw(pick(((), ("-q",))))]
    if verb == "estimate":
        return ["estimate", target, *sets, *draw(pick(((), ("--format", "json"))))]
    if verb == "resolve":
        return ["resolve", target, *sets, "-o", draw(pick(["out", "out/deep/er"]))]
    if verb == "run":
        return ["run", target, *sets, "--dry-run"]
    if verb == "show":
        return ["show", target, *sets, *draw(pick(((), ("--origin",), ("--format", "json"))))]
    return ["diff", target, other] if draw(st.booleans()) else ["diff", other, target]


@st.composite
def file_cases(draw) -> Case:
    """A random recipe file (and sometimes a second one it may extend), run through the verbs."""
    wild = draw(st.integers(0, 9)) < 3
    files = {"r.yaml": draw(yaml_bytes(draw(recipe_documents(wild)), mangle=wild))}
    targets = ["r.yaml"] * 4 + ["./r.yaml"]
    if wild and draw(st.integers(0, 2)) == 0:
        other = draw(recipe_documents())
        if draw(st.booleans()):
            other["extends"] = ["r.yaml"]  # a cycle when r.yaml extends it
        name = draw(pick(("other.yaml", "sub/x.yaml")))
        files[name] = draw(yaml_bytes(other))
        targets.append(name)
    target = draw(pick(targets))
    other = draw(pick(cell_names() + ("other.yaml", "r.yaml")))
    sets = draw(overrides(max_size=2)) if draw(st.integers(0, 2)) == 0 else []
    calls = [_verb_calls(draw, target, sets, other) for _ in range(draw(st.integers(1, 2)))]
    return Case(files, calls)


@st.composite
def override_cases(draw) -> Case:
    """A bundled cell (or tuned recipe) with overrides on real keys, run through the verbs."""
    target = draw(pick(cell_names() + tuned_names()))
    calls = [_verb_calls(draw, target, draw(overrides()), draw(pick(cell_names())))]
    return Case({}, calls)


@st.composite
def name_cases(draw) -> Case:
    """Random names for every verb that takes one."""
    a, b = draw(names()), draw(names())
    sets = draw(overrides(max_size=1))
    calls = [_verb_calls(draw, a, sets, b) for _ in range(draw(st.integers(1, 2)))]
    return Case({}, calls)


# --- foreign configs for import --------------------------------------------------------------
def _table_keys(table, prefix: str = "") -> list[str]:
    from registry.trainers import mapping as m

    out = []
    for row in table.rows:
        foreign = getattr(row, "foreign", "") or ""
        key = f"{prefix}.{foreign}" if prefix and foreign else prefix or foreign
        if isinstance(row, m.Section):
            out += _table_keys(row.table, key)
        elif isinstance(row, m.Keyed):
            out += [f"{key}.x{row.suffix}", f"{key}.image{row.suffix}"]
        elif isinstance(row, m.Ignored):
            out.append(key.replace("*", "x"))
        elif foreign:
            out.append(key)
            out += [f"{prefix}.{a}" if prefix else a for a in getattr(row, "aliases", ())]
    return sorted(set(out))


@functools.cache
def foreign_keys() -> dict[str, tuple[str, ...]]:
    from registry.resolve import accelerate, deepspeed
    from registry.trainers import lerobot, opentau

    return {
        "accelerate": tuple(_table_keys(accelerate.TABLE)),
        "deepspeed": tuple(_table_keys(deepspeed.TABLE)),
        "opentau": tuple(_table_keys(opentau.TABLE)),
        "lerobot": tuple(_table_keys(lerobot.TABLE)),
    }


@functools.cache
def corpus() -> dict[str, tuple]:
    """Real configs: accelerate yamls, JSON files (DeepSpeed and OpenTau), lerobot flags, launch flags."""
    yamls, jsons = [], []
    for path in sorted(CORPUS.rglob("*")):
        if path.name == "manifest.yaml" or not path.is_file():
            continue
        if path.suffix in (".yaml", ".yml"):
            yamls.append(path.read_bytes())
        elif path.suffix == ".json" and path.name != "verdicts.json":
            jsons.append(path.read_bytes())
    for path in sorted((ROOT / "tests" / "data").glob("*")):
        if path.suffix == ".json":
            jsons.append(path.read_bytes())
        elif path.name.startswith("accelerate"):
            yamls.append(path.read_bytes())
    manifest = yaml.safe_load((CORPUS / "manifest.yaml").read_text(encoding="utf-8"))["entries"]
    args = tuple(e["args"] for e in manifest if isinstance(e.get("args"), str))
    launch = tuple(e["launch_args"] for e in manifest if isinstance(e.get("launch_args"), str))
    return {"yaml": tuple(yamls), "json": tuple(jsons), "args": args, "launch": launch}


ACCELERATE_VALUES = (
    "NO", "MULTI_GPU", "MULTI_CPU", "DEEPSPEED", "FSDP", "XLA", "MEGATRON_LM", "fp16", "bf16", "fp8", "no",
    "FULL_SHARD", "SHARD_GRAD_OP", "HYBRID_SHARD", "NO_SHARD", 1, 2, 3, "TRANSFORMER_BASED_WRAP", "SIZE_BASED_WRAP",
    "cpu", "nvme", "none", "auto", "${NUM_GPUS}", "static", "c10d", True, False, "true", "false",
)  # fmt: skip


@st.composite
def foreign_document(draw, kind: str) -> dict:
    """A config mapping over a table's foreign keys, with real and junk values."""
    doc: dict = {}
    keys = foreign_keys()[kind]
    for _ in range(draw(st.integers(0, 10))):
        key = draw(pick(keys))
        value = draw(st.one_of(pick(ACCELERATE_VALUES), junk_scalars, junk_values))
        with contextlib.suppress(TypeError, AttributeError):
            _set(doc, tuple(key.split(".")), value)
    if draw(st.integers(0, 3)) == 0:
        doc[draw(junk_keys)] = draw(junk_values)
    return doc


def _mutated(draw, content: bytes, loader) -> dict | None:
    """A real config with a few values replaced, or None where it does not parse as a mapping."""
    try:
        doc = loader(content)
    except Exception:
        return None
    if not isinstance(doc, dict):
        return None
    paths = []

    def walk(node, path):
        if isinstance(node, dict):
            for k, v in node.items():
                paths.append((*path, k))
                walk(v, (*path, k))

    walk(doc, ())
    for _ in range(draw(st.integers(0, 3))):
        if not paths:
            break
        path = draw(pick(paths))
        value = draw(st.one_of(pick(ACCELERATE_VALUES), junk_scalars, junk_values))
        with contextlib.suppress(TypeError, AttributeError, KeyError):
            node = doc
            for key in path[:-1]:
                node = node[key]
            if draw(st.integers(0, 4)):
                node[path[-1]] = value
            else:
                del node[path[-1]]
    return doc


@st.composite
def json_bytes(draw, kind: str) -> bytes:
    doc = None
    if draw(st.booleans()):
        doc = _mutated(draw, draw(pick(corpus()["json"])), json.loads)
    if doc is None:
        doc = draw(foreign_document(kind))
    mode = draw(st.integers(0, 9))
    if mode == 0:
        return draw(pick([b"", b"[]", b"null", b"{", b'{"a": 1,}', b"\xff", b'{"a": NaN}', b"1e999"]))
    try:
        text = json.dumps(doc, indent=draw(pick([None, 2])))
    except (ValueError, TypeError, RecursionError):
        text = "{}"
    if mode == 1:
        text = text[: draw(st.integers(0, len(text)))]
    return text.encode("utf-8", "surrogatepass")


@st.composite
def import_cases(draw) -> Case:
    """An accelerate yaml (+ DeepSpeed JSON, + OpenTau JSON or lerobot flags) imported, then the
    recipe it wrote estimated or resolved; or the same setup checked by validate --accelerate-config."""
    doc = None
    if draw(st.booleans()):
        doc = _mutated(draw, draw(pick(corpus()["yaml"])), yaml.safe_load)
    if doc is None:
        doc = draw(foreign_document("accelerate"))
    if (draw(st.integers(0, 2)) == 0 and "deepspeed_config" in doc) or draw(st.integers(0, 5)) == 0:
        section = doc.get("deepspeed_config")
        if isinstance(section, dict) and draw(st.booleans()):
            section["deepspeed_config_file"] = draw(pick(["ds.json", "nope.json", "", "../ds.json"]))
    files = {"acc.yaml": draw(yaml_bytes(doc))}
    args = ["--accelerate-config", draw(pick(["acc.yaml", "acc.yaml", "acc.yaml", "nope.yaml", "."]))]
    if draw(st.booleans()):
        files["ds.json"] = draw(json_bytes("deepspeed"))
        if draw(st.booleans()):
            args += ["--deepspeed-config", draw(pick(["ds.json", "ds.json", "nope.json"]))]
    trainer = draw(pick([None, None, "opentau", "lerobot"]))
    if trainer == "opentau":
        files["c.json"] = draw(json_bytes("opentau"))
        args += ["--trainer", "opentau", *draw(pick((("--trainer-config", "c.json"), ())))]
    elif trainer == "lerobot":
        flags = draw(st.one_of(pick(corpus()["args"]), _flag_strings()))
        args += ["--trainer", "lerobot", *draw(pick(((f"--trainer-args={flags}",), ())))]
    if draw(st.integers(0, 2)) == 0:
        parts = part_names()["policy"]
        args += ["--policy", draw(st.one_of(pick(parts), _segments()))]
    if draw(st.integers(0, 3)) == 0:
        program = draw(pick(["train.py", "x y.py", "", "$(id)", "a\nb", "-m x"]))
        args += [f"--program={program}"]
    if draw(st.integers(0, 2)) == 0:
        launch = draw(st.one_of(pick(corpus()["launch"]), _launch_strings()))
        args += [f"--launch-args={launch}"]
    if draw(st.integers(0, 3)) == 0:
        args += [f"--gpu={draw(st.one_of(pick(gpu_names()), _segments()))}"]
    if draw(st.integers(0, 3)) == 0:
        return Case(files, [["validate", *args, *draw(overrides(max_size=2))]])
    calls = [["import", *args, "-o", "out.yaml", *draw(pick(((), ("--force",), ("--name=x/y",))))]]
    follow = draw(pick([None, "estimate", "resolve", "validate"]))
    if follow == "resolve":
        calls.append(["resolve", "out.yaml", "-o", "res"])
    elif follow:
        calls.append([follow, "out.yaml", *draw(overrides(max_size=1))])
    return Case(files, calls)


@functools.cache
def _flag_strings():
    keys = foreign_keys()["lerobot"]
    flag = st.builds(
        lambda k, v, eq: f"--{k}={v}" if eq else f"--{k} {v}",
        pick(keys + ("policy.type", "unknown.flag", "", "=")),
        st.one_of(pick(["act", "diffusion", "pi05", "smolvla", "[0]", "true", "'a b'", '"', ""]), _nums()),
        st.booleans(),
    )
    return st.lists(st.one_of(flag, pick(["--", "-x", "'", '"unterminated', "\\"])), max_size=6).map(" ".join)


@functools.cache
def _launch_strings():
    from registry.resolve.accelerate import LAUNCH_FLAGS

    flag = st.builds(
        lambda k, v: f"--{k} {v}",
        pick(sorted(LAUNCH_FLAGS) + ["num-processes", "bogus"]),
        st.one_of(_nums(), pick(["x", "'", "", "1.5", "-1", "0", "99999999999999999999"])),
    )
    return st.lists(flag, max_size=4).map(" ".join)


@functools.cache
def _nums():
    return st.one_of(st.integers(-3, 64), pick(HUGE_INTS)).map(str)


# --- a dataset's own metadata ----------------------------------------------------------------
DATASET_CELLS = ("act/ddp/2xH100", "diffusion/ddp/2xH100", "smolvla/ddp/2xH100", "pi07/zero2/8xA100")
DATASET_ROOTS = ("data",) * 8 + ("./data", "data/", "missing", "data/meta", "data/meta/info.json")
# number literals Python's json module reads as inf, -inf, nan, or refuses (more than 4,300 digits)
RAW_NUMBERS = ("1e400", "-1e400", "NaN", "Infinity", "-Infinity", "1E-400", "-0", "1" + "0" * 400, "9" * 5000)
RAW_INFO = (
    b"", b" ", b"null", b"[]", b"[1, 2]", b'"features"', b"1e400", b"{", b'{"features": ', b"\xff\xfe{}",
    b"\xc3(", b"\x00", b"\xef\xbb\xbf{}", '{"features": {}}'.encode("utf-16"), b'{"features": []}',
    b'{"features": null}', b'{"features": {"a": 1}}', b'{"features": {"a": {"shape": "96"}}}',
)  # fmt: skip
DEPTHS = (30, 1_000, 5_000, 100_000)


@functools.cache
def twins() -> tuple[bytes, ...]:
    """The dataset twins' info.json files (tests/data/datasets/): real LeRobot metadata."""
    return tuple(p.read_bytes() for p in sorted((ROOT / "tests" / "data" / "datasets").glob("*/meta/info.json")))


@functools.cache
def _shapes():
    dim = st.one_of(st.integers(-2, 4096), pick(HUGE_INTS), st.booleans(), st.floats(), pick(NASTY_STRINGS))
    return st.one_of(st.lists(dim, max_size=4), junk_values)


@functools.cache
def _axis_names():
    name = pick(["height", "width", "channels", "HEIGHT", "Width", 1, None, True, 1.5, ["height"], {"a": 1}, ""])
    return st.one_of(st.lists(name, min_size=2, max_size=4), junk_values)


@st.composite
def _deep(draw) -> bytes:
    """Nesting to a depth of up to 100,000: at the top, under `features`, or as a shape."""
    n = draw(pick(DEPTHS))
    nest = "[" * n + "]" * n if draw(st.booleans()) else '{"a": ' * n + "1" + "}" * n
    where = draw(pick(["top", "features", "shape", "fps"]))
    if where == "top":
        return nest.encode()
    if where == "features":
        return ('{"fps": 10, "features": ' + nest + "}").encode()
    if where == "shape":
        return ('{"features": {"observation.images.top": {"dtype": "image", "shape": ' + nest + "}}}").encode()
    return ('{"features": {}, "fps": ' + nest + "}").encode()


def _with_raw(draw, doc) -> bytes:
    """The document as JSON, some of its values number literals JSON allows and Python reads oddly."""
    raws = []

    def mark(node):
        if isinstance(node, dict):
            for k in list(node):
                if draw(st.integers(0, 11)) == 0:
                    raws.append(draw(pick(RAW_NUMBERS)))
                    node[k] = f"@@RAW{len(raws) - 1}@@"
                else:
                    mark(node[k])

    mark(doc)
    try:
        text = json.dumps(doc, indent=draw(pick([None, 2])))
    except (ValueError, TypeError, RecursionError):
        text = "{}"
    for i, raw in enumerate(raws):
        text = text.replace(f'"@@RAW{i}@@"', raw)
    return text.encode("utf-8", "surrogatepass")


INFO_FIELDS = ("features", "fps", "total_frames", "total_episodes", "codebase_version")
FEATURE_FIELDS = ("shape", "names", "dtype")


@st.composite
def info_bytes(draw) -> bytes:
    """A hostile meta/info.json: a real twin with the fields the pre-flight reads given wrong
    types, huge or non-finite numbers; deep nesting; raw bytes (empty, not UTF-8, a list)."""
    mode = draw(st.integers(0, 9))
    if mode == 0:
        return draw(_deep())
    if mode == 1:
        return draw(pick(RAW_INFO))
    doc = json.loads(draw(pick(twins())))
    features = doc.get("features") or {}
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.integers(0, 5))
        if kind == 0:
            doc[draw(pick(INFO_FIELDS))] = draw(st.one_of(pick(HUGE_INTS), junk_scalars, junk_values))
        elif kind <= 3 and features:
            feature = features[draw(pick(sorted(features)))]
            if isinstance(feature, dict):
                field_ = draw(pick(FEATURE_FIELDS))
                value = {"shape": _shapes(), "names": _axis_names()}.get(field_)
                feature[field_] = draw(
                    value if value is not None else st.one_of(pick(["image", "video"]), junk_scalars)
                )
        elif kind == 4 and features:
            features[draw(pick(sorted(features)))] = draw(junk_values)
        else:  # a camera more, of any shape
            key = draw(pick(["observation.images.extra", "observation.state", "action", ""]))
            features[key] = {"dtype": draw(pick(["image", "video"])), "shape": draw(_shapes()), "names": None}
    data = _with_raw(draw, doc)
    if draw(st.integers(0, 9)) == 0:
        data = data[: draw(st.integers(0, len(data)))]
    return data


@st.composite
def config_bytes(draw) -> bytes:
    """A pretrained checkpoint's config.json with input_features/output_features of wrong shapes."""
    mode = draw(st.integers(0, 7))
    if mode == 0:
        return draw(_deep())
    if mode == 1:
        return draw(pick(RAW_INFO))
    feature = st.fixed_dictionaries(
        {"type": st.one_of(pick(["VISUAL", "STATE", "ACTION"]), junk_scalars), "shape": _shapes()}
    )
    keys = pick(["observation.images.top", "observation.images.front", "observation.state", "action", ""])
    side = st.one_of(st.dictionaries(keys, st.one_of(feature, junk_values), max_size=4), junk_values)
    doc = {name: draw(side) for name in ("input_features", "output_features") if draw(st.integers(0, 5))}
    if draw(st.integers(0, 5)) == 0:
        doc = draw(st.one_of(junk_values, st.just([doc])))
    return _with_raw(draw, doc)


@functools.cache
def _dataset_leaves():
    return st.sampled_from(
        [leaf for leaf in schema_leaves() if leaf.path[0] in ("dataset", "policy", "hardware", "train")]
    )


@st.composite
def _dataset_override(draw) -> str:
    """An override of what the pre-flight compares the metadata and the host with (dataset.*,
    policy.*, hardware.*, train.*): the recipe's other fields are the other strategies' subject."""
    leaf = draw(_dataset_leaves())
    key = ".".join(draw(_identifiers) if p == "*" else p for p in leaf.path)
    return f"{key}={yaml_text(draw(value_for(leaf, mostly_good=False)))}"


@st.composite
def dataset_cases(draw) -> Case:
    """A LeRobot dataset folder (data/meta/info.json, hostile) and a recipe pointing at it
    (dataset.root), sometimes with a pretrained checkpoint (policy.pretrained_path: ckpt, its
    config.json hostile too), then `recipe doctor --output-dir .` (the run folder, where a
    relative dataset.root is read from), `recipe estimate` (the memory at the dataset's image size)
    or `recipe run --dry-run`.

    In-process without a process: the recipe sets trainer.env to a folder that does not exist, so
    the doctor's trainer check finds no interpreter to ask (a finding, no process started); and
    the host's GPUs come from a stand-in (`_host`, eight H100s) in the call's thread, where
    nvidia-smi would be a process."""
    doc: dict = {"extends": [draw(pick(DATASET_CELLS))], "dataset": {"root": draw(pick(DATASET_ROOTS))}}
    doc["trainer"] = {"env": "venvs/none"}
    files = {"data/meta/info.json": draw(info_bytes())}
    if draw(st.integers(0, 2)) == 0:
        doc["policy"] = {"pretrained_path": "ckpt"}
        files["ckpt/config.json"] = draw(config_bytes())
    files["r.yaml"] = yaml.safe_dump(doc, sort_keys=False).encode()
    sets = [draw(_dataset_override())] if draw(st.integers(0, 3)) == 0 else []
    # the doctor reads every field; estimate only the image size; run --dry-run nothing. The doctor
    # reads a relative dataset.root from the folder the trainer runs in: --output-dir . is the case's
    here = ["--output-dir", "."]
    verbs = (
        *[["doctor", "r.yaml", *here]] * 4, ["doctor", "r.yaml", "--format", "json", *here],
        ["doctor", "r.yaml"], ["estimate", "r.yaml"], ["estimate", "r.yaml", "--format", "json"],
        ["run", "r.yaml", "--dry-run"],
    )  # fmt: skip
    calls = [[*draw(pick(verbs)), *sets] for _ in range(draw(st.integers(1, 2)))]
    return Case(files, calls)


STRATEGIES = {
    "files": file_cases(),
    "overrides": override_cases(),
    "names": name_cases(),
    "imports": import_cases(),
    "datasets": dataset_cases(),
}
