"""Many `recipe` processes at once on one shared place (issue 41): does anything get lost, shared or
half written?

    .venv/bin/python benchmarks/concurrency.py                 # 16 of each, writes the results
    .venv/bin/python benchmarks/concurrency.py -n 8 --only runs --no-write

Three scenarios, each N real CLI processes started together (a barrier releases them):
  publish-dir  `recipe publish tiny/ddp/cpu train.steps=K --replace --to team` into one directory
               source, each with its own K
  publish-git  the same into one git source (a bare repository on this disk), all through one
               user's working copy
  publish-git-4-users  the same shared out over four users, each with a working copy of its own:
               their pushes race, and a beaten push is published again under the next number
  runs         `recipe run tiny/ddp/cpu train.steps=1` from one folder: every run under one parent,
               runs/tiny_ddp_cpu/, each a real two-process training run of one step
Checked after each: every process exits 0 (or one line of refusal, never a traceback); the version
numbers are 1..N, each once; each published file's sha256 is its index entry's and it holds the
K its publisher gave; the index lists every one; no run folder is shared or lost, each run's
folder is complete; and nothing half written (a temporary file) is left anywhere.
Writes benchmarks/results/concurrency.json (date, command, counts, median and slowest durations).
tests/test_concurrency.py runs publish-dir and runs with 8 processes.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results" / "concurrency.json"
NAME = "tiny/ddp/cpu"
GIT_ENV = {"GIT_AUTHOR_NAME": "A", "GIT_AUTHOR_EMAIL": "a@example.com", "GIT_COMMITTER_NAME": "A"}
GIT_ENV["GIT_COMMITTER_EMAIL"] = "a@example.com"
TEMPORARY = re.compile(r"(\.tmp$|\.tmp\.|~$|\.partial$)")  # what an interrupted write_atomic leaves
# the publish locks (registry/sharing/versions.py, gitpublish.py) stay, empty, by design: a lock
# file removed while another publisher waits on it would let a third one in beside it


def sealed(home: Path, **extra: str) -> dict[str, str]:
    """The environment of a user of their own: no RECIPE_* settings, HOME and XDG folders under
    `home`, the checkout importable."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RECIPE_", "ACCELERATE_", "SLURM_"))}
    for name, sub in (("HOME", "home"), ("XDG_CONFIG_HOME", "config"), ("XDG_CACHE_HOME", "cache")):
        (home / sub).mkdir(parents=True, exist_ok=True)
        env[name] = str(home / sub)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    return {**env, **GIT_ENV, **extra}


def together(argvs: list[list[str]], env: dict | list[dict], cwd: Path, timeout: float = 600) -> list[dict]:
    """Each `recipe ARGV` in a process of its own (under `env`, or the i-th of a list of them), all
    released at once; exit code, output and seconds of each."""
    envs = env if isinstance(env, list) else [env] * len(argvs)
    barrier, results = threading.Barrier(len(argvs)), [None] * len(argvs)

    def one(i: int) -> None:
        barrier.wait()
        start = time.perf_counter()
        p = subprocess.run(
            [sys.executable, "-m", "registry", *argvs[i]], cwd=cwd, env=envs[i], capture_output=True, text=True,
            timeout=timeout,
        )  # fmt: skip
        results[i] = {"rc": p.returncode, "stdout": p.stdout, "stderr": p.stderr, "s": time.perf_counter() - start}

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(argvs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


def refused_cleanly(r: dict) -> bool:
    """A refusal as the CLI prints a RecipeError: non-zero, one line, no traceback."""
    return r["rc"] != 0 and "Traceback" not in r["stderr"] and len(r["stderr"].strip().splitlines()) == 1


def leftovers(folder: Path) -> list[str]:
    """Temporary files anywhere under `folder`, and lock files with something in them (git's own
    objects aside)."""
    found = []
    for p in folder.rglob("*"):
        if ".git" in p.parts or not p.is_file():
            continue
        if TEMPORARY.search(p.name) or (p.name.endswith(".lock") and p.stat().st_size):
            found.append(str(p.relative_to(folder)))
    return sorted(found)


def _git(*args, cwd: Path) -> str:
    return subprocess.run(
        ["git", *args], cwd=cwd, check=True, capture_output=True, text=True, env={**os.environ, **GIT_ENV}
    ).stdout.strip()


def check_index(root: Path, steps: dict[int, int], problems: list[str]) -> list[int]:
    """The source's index of NAME against what was published: numbers 1..N each once, each file's
    sha256 its entry's, each K once, no file the index does not list. The numbers found."""
    try:
        entries = yaml.safe_load((root / "index.yaml").read_text())["versions"][NAME]
    except (OSError, KeyError, TypeError, yaml.YAMLError) as e:
        problems.append(f"{root}/index.yaml: unreadable or without {NAME}: {e}")
        return []
    numbers = [e["version"] for e in entries]
    if sorted(numbers) != list(range(1, len(numbers) + 1)):
        problems.append(f"version numbers not 1..N each once: {numbers}")
    given = []
    for e in entries:
        path = root / e["file"]
        if e["file"] != f"published/{NAME}/{e['version']}.yaml" or not path.is_file():
            problems.append(f"version {e['version']}: file {e['file']} missing or misnamed")
            continue
        if hashlib.sha256(path.read_bytes()).hexdigest() != e["sha256"]:
            problems.append(f"version {e['version']}: {e['file']}'s sha256 is not its index entry's")
        data = yaml.safe_load(path.read_text()) or {}
        given.append((data.get("train") or {}).get("steps"))
        said = (data.get("recipe") or {}).get("version")
        if said != e["version"]:
            problems.append(f"{e['file']} says version {said}")
    if sorted(given, key=str) != sorted(steps.values(), key=str):
        problems.append(
            f"published train.steps {sorted(given, key=str)} are not the publishers' {sorted(steps.values())}"
        )
    files = sorted(str(p.relative_to(root)) for p in (root / "published").rglob("*") if p.is_file())
    listed = sorted(e["file"] for e in entries)
    if files != listed:
        problems.append(f"files the index does not list, or listed and absent: {sorted(set(files) ^ set(listed))}")
    return numbers


def _exits(results: list[dict], problems: list[str]) -> dict:
    ok = sum(r["rc"] == 0 for r in results)
    refused = [r for r in results if r["rc"] != 0]
    for r in refused:
        if not refused_cleanly(r):
            problems.append(f"exit {r['rc']} without a one-line refusal: {r['stderr'][-800:]!r}")
    return {"exit_0": ok, "refused": len(refused), "refusals": sorted({r["stderr"].strip()[:200] for r in refused})}


def _durations(results: list[dict]) -> dict:
    seconds = [r["s"] for r in results]
    return {"median_s": round(statistics.median(seconds), 2), "slowest_s": round(max(seconds), 2)}


def publish_dir(n: int, work: Path) -> dict:
    source = work / "team"
    source.mkdir(parents=True)
    env = sealed(work / "user", RECIPE_PATH=f"team={source}", RECIPE_CONFIG=str(work / "sources.yaml"))
    env["RECIPE_CACHE"] = str(work / "cache")
    steps = {i: 100 + i for i in range(n)}
    start = time.perf_counter()
    results = together(
        [["publish", NAME, f"train.steps={k}", "--replace", "--to", "team"] for k in steps.values()], env, work
    )
    wall = time.perf_counter() - start
    problems: list[str] = []
    out = {"processes": n, **_exits(results, problems), "wall_s": round(wall, 2), **_durations(results)}
    if out["exit_0"] != n:
        problems.append(f"{n - out['exit_0']} of {n} publishers did not publish")
    numbers = check_index(source, steps, problems)
    out["versions"] = len(numbers)
    problems += [f"left behind: {p}" for p in leftovers(source)]
    check = subprocess.run(
        [sys.executable, "-m", "registry", "validate", "--all", "-q"], env=env, cwd=work, capture_output=True, text=True
    )
    if check.returncode != 0:
        problems.append(f"recipe validate --all after the publishes: {check.stderr[-400:]}")
    return {**out, "problems": problems}


def seeded_remote(work: Path) -> Path:
    """A bare repository with one commit: a recipes/ folder, nothing published."""
    bare, seed = work / "team.git", work / "seed"
    _git("init", "-q", "--bare", "-b", "main", str(bare), cwd=work)
    _git("clone", "-q", str(bare), str(seed), cwd=work)
    (seed / "recipes").mkdir()
    (seed / "recipes" / "README.md").write_text("the team's recipes\n")
    _git("add", ".", cwd=seed)
    _git("commit", "-qm", "start", cwd=seed)
    _git("push", "-q", "origin", "HEAD", cwd=seed)
    return bare


def publish_git(n: int, work: Path, users: int = 1) -> dict:
    """N publishers into one git source, shared out over `users` (each a config and cache of its
    own, so a working copy of its own: their pushes race, and a beaten one is published again)."""
    work.mkdir(parents=True)
    bare = seeded_remote(work)
    envs = []
    for u in range(users):
        env = sealed(work / f"user{u}", RECIPE_CONFIG=str(work / f"sources{u}.yaml"))
        env["RECIPE_CACHE"] = str(work / f"cache{u}")
        add = subprocess.run(
            [sys.executable, "-m", "registry", "source", "add", "team", f"file://{bare}"],
            env=env, cwd=work, capture_output=True, text=True,
        )  # fmt: skip
        if add.returncode != 0:
            return {"processes": n, "problems": [f"recipe source add: {add.stderr}"]}
        envs.append(env)
    steps = {i: 100 + i for i in range(n)}
    start = time.perf_counter()
    results = together(
        [["publish", NAME, f"train.steps={k}", "--replace", "--to", "team"] for k in steps.values()],
        [envs[i % users] for i in range(n)],
        work,
    )
    wall = time.perf_counter() - start
    problems: list[str] = []
    out = {"processes": n, "users": users, **_exits(results, problems), "wall_s": round(wall, 2)}
    out.update(_durations(results))
    out["pushes_beaten"] = sum(r["stderr"].count("another publisher pushed first") for r in results)
    published = {i: k for i, k in steps.items() if results[i]["rc"] == 0}
    update = subprocess.run(
        [sys.executable, "-m", "registry", "source", "update"], env=env, cwd=work, capture_output=True, text=True
    )
    if update.returncode != 0:
        problems.append(f"recipe source update: {update.stderr[-400:]}")
    clone = Path(env["RECIPE_CACHE"], "team", "recipes")
    numbers = check_index(clone, published, problems)
    out["versions"] = len(numbers)
    commits = _git("log", "--format=%s", "main", cwd=bare).splitlines()[:-1]
    if sorted(commits) != sorted(f"publish {NAME}@{v}" for v in numbers):
        problems.append(f"the remote's commits are not one per version: {commits}")
    if _git("rev-list", "--count", "--min-parents=2", "main", cwd=bare) != "0":
        problems.append("merge commits on the remote")
    for env in envs:
        copy = Path(env["RECIPE_CACHE"], ".publish", "team")
        if copy.is_dir() and _git("status", "--porcelain", "--untracked-files=all", cwd=copy):
            problems.append(f"the working copy {copy} is not clean: {_git('status', '--porcelain', cwd=copy)}")
        problems += [f"left behind: {p}" for p in leftovers(Path(env["RECIPE_CACHE"]))]
    return {**out, "problems": problems}


RUN_FILES = ("recipe.lock.yaml", "launch.sh", "launch.log", "metrics.jsonl", "checkpoints/last")
_IN = re.compile(r"^recipe: " + re.escape(NAME) + r" in (\S+)$", re.M)


def runs(n: int, work: Path) -> dict:
    work.mkdir(parents=True)
    env = sealed(work / "user", RECIPE_CONFIG=str(work / "sources.yaml"), RECIPE_CACHE=str(work / "cache"))
    start = time.perf_counter()
    results = together([["run", NAME, "train.steps=1"] for _ in range(n)], env, work)
    wall = time.perf_counter() - start
    problems: list[str] = []
    out = {"processes": n, **_exits(results, problems), "wall_s": round(wall, 2), **_durations(results)}
    if out["exit_0"] != n:
        problems.append(f"{n - out['exit_0']} of {n} runs failed")
    said = [m.group(1) for r in results for m in _IN.finditer(r["stderr"])]
    if len(said) != n or len(set(said)) != n:
        problems.append(f"run folders said: {len(said)}, distinct: {len(set(said))} (of {n})")
    parent = work / "runs" / NAME.replace("/", "_")
    found = sorted(str(p.relative_to(work)) for p in parent.iterdir()) if parent.is_dir() else []
    if sorted(said) != found:
        problems.append(f"run folders said and found differ: {sorted(set(said) ^ set(found))}")
    for folder in found:
        missing = [f for f in RUN_FILES if not (work / folder / f).exists()]
        if missing:
            problems.append(f"{folder}: without {', '.join(missing)}")
            continue
        lines = (work / folder / "metrics.jsonl").read_text().splitlines()
        if not any(json.loads(line).get("step") == 1 for line in lines if line.strip()):
            problems.append(f"{folder}: metrics.jsonl has no step 1")
    out["run_folders"] = len(found)
    problems += [f"left behind: {p}" for p in leftovers(work / "runs")]
    return {**out, "problems": problems}


SCENARIOS = {
    "publish-dir": publish_dir,
    "publish-git": publish_git,
    "publish-git-4-users": lambda n, work: publish_git(n, work, users=4),
    "runs": runs,
}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("-n", "--processes", type=int, default=16)
    p.add_argument("--only", action="append", choices=sorted(SCENARIOS), help="only these scenarios (repeatable)")
    p.add_argument("--no-write", action="store_true")
    p.add_argument("--output", type=Path, default=RESULTS)
    args = p.parse_args()
    report = {
        "benchmark": "concurrency",
        "date": time.strftime("%Y-%m-%d"),
        "command": " ".join(["python", "benchmarks/concurrency.py", *sys.argv[1:]]),
        "scenarios": {},
        "python": platform.python_version(),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores",
    }
    failed = False
    with tempfile.TemporaryDirectory(prefix="recipe-concurrency-") as tmp:
        for name in args.only or list(SCENARIOS):
            result = SCENARIOS[name](args.processes, Path(tmp, name))
            report["scenarios"][name] = result
            failed |= bool(result["problems"])
            shown = {k: v for k, v in result.items() if k not in ("problems", "refusals")}
            print(f"{name}: {json.dumps(shown)}")
            for line in result["problems"]:
                print(f"  problem: {line}")
            for line in result.get("refusals") or ():
                print(f"  refused: {line}")
    if not args.no_write:
        args.output.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
        print(f"wrote {args.output}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
