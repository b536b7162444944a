"""Mutation score of one module of registry/: mutmut mutates it in a scratch copy of the checkout and
runs the test files mapped to it (TESTS) against each mutant. A benchmark, not a CI step.

Usage (docs/mutation.md):
    pip install -e '.[mutation]'
    nice -n 19 python benchmarks/mutation.py registry/validate
    nice -n 19 python benchmarks/mutation.py registry/compose/patterns.py --tests tests/test_compose.py

Writes benchmarks/results/mutation/<module>.json (counts, score, each survivor's diff) and prints
score, killed, survived and timeouts. Mutants named in benchmarks/results/mutation/equivalent.md
(equivalent to the original: no test can tell them apart) are left out of the score."""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import mutation_sampling as sampling

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results" / "mutation"
EQUIVALENT = RESULTS / "equivalent.md"
DRIVER = ROOT / "benchmarks" / "mutation_driver.py"  # mutmut's run in steps
PLUGIN = "benchmarks.mutation_session"  # fresh caches for every mutant's session

# module (a package folder or one file under registry/) -> the test files that exercise it
TESTS: dict[str, list[str]] = {
    "registry/validate": [
        "tests/test_checker.py",  # checker.py: the schema checker against jsonschema itself
        "tests/test_invariants.py",
        "tests/test_bug_corpus.py",
        "tests/test_team_rules.py",
        "tests/test_schemas.py",
        "tests/test_values.py",
        "tests/test_verdicts.py",
        "tests/test_validate_memo.py",
        "tests/test_errors.py",
        "tests/test_rule_twins.py",
        "tests/test_problem_hints.py",
        "tests/test_fixes.py",
        "tests/test_slurm.py",  # engines.py: the slurm, SkyPilot and Kubernetes files read back
        "tests/test_messages.py",
        "tests/test_estimate.py",  # checks.py's memory-fit
        "tests/test_sharing.py",  # report.py: `recipe validate --all` over published versions
        "tests/test_validate_pieces.py",
    ],
    "registry/resolve": [
        "tests/test_import_conflicts.py",
        "tests/test_import_reading.py",
        "tests/test_resolve.py",
        "tests/test_fields.py",
        "tests/test_kubernetes.py",
        "tests/test_skypilot.py",
        "tests/test_roundtrip.py",
        "tests/test_resolved_values.py",
        "tests/test_resolve_pieces.py",
        "tests/test_slurm.py",  # launch.py's sbatch file
    ],
    "registry/trainers": [
        "tests/test_trainer_adapters.py",
        "tests/test_trainer_files.py",
        "tests/test_resolved_values.py",
        "tests/test_fields.py",
        "tests/test_import_faults.py",
        "tests/test_roundtrip.py",  # import of every OpenTau and LeRobot cell's own files, in-process
        "tests/test_corpus.py",  # import of the teams' real configs
    ],
    "registry/sharing": [
        "tests/test_sharing.py",
        "tests/test_sharing_faults.py",
        "tests/test_git_publish.py",
        "tests/test_guards.py",
        "tests/test_hostile.py",
        "tests/test_finding.py",  # listing.py, copying.py: recipe list, search, cp
        "tests/test_catalog.py",  # site/: the catalog's pages
        "tests/test_site_snapshots.py",  # site/pages.py, site/svg.py: every page byte for byte
        "tests/test_site_collect.py",  # site/collect.py in-process
        "tests/test_sharing_pieces.py",
        "tests/test_source_pieces.py",  # manage.py, config.py in-process
        "tests/test_copy_pieces.py",  # copying.py in-process
        "tests/test_git_pieces.py",  # git.py on real repositories in-process
        "tests/test_version_pieces.py",  # versions.py in-process
        "tests/test_listing_pieces.py",  # listing.py in-process
    ],
    "registry/compose": [
        "tests/test_overrides.py",
        "tests/test_compose.py",
        "tests/test_compose_plan.py",
        "tests/test_catalog.py",
        "tests/test_hardware_names.py",
        "tests/test_load.py",
    ],
    # registry/ as a whole: the rest (run, train, commands and the modules at the top) with these,
    # the packages above joined from their own runs (--with)
    "registry": [
        "tests/test_run.py",
        "tests/test_envlock.py",
        "tests/test_train.py",
        "tests/test_tune.py",
        "tests/test_bench.py",
        "tests/test_preflight.py",
        "tests/test_preflight_host.py",
        "tests/test_guards.py",
        "tests/test_interval.py",
        "tests/test_estimate.py",
        "tests/test_policy_sizes.py",
        "tests/test_lerobot_memory.py",
        "tests/test_slurm.py",
        "tests/test_node_lists.py",
        "tests/test_cli.py",
        "tests/test_completion.py",
        "tests/test_messages.py",
        "tests/test_json.py",
        "tests/test_errors.py",
        "tests/test_load.py",
        "tests/test_names.py",
        "tests/test_layout.py",
        "tests/test_run_pieces.py",
        "tests/test_command_outputs.py",
        "tests/test_command_pieces.py",
        "tests/test_hardware_names.py",  # run/tune's targets
    ],
    "registry/run": ["tests/test_run.py", "tests/test_guards.py", "tests/test_interval.py", "tests/test_bench.py"],
    "registry/estimate.py": ["tests/test_estimate.py"],
    "registry/validate/checker.py": ["tests/test_checker.py", "tests/test_team_rules.py", "tests/test_verdicts.py"],
    "registry/validate/standard.py": ["tests/test_checker.py", "tests/test_team_rules.py", "tests/test_verdicts.py"],
}
# The scratch copy holds these beside the mutated package: the data the code reads and the tests.
ALSO_COPY = ["schemas", "recipes", "docs", "benchmarks", "README.md", ".pre-commit-hooks.yaml"]
KILLED_CODES = {1, 2, 3, 4}  # pytest: failed, collection error (counted as a kill), internal error, usage
NAMES = {
    0: "survived",
    5: "no_tests",
    33: "no_tests",
    34: "skipped",
    36: "timeout",
    37: "type_check",
    None: "unchecked",
}


def tests_for(module: str) -> list[str]:
    """The mapped tests of MODULE, or of the nearest package above it."""
    path = module.rstrip("/")
    while path:
        if path in TESTS:
            return TESTS[path]
        path = path.rpartition("/")[0]
    raise SystemExit(f"mutation: no tests mapped to {module}: pass --tests or add it to TESTS in {__file__}")


def scratch_copy(work: Path) -> None:
    """The checkout's tracked and new files (not ignored ones, not .git) under WORK."""
    try:
        listed = subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=ROOT,
            capture_output=True,
            check=True,
        ).stdout.split(b"\0")
    except (OSError, subprocess.CalledProcessError):  # a copy without git: what the package and tests need
        listed = [
            str(p.relative_to(ROOT)).encode()
            for d in ("registry", "schemas", "recipes", "docs", "tests", "benchmarks")
            for p in (ROOT / d).rglob("*")
            if "__pycache__" not in p.parts
        ]
        listed += [b"pyproject.toml", b"README.md", b".pre-commit-hooks.yaml"]
    for name in filter(None, (n.decode() for n in listed)):
        source = ROOT / name
        # the mutation results are what the run writes, not what it reads (tests read the others)
        if source.is_file() and not name.startswith("benchmarks/results/mutation/"):
            target = work / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)


def configure(work: Path, module: str, tests: list[str], pytest_args: list[str]) -> None:
    """mutmut reads its settings from the copy's pyproject.toml (TOML strings and lists are JSON's)."""
    pattern = module if module.endswith(".py") else module.rstrip("/") + "/*"
    settings = {
        "source_paths": ["registry"],
        "only_mutate": [pattern],
        "also_copy": ALSO_COPY,
        "pytest_add_cli_args": [
            "-p",
            PLUGIN,
            "-p",
            "no:cacheprovider",
            "-q",
            "-m",
            "not gpu and not upstream",
            *pytest_args,
        ],
        "pytest_add_cli_args_test_selection": tests,
        "use_git_change_detection": False,
    }
    lines = ["", "[tool.mutmut]"] + [f"{key} = {json.dumps(value)}" for key, value in settings.items()]
    with open(work / "pyproject.toml", "a", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")


def equivalent_names() -> set[str]:
    """Mutant names listed in equivalent.md as `- `name`: reason`."""
    if not EQUIVALENT.exists():
        return set()
    return set(re.findall(r"^- `([^`]+)`", EQUIVALENT.read_text(encoding="utf-8"), flags=re.M))


def outcomes(work: Path) -> dict[str, str]:
    """mutant name -> killed / survived / timeout / no_tests / ..., from mutmut's .meta files."""
    found = {}
    for meta in sorted((work / "mutants").rglob("*.py.meta")):
        for name, code in json.loads(meta.read_text())["exit_code_by_key"].items():
            found[name] = (
                "killed" if code in KILLED_CODES or (code is not None and code < 0) else NAMES.get(code, "suspicious")
            )
    return found


def diffs(work: Path, names: list[str], env: dict) -> dict[str, str]:
    """Each named mutant's diff against the original, by mutmut's own renderer, in one interpreter."""
    if not names:
        return {}
    code = (
        "import json, sys\n"
        "from mutmut.__main__ import find_mutant, get_diff_for_mutant\n"
        "names = json.loads(sys.stdin.read())\n"
        "print(json.dumps({n: get_diff_for_mutant(n, path=find_mutant(n).path) for n in names}))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=work, env=env, input=json.dumps(names), capture_output=True, text=True
    )
    return json.loads(done.stdout) if done.returncode == 0 else {n: "(diff unavailable)" for n in names}


def _tested(verdict: str | None) -> str | None:
    return None if verdict in (None, "unchecked") else verdict


def _again(verdict: str | None, before: str | None) -> str:
    """A mutant's verdict after it was tested again: the new one, unless the tests did not reach it
    (or were not run) and it had one before."""
    now = _tested(verdict)
    if now is None or (now == "no_tests" and before):
        return before or "unchecked"
    return now


def run_logged(command: list[str], work: Path, env: dict, log: Path, limit: float | None) -> int | None:
    """COMMAND in WORK, its output appended to LOG; interrupted (SIGINT, as a user would) after LIMIT s."""
    with open(log, "ab") as sink:  # mutmut's spinner rewrites one line thousands of times: kept out of the terminal
        process = subprocess.Popen(
            command, cwd=work, env=env, stdout=sink, stderr=subprocess.STDOUT, start_new_session=True
        )
        try:
            return process.wait(timeout=limit)
        except subprocess.TimeoutExpired:  # partial: mutmut records each verdict as it comes
            os.killpg(process.pid, signal.SIGINT)
            try:
                return process.wait(timeout=60)
            except subprocess.TimeoutExpired:  # its workers still in a test's subprocess: the rest waits
                os.killpg(process.pid, signal.SIGKILL)
                return process.wait()


def failed(log: Path, returncode: int | None, work: Path) -> int:
    """mutmut's last words, and where its scratch copy is kept."""
    lines = [line for line in log.read_text(errors="replace").replace("\r", "\n").splitlines() if "⠋" not in line]
    print("\n".join(lines[-40:]), file=sys.stderr)
    print(f"mutation: mutmut failed (exit {returncode}); scratch copy kept at {work}", file=sys.stderr)
    return 1


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("module", help="registry/PACKAGE or registry/PACKAGE/FILE.py")
    ap.add_argument("--tests", nargs="+", help="test files to run (default: the module's row of TESTS)")
    ap.add_argument("--jobs", type=int, default=2, help="mutants tested side by side (default 2)")
    ap.add_argument("--work", type=Path, help="scratch folder (default: a new one under the temp folder)")
    ap.add_argument("--out", type=Path, help="results file (default benchmarks/results/mutation/<module>.json)")
    ap.add_argument("--keep", action="store_true", help="keep the scratch folder (for `mutmut show`/`browse`)")
    ap.add_argument("--pytest-args", default="", help='more pytest arguments, one string (e.g. "--deselect NODE")')
    ap.add_argument(
        "--time-limit", type=float, help="stop after this many seconds and record the mutants tested so far"
    )
    ap.add_argument("--sample", type=int, help="test N mutants drawn at random from each stratum (--strata)")
    ap.add_argument("--strata", nargs="+", default=[], help="--sample: packages drawn from apart (the rest is one)")
    ap.add_argument("--seed", type=int, default=0, help="--sample: the draw's seed (default 0)")
    ap.add_argument(
        "--resume", type=Path, help="--sample: an earlier run's results: its mutants again, its verdicts stand"
    )
    ap.add_argument(
        "--recheck", action="store_true", help="--resume: test that run's survivors again (after new tests)"
    )
    ap.add_argument(
        "--with",
        dest="joined",
        nargs="+",
        type=Path,
        default=[],
        help="--sample: sampled runs of packages of MODULE (their results files): their draws and verdicts"
        " stand for those packages, which are not drawn again; the score is MODULE's whole",
    )
    ap.add_argument("--stats", type=Path, help="mutmut's map of tests to functions, made earlier by --stats-out")
    ap.add_argument(
        "--stats-out",
        type=Path,
        help="make the map of tests to functions and write it here (then stop, unless --sample)",
    )
    ap.add_argument(
        "--estimate-only",
        action="store_true",
        help="--sample: test nothing; the score of the verdicts given (--resume, --with), those untested left out",
    )
    ap.add_argument(
        "--no-clean",
        action="store_true",
        help="--stats: no clean run first (that map was made from this code, and its pass was one)",
    )
    args = ap.parse_args()
    if not args.sample and (args.resume or args.strata or args.joined):
        ap.error("--resume, --strata and --with go with --sample")
    joined = {}  # package -> the results file of its own run
    for path in args.joined:
        try:
            joined[json.loads(path.read_text(encoding="utf-8"))["module"]] = path
        except (OSError, ValueError, KeyError) as e:
            ap.error(f"--with {path}: not a results file of benchmarks/mutation.py ({e})")
    args.strata = list(dict.fromkeys([*args.strata, *joined]))
    if args.recheck and not args.resume:
        ap.error("--recheck goes with --resume (the run whose survivors to test again)")

    module = args.module.rstrip("/")
    if not (ROOT / module).exists() or not module.startswith("registry"):
        raise SystemExit(f"mutation: {module}: no such module under registry/")
    # a mapped test file that does not exist (yet) is left out; one named with --tests must exist
    tests = args.tests or [t for t in tests_for(module) if (ROOT / t).is_file()]
    missing = [t for t in tests if not (ROOT / t).exists()]
    if missing:
        raise SystemExit(f"mutation: no such test file: {', '.join(missing)}")
    try:
        import mutmut
    except ImportError:
        raise SystemExit("mutation: mutmut is not installed (pip install -e '.[mutation]')") from None

    work = args.work or Path(tempfile.mkdtemp(prefix="recipe-mutation-"))
    work.mkdir(parents=True, exist_ok=True)
    scratch_copy(work)
    configure(work, module, tests, shlex.split(args.pytest_args))
    # Mutated modules import mutmut's trampoline, in the tests' own subprocesses too: those report
    # the functions they ran while mutmut maps tests to functions (mutation_site/sitecustomize.py,
    # collected by the session plugin), and run the mutant under test like the test process.
    hits = work / ".mutation-hits"
    hits.mkdir(exist_ok=True)
    mutmut_home = str(Path(mutmut.__file__).resolve().parent.parent)
    paths = [str(ROOT / "benchmarks" / "mutation_site"), mutmut_home, os.environ.get("PYTHONPATH")]
    # (not RECIPE_*: tests/conftest.py clears those from the tests' environment)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, paths)), "MUTATION_HITS": str(hits)}
    started = time.monotonic()
    log = work / "mutmut.log"

    def driver(step: str, *names: str) -> int:
        """One step of mutmut's run (benchmarks/mutation_driver.py), within what is left of --time-limit."""
        left = None if args.time_limit is None else max(1.0, args.time_limit - (time.monotonic() - started))
        return run_logged([sys.executable, str(DRIVER), step, "--jobs", str(args.jobs), *names], work, env, log, left)

    if args.stats:
        (work / "mutants").mkdir(exist_ok=True)
        shutil.copy2(args.stats, work / "mutants" / "mutmut-stats.json")
    made_here = False  # the map was made in this run: its pass over every test was the clean run
    left_out: list[str] = []  # tests that failed unmutated in the copy, left out of the map
    if args.stats_out:
        returncode = driver("stats")
        made = work / "mutants" / "mutmut-stats.json"
        if returncode != 0 or not made.exists():
            return failed(log, returncode, work)
        args.stats_out.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(made, args.stats_out)
        failing = work / "mutants" / "failed-unmutated.txt"
        left_out = failing.read_text(encoding="utf-8").split() if failing.exists() else []
        print(f"mutation: map of tests to functions -> {args.stats_out} ({round(time.monotonic() - started)} s)")
        if not args.sample:
            return 0
        made_here = True
    listed = equivalent_names()  # equivalent.md, read once
    drawn, earlier, kept, todo = [], {}, {}, []  # kept: every verdict of the earlier run, a survivor's too
    if args.sample:
        if driver("generate") != 0:
            return failed(log, None, work)
        everything = sorted(outcomes(work))
        if args.resume:  # the same mutants as before (a name gone with its code is dropped), not a new draw
            drawn = [n for n in sampling.drawn_of(args.resume) if n in set(everything)]
            earlier = kept = sampling.verdicts_of(args.resume)
        else:
            drawn = sampling.draw(everything, args.strata, args.sample, args.seed, listed)
        if joined:  # those packages' own draws, tested with their own rows
            drawn, earlier = sampling.joined(drawn, everything, args.strata, joined, kept)
            kept = earlier
        if args.recheck:
            earlier = {n: v for n, v in earlier.items() if v in sampling.CAUGHT}
        # a joined package's mutant its own run left untested stays so: these tests are not its row
        todo = [
            n
            for n in drawn
            if n not in earlier and n not in listed and sampling.stratum_of(n, args.strata, "") not in joined
        ]
        if args.estimate_only:
            todo = []
        print(f"mutation: {len(drawn)} of {len(everything)} mutants drawn, {len(todo)} to test", flush=True)
        returncode = driver("run", *(["--no-clean"] if made_here or args.no_clean else []), *todo) if todo else 0
    else:
        returncode = driver("run")
    seconds = round(time.monotonic() - started, 1)
    found = outcomes(work)
    if args.sample and todo and not any(_tested(found.get(n)) for n in todo):  # mutmut stopped before any
        return failed(log, returncode, work)
    if drawn:  # the draw alone, with the verdicts an earlier run of it found
        everything = list(found)
        # a survivor to test again that the time limit left untested keeps its earlier verdict
        # and one that the tests given now do not reach (a recheck with --tests) keeps it too
        found = {n: earlier.get(n) or _again(found.get(n), kept.get(n)) for n in drawn}
    if not any(s != "unchecked" for s in found.values()):
        return failed(log, returncode, work)

    equivalent = listed & set(found)
    counted = {n: s for n, s in found.items() if n not in equivalent and s not in ("skipped", "unchecked")}
    count = {
        s: sum(1 for v in counted.values() if v == s)
        for s in ("killed", "timeout", "survived", "no_tests", "suspicious")
    }
    scored = sum(count.values())
    score = round(100 * (count["killed"] + count["timeout"]) / scored, 1) if scored else None
    survivors = sorted(n for n, s in counted.items() if s in ("survived", "no_tests", "suspicious"))
    result = {
        "benchmark": "mutation",
        "module": module,
        "tests": tests,
        "command": " ".join(["nice -n 19 python benchmarks/mutation.py", *map(shlex.quote, sys.argv[1:])]),
        "mutmut": getattr(mutmut, "__version__", "3"),
        "date": time.strftime("%Y-%m-%d"),
        "seconds": seconds,
        "mutants": len(found),
        "unchecked": sum(1 for v in found.values() if v == "unchecked"),  # left when --time-limit stopped it
        "equivalent": len(equivalent),
        **count,
        "score": score,
        "survivors": diffs(work, survivors, env),
    }
    if left_out:
        result["tests_left_out"] = left_out
    if drawn:  # what the draw estimates: each stratum's score and registry/'s, with their spread
        result["sample"] = sampling.estimate(everything, found, args.strata, listed, module)
        result["verdicts"] = found
        result["score"] = score = result["sample"][module]["score"]  # the strata weighted, not the draw's mean
    out = args.out or RESULTS / (module.replace("/", ".").removesuffix(".py") + ".json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    for stratum, figures in result.get("sample", {}).items():
        said = "no score" if figures["score"] is None else f"{figures['score']}%"  # nothing of it tested
        print(f"  {stratum}: {said} ({figures['low']} to {figures['high']}) of {figures['tested']}")
    print(
        f"{module}: score {score}% | killed {count['killed']} | survived {count['survived']} | "
        f"timeouts {count['timeout']} | no tests {count['no_tests']} | equivalent {len(equivalent)} | "
        f"{len(found)} mutants, {seconds} s -> {out.relative_to(ROOT) if out.is_relative_to(ROOT) else out}"
    )
    if args.keep:
        print(f"scratch copy: {work} (cd there; python -m mutmut show NAME)")
    else:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
