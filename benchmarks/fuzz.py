"""Fuzz the `recipe` command line in-process with tests/fuzz.py's strategies, at length.

    .venv/bin/python benchmarks/fuzz.py                      # 100,000 cases, 1 process, at most 60 minutes
    .venv/bin/python benchmarks/fuzz.py --cases 20000 --minutes 5 --workers 2 --seed 7
    .venv/bin/python benchmarks/fuzz.py --strategy imports --no-write

Each worker process plays cases from every strategy in turn (chunks of --chunk cases, each chunk
with a seed of its own derived from --seed), and reports what broke the property (see
tests/fuzz.py): tracebacks grouped by exception type and location, hangs (a call past 10 s;
a worker stuck past 30 s on one case, beyond what SIGALRM can interrupt, is killed and replaced),
forbidden side effects and unexpected exit codes, each with the first argv and files that showed it.
Prints a summary and writes benchmarks/results/fuzz.json (date, command, seed, counts, failures).
Run it alone on a quiet machine: each worker keeps a core busy.
"""

from __future__ import annotations

import argparse
import collections
import importlib.util
import json
import multiprocessing
import os
import platform
import queue
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results" / "fuzz.json"
sys.path.insert(0, str(ROOT))


def load_harness():
    """tests/fuzz.py, imported under a name of its own (this file is fuzz.py too)."""
    spec = importlib.util.spec_from_file_location("recipe_fuzz", ROOT / "tests" / "fuzz.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["recipe_fuzz"] = module
    spec.loader.exec_module(module)
    return module


def _example(case, outcome) -> dict:
    files = {}
    for name, content in case.files.items():
        text = content.decode("utf-8", "backslashreplace")
        files[name] = text if len(text) <= 4000 else text[:4000] + "...(cut)"
    return {
        "kind": outcome.kind,
        "exc_type": outcome.exc_type,
        "location": outcome.location,
        "message": outcome.message[:500],
        "argv": outcome.argv,
        "calls": case.calls,
        "files": files,
        "traceback": outcome.traceback[-3000:],
    }


def _player(harness, name, stop_at, current, counts, codes, examples):
    """The body hypothesis calls with each case: play it, count what it did, keep the first example
    of each failure."""

    def play(case):
        if time.time() >= stop_at:
            return
        current.write_text(json.dumps({"strategy": name, "calls": case.calls, "files": sorted(case.files)}))
        outcome = harness.run_case(case)
        counts[name] += 1
        if outcome.ok:
            codes[str(int(outcome.rc))] += 1
        else:
            codes[outcome.kind] += 1
            entry = examples.setdefault(outcome.key, {"count": 0, "strategy": name, **_example(case, outcome)})
            entry["count"] += 1

    return play


def worker(index: int, args, stop_at: float, results, state_dir: str) -> None:
    # its caches outside the checkout (tests/conftest.py does the same)
    os.environ.setdefault("HYPOTHESIS_STORAGE_DIRECTORY", os.path.join(tempfile.gettempdir(), "recipe-hypothesis"))
    from hypothesis import HealthCheck, Phase, given, seed, settings

    harness = load_harness()
    harness.seal()
    current = Path(state_dir, f"worker-{index}")
    names = args.strategy or list(harness.STRATEGIES)
    played = 0
    for chunk in range(10**9):
        if played >= args.cases or time.time() >= stop_at:
            break
        name = names[chunk % len(names)]
        counts: collections.Counter = collections.Counter()
        codes: collections.Counter = collections.Counter()
        examples: dict[str, dict] = {}
        budget = min(args.chunk, args.cases - played)

        play = _player(harness, name, stop_at, current, counts, codes, examples)
        test = given(harness.STRATEGIES[name])(play)
        test = settings(
            max_examples=budget,
            deadline=None,
            database=None,
            phases=[Phase.generate],
            suppress_health_check=list(HealthCheck),
        )(test)
        test = seed(args.seed * 1_000_003 + index * 10_007 + chunk)(test)
        test()
        played += sum(counts.values())
        results.put({"worker": index, "counts": dict(counts), "codes": dict(codes), "examples": examples})
    current.unlink(missing_ok=True)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cases", type=int, default=100_000)
    p.add_argument("--minutes", type=float, default=60.0, help="wall-time bound")
    p.add_argument("--workers", type=int, default=1)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--chunk", type=int, default=500, help="cases per hypothesis run")
    p.add_argument("--strategy", action="append", help="only these strategies (repeatable)")
    p.add_argument("--no-write", action="store_true", help="print the summary only")
    p.add_argument("--output", type=Path, default=RESULTS)
    args = p.parse_args()

    harness = load_harness()
    if args.strategy and set(args.strategy) - set(harness.STRATEGIES):
        p.error(f"--strategy: known are {', '.join(harness.STRATEGIES)}")
    start = time.time()
    stop_at = start + args.minutes * 60
    ctx = multiprocessing.get_context("fork")
    results = ctx.Queue()
    state_dir = tempfile.mkdtemp(prefix="recipe-fuzz-state-")
    share = args.cases // args.workers
    per_worker = [share + (1 if i < args.cases % args.workers else 0) for i in range(args.workers)]

    def start_worker(index: int, cases: int):
        sub = argparse.Namespace(**{**vars(args), "cases": cases})
        proc = ctx.Process(target=worker, args=(index, sub, stop_at, results, state_dir), daemon=True)
        proc.start()
        return proc

    procs = {i: (start_worker(i, n), n) for i, n in enumerate(per_worker)}
    counts: collections.Counter = collections.Counter()
    codes: collections.Counter = collections.Counter()
    failures: dict[str, dict] = {}
    done_by: collections.Counter = collections.Counter()
    stuck_s = 3 * harness.TIMEOUT_S
    next_index = args.workers

    def absorb(msg) -> None:
        counts.update(msg["counts"])
        codes.update(msg["codes"])
        done_by[msg["worker"]] += sum(msg["counts"].values())
        for key, example in msg["examples"].items():
            if key in failures:
                failures[key]["count"] += example["count"]
            else:
                failures[key] = example

    last_print = time.time()
    while procs:
        try:
            absorb(results.get(timeout=1.0))
        except queue.Empty:
            pass
        for index, (proc, cases) in list(procs.items()):
            state = Path(state_dir, f"worker-{index}")
            if not proc.is_alive():
                proc.join()
                del procs[index]
                continue
            if state.exists() and time.time() - state.stat().st_mtime > stuck_s:
                proc.kill()
                proc.join()
                case = json.loads(state.read_text() or "{}")
                key = f"hang (killed after {stuck_s:g} s)"
                failures.setdefault(key, {"count": 0, "kind": "hang", **case, "argv": case.get("calls", [[]])[-1]})
                failures[key]["count"] += 1
                codes["hang"] += 1
                counts[case.get("strategy", "?")] += 1
                del procs[index]
                left = cases - done_by[index]
                if left > 0 and time.time() < stop_at:
                    procs[next_index] = (start_worker(next_index, left), left)
                    next_index += 1
        if time.time() - last_print > 30:
            played = sum(counts.values())
            print(f"... {played} cases, {time.time() - start:.0f} s, {len(failures)} distinct failures", flush=True)
            last_print = time.time()
    while True:  # what the last workers sent before they ended
        try:
            absorb(results.get(timeout=0.5))
        except queue.Empty:
            break

    seconds = time.time() - start
    played = sum(counts.values())
    broken = {k: v for k, v in failures.items()}
    by_kind = collections.Counter()
    for f in broken.values():
        by_kind[f["kind"]] += f["count"]
    print(f"cases: {played} in {seconds:.0f} s ({played / max(seconds, 1e-9):.1f} cases/s), {args.workers} worker(s)")
    print("by strategy: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    print("exit codes: " + ", ".join(f"{k}: {v}" for k, v in sorted(codes.items()) if k.isdigit()))
    print(
        f"tracebacks: {by_kind['traceback']}, hangs: {by_kind['hang']}, forbidden: {by_kind['forbidden']}, "
        f"bad exit codes: {by_kind['exit-code']}"
    )
    for key, f in sorted(broken.items(), key=lambda kv: -kv[1]["count"]):
        print(f"  {f['count']:6d}  {key}")
        print(f"          {f.get('message', '')[:160]!r}")
        print(f"          recipe {' '.join(map(repr, f.get('argv') or []))}")
    if not args.no_write:
        report = {
            "benchmark": "fuzz",
            "date": time.strftime("%Y-%m-%d"),
            "command": " ".join(["python", "benchmarks/fuzz.py", *sys.argv[1:]]),
            "seed": args.seed,
            "cases_requested": args.cases,
            "minutes": args.minutes,
            "workers": args.workers,
            "cases": played,
            "seconds": round(seconds, 1),
            "cases_per_s": round(played / max(seconds, 1e-9), 1),
            "by_strategy": dict(sorted(counts.items())),
            "exit_codes": {k: v for k, v in sorted(codes.items()) if k.isdigit()},
            "tracebacks": by_kind["traceback"],
            "hangs": by_kind["hang"],
            "forbidden": by_kind["forbidden"],
            "bad_exit_codes": by_kind["exit-code"],
            "failures": [
                {"key": key, **f} for key, f in sorted(broken.items(), key=lambda kv: (-kv[1]["count"], kv[0]))
            ],
            "python": platform.python_version(),
            "machine": f"{platform.machine()}, {os.cpu_count()} cores",
        }
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        print(f"wrote {args.output}")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
