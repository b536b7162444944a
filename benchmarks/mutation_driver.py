"""mutmut's `run`, in steps that benchmarks/mutation.py can spread over machines (docs/mutation.md).

Run from the scratch copy (mutmut reads its settings from the copy's pyproject.toml):
    python mutation_driver.py generate                 the mutants, and nothing else
    python mutation_driver.py stats                    the mutants, then the map of tests to functions
    python mutation_driver.py run --jobs N [NAME ...]  mutmut's own run of the named mutants (all if
                                                       none), its clean run spread over N pytest workers

Why: mutmut maps tests to functions and checks that they pass unmutated in one pytest process each.
Over the whole suite that is ten minutes or more, longer than one call on the GPU host may last. The
map is made once (`stats`, on any machine) and reused; the clean run, which only has to pass, is
spread over pytest-xdist's workers. The mutants themselves are tested by mutmut's code, unchanged.
Written against mutmut 3.8.1 (the version pyproject.toml's `mutation` extra pins)."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import mutmut.__main__ as mutmut_main
from mutmut.configuration import config


def generate(jobs: int) -> None:
    """mutmut's first step of `run`: the copy of the source with every function's mutants."""
    mutmut_main.set_mutant_under_test("mutant_generation")
    Path("mutants").mkdir(exist_ok=True)
    mutmut_main.copy_src_dir()
    mutmut_main.copy_also_copy_files()
    mutmut_main.setup_source_paths()
    mutmut_main.store_lines_covered_by_tests()
    mutmut_main.create_mutants(jobs)


def spread_clean_run(jobs: int):
    """run_clean_tests in pytest-xdist's workers: the same tests, unmutated, in the mutants' folder."""

    def run_clean_tests(tests) -> int:
        cfg = config()
        selection = list(tests) or list(cfg.pytest_add_cli_args_test_selection)
        command = [sys.executable, "-m", "pytest", "--rootdir=.", "-x", "-q", "-p", "no:randomly"]
        command += ["-n", str(jobs), *cfg.pytest_add_cli_args, *selection]
        env = {**os.environ, "MUTANT_UNDER_TEST": "", "PY_IGNORE_IMPORTMISMATCH": "1"}
        return subprocess.run(command, cwd="mutants", env=env).returncode

    return run_clean_tests


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("step", choices=("generate", "stats", "run"))
    ap.add_argument("names", nargs="*", help="run: the mutants to test (default: every one not yet tested)")
    ap.add_argument("--jobs", type=int, default=2, help="mutants, and clean-run workers, side by side")
    args = ap.parse_intermixed_args()
    if args.step == "run":
        real = mutmut_main.get_mutant_runner

        def runner(max_children: int = 1):
            made = real(max_children)
            made.run_clean_tests = spread_clean_run(args.jobs)
            return made

        mutmut_main.get_mutant_runner = runner
        mutmut_main._run(args.names, args.jobs)
        return 0
    generate(args.jobs)
    if args.step == "stats":
        mutmut_main.collect_or_load_stats(mutmut_main.get_mutant_runner(args.jobs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
