"""mutmut's `run`, in steps that benchmarks/mutation.py can spread over machines (docs/mutation.md).

Run from the scratch copy (mutmut reads its settings from the copy's pyproject.toml):
    python mutation_driver.py generate                 the mutants, and nothing else
    python mutation_driver.py stats --jobs N           the mutants, then the map of tests to functions,
                                                       made by N pytest workers
    python mutation_driver.py run --jobs N [NAME ...]  mutmut's own run of the named mutants (all if
                                                       none), its clean run spread over N pytest workers

Why: mutmut maps tests to functions and checks that they pass unmutated in one pytest process each.
Over the whole suite that is ten minutes or more, longer than one call on the GPU host may last.
Both are spread over pytest-xdist's workers here: each worker records what mutmut's own stats
collector would (mutation_session.py) and the parts are merged into mutmut's stats file, which
later runs reuse. The mutants themselves are tested by mutmut's code, unchanged.
Written against mutmut 3.8.1 (the version pyproject.toml's `mutation` extra pins)."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import mutmut.__main__ as mutmut_main
from mutmut.configuration import config
from mutmut.state import state
from mutmut.stats import save_stats

FAILED_UNMUTATED = "mutants/failed-unmutated.txt"  # written by `stats`


def generate(jobs: int) -> None:
    """mutmut's first step of `run`: the copy of the source with every function's mutants."""
    mutmut_main.set_mutant_under_test("mutant_generation")
    Path("mutants").mkdir(exist_ok=True)
    mutmut_main.copy_src_dir()
    mutmut_main.copy_also_copy_files()
    mutmut_main.setup_source_paths()
    mutmut_main.store_lines_covered_by_tests()
    mutmut_main.create_mutants(jobs)


def pytest_in_workers(jobs: int, tests, **env) -> int:
    """The selected tests (TESTS, or the configured ones) in the mutants' folder, over JOBS workers."""
    cfg = config()
    selection = list(tests) or list(cfg.pytest_add_cli_args_test_selection)
    command = [sys.executable, "-m", "pytest", "--rootdir=.", "-q", "-rfE", "-p", "no:randomly"]
    # the selection through a file of arguments (pytest's @FILE): a whole package's tests, one node
    # id each, pass the kernel's limit on a command line
    listed = Path("mutants", ".selection.txt")
    listed.write_text("".join(f"{test}\n" for test in selection), encoding="utf-8")
    command += ["-n", str(jobs), *cfg.pytest_add_cli_args, f"@{listed.name}"]
    return subprocess.run(command, cwd="mutants", env={**os.environ, "PY_IGNORE_IMPORTMISMATCH": "1", **env}).returncode


def spread_stats(jobs: int) -> int:
    """mutmut's map of tests to functions and of each test's duration, made by pytest's workers."""
    parts = Path("mutants", ".stats-parts").resolve()
    shutil.rmtree(parts, ignore_errors=True)
    parts.mkdir()
    started = time.process_time(), time.monotonic()
    code = pytest_in_workers(jobs, (), MUTANT_UNDER_TEST="stats", MUTATION_STATS_OUT=str(parts))
    made = [json.loads(part.read_text(encoding="utf-8")) for part in sorted(parts.glob("*.json"))]
    if code not in (0, 1) or not made:  # 1: some tests failed, which are left out below
        print(f"mutation_driver: pytest failed (exit {code}): the map is not made", file=sys.stderr)
        return code or 1
    # A test that fails unmutated cannot tell a mutant: it is left out of the map (mutmut then never
    # runs it against one) and named, in FAILED_UNMUTATED and by benchmarks/mutation.py's results.
    failed = sorted({test for part in made for test in part["failed"]})
    Path(FAILED_UNMUTATED).write_text("".join(f"{test}\n" for test in failed), encoding="utf-8")
    for part in made:
        for function, tests in part["tests_by_function"].items():
            state().tests_by_mangled_function_name[function] |= set(tests) - set(failed)
        state().duration_by_test.update(part["durations"])
    state().stats_time = time.monotonic() - started[1]
    mutmut_main._refresh_change_detection_baseline()
    save_stats()
    print(f"mutation_driver: {len(state().duration_by_test)} tests mapped in {state().stats_time:.0f} s")
    if failed:
        print(f"mutation_driver: {len(failed)} tests fail unmutated and are left out: {', '.join(failed)}")
    return 0


def spread_clean_run(jobs: int):
    """run_clean_tests in pytest-xdist's workers: the same tests, unmutated, in the mutants' folder."""

    def run_clean_tests(tests) -> int:
        return pytest_in_workers(jobs, tests, MUTANT_UNDER_TEST="")

    return run_clean_tests


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("step", choices=("generate", "stats", "run"))
    ap.add_argument("names", nargs="*", help="run: the mutants to test (default: every one not yet tested)")
    ap.add_argument("--jobs", type=int, default=2, help="mutants, and clean-run workers, side by side")
    ap.add_argument("--no-clean", action="store_true", help="run: no clean run (the map was just made, by every test)")
    args = ap.parse_intermixed_args()
    if args.step == "run":
        real = mutmut_main.get_mutant_runner

        def runner(max_children: int = 1):
            made = real(max_children)
            made.run_clean_tests = (lambda tests: 0) if args.no_clean else spread_clean_run(args.jobs)
            return made

        mutmut_main.get_mutant_runner = runner
        mutmut_main._run(args.names, args.jobs)
        return 0
    generate(args.jobs)
    return spread_stats(args.jobs) if args.step == "stats" else 0


if __name__ == "__main__":
    sys.exit(main())
