"""`recipe tune`: search backend x micro batch x gradient accumulation (and activation
checkpointing where memory asks for it) at a fixed global batch for the highest samples/s.

Candidates the rules reject, or that the estimator puts over LIMIT of the GPU's memory, are
pruned before anything runs. Survivors run under `recipe bench`'s measuring conditions, keeping
their accumulation, with successive halving: every survivor for a few steps, then the best
1/ETA for ETA times as many, until one is left. An out-of-memory run is recorded and pruned
(with every larger micro batch of its backend); no failure stops the search. Every figure is a
median with its interval (registry/run/interval.py); leaders within noise of the best are
launched again, and a tie left is said and broken by stated criteria (ties.py).

space.py: the target and its candidates, judged before anything runs; search.py: the search, pure
over Candidate and Point with a measuring function (the tests pass fakes); ties.py: rivals and
tie-breaking; measure.py: one real run; report.py: the table, results.json and tuned.yaml."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from registry.compose import compose
from registry.errors import RecipeError
from registry.files import write_atomic
from registry.run import interval
from registry.run.tune.measure import OOM_MARKERS, failure_kind, measure_with_bench, point_record
from registry.run.tune.report import RUN_ONLY, NoOverlay, overlay_pick, results_json, table_text, write_overlay
from registry.run.tune.search import (
    CLOSE,
    ETA,
    PRESSURE,
    Interrupted,
    Measure,
    Search,
    prune_after_oom,
    ranking,
    survivors,
    winner,
)
from registry.run.tune.space import (
    FAILED,
    LIMIT,
    MEASURED,
    NOT_RUN,
    OOM,
    PRUNED,
    Candidate,
    Checked,
    Point,
    Target,
    candidates,
    global_batch_of,
    judge,
    micro_batches,
    parse_target,
    space,
)
from registry.run.tune.ties import SIMPLICITY, Tie, break_tie, rivals
from registry.sharing import sources

TIE_RUNS = 4  # launches allowed after the last rung to separate the best from those within noise

__all__ = [
    "CLOSE",
    "ETA",
    "FAILED",
    "LIMIT",
    "MEASURED",
    "NOT_RUN",
    "OOM",
    "OOM_MARKERS",
    "PRESSURE",
    "PRUNED",
    "RUN_ONLY",
    "SIMPLICITY",
    "TIE_RUNS",
    "Candidate",
    "Checked",
    "Interrupted",
    "Measure",
    "Point",
    "Search",
    "Target",
    "Tie",
    "break_tie",
    "candidates",
    "failure_kind",
    "global_batch_of",
    "judge",
    "main",
    "measure_with_bench",
    "micro_batches",
    "overlay_pick",
    "parse_target",
    "point_record",
    "prune_after_oom",
    "ranking",
    "results_json",
    "rivals",
    "space",
    "survivors",
    "table_text",
    "winner",
    "write_overlay",
]


def main(
    target_text: str,
    sets: list[str],
    backends: list[str] | None,
    global_batch: int | None,
    budget_min: float | None,
    warmup: int,
    steps: int,
    output_dir: str | None,
    record_to: str | None,
    allow_mismatch: bool,
    command: str,
    tie_runs: int = TIE_RUNS,
) -> int:
    from registry.run import bench, plot

    target = parse_target(target_text)
    if record_to:  # opened now: a path it cannot append to is found before the first run
        try:
            open(record_to, "a", encoding="utf-8").close()
        except OSError as e:
            raise RecipeError(f"--record-to {record_to}: {e.strerror}") from None
    known = sources.part_names("backend")
    if backends is None:
        backends = known
    unknown = [b for b in backends if b not in known]
    if unknown:
        raise RecipeError(f"unknown backend {unknown[0]!r}; known: {', '.join(known)}")
    if global_batch is None:
        first = target.backend or backends[0]
        where, base = target.args(first, sets)
        global_batch = global_batch_of(compose(where, base).data)
        print(f"recipe tune: global batch {global_batch} (from {where})", file=sys.stderr)
    judged = space(target, backends, global_batch, sets)
    points = [j.point for j in judged]
    capacity = next((j.capacity_gib for j in judged if j.capacity_gib), None)
    if capacity is None:
        print("recipe tune: no GPU in the hardware part: no memory pruning", file=sys.stderr)
    runnable = sum(p.status == NOT_RUN for p in points)
    folder = _output(target, output_dir)
    print(
        f"recipe tune: {len(points)} candidates, {runnable} left after pruning, measuring in {folder}",
        file=sys.stderr,
        flush=True,
    )
    hardware, versions = bench.host(), bench.versions()
    (folder / "points.jsonl").touch()  # a line is appended as each run ends

    def logged(entry: dict) -> None:
        """points.jsonl (and --record-to) gain each run's line as it ends: a tune killed with its
        host still leaves its evaluation data. A write that fails is said, and the search goes on."""
        where = target.args(entry["point"].candidate.backend, sets)
        line = json.dumps(point_record(entry, where, capacity, command, hardware, versions)) + "\n"
        for path in [folder / "points.jsonl", *([record_to] if record_to else [])]:
            try:
                with open(path, "a", encoding="utf-8") as f:
                    f.write(line)
            except OSError as e:
                print(f"recipe tune: {path}: {e.strerror}: this run's line is not recorded", file=sys.stderr)

    search = Search(
        points,
        warmup,
        steps,
        budget_s=budget_min * 60 if budget_min is not None else None,
        progress=lambda line: print(f"recipe tune: {line}", file=sys.stderr, flush=True),
        capacity_gib=capacity,
        logged=logged,
        tie_runs=tie_runs,
    )
    best = search.run(measure_with_bench(target, sets, folder, allow_mismatch))
    text = table_text(points, capacity, best)
    if capacity is None:
        text += "no memory pruning: the hardware part has no GPU (peak memory is the processes' resident set)\n"
    text += verdict(search, best)
    write_atomic(folder / "table.txt", text)
    info = {
        "target": target.text,
        "global_batch": global_batch,
        "capacity_gib": capacity,
        "rungs": search.rungs,
        "interrupted": search.interrupted,
        "command": command,
        "interval_method": interval.METHOD,
        "tie": search.tie.json() if search.tie else None,
        "tie_runs": {"allowed": tie_runs, "used": search.tie_runs_used},
    }
    write_atomic(folder / "results.json", json.dumps(results_json(points, best, info), indent=2) + "\n")
    write_atomic(folder / "plot.svg", plot.svg(points, capacity, f"{target.text}: global batch {global_batch}"))
    sys.stdout.write(text)
    if best is None:
        print(f"recipe tune: nothing measured; see {folder / 'table.txt'}", file=sys.stderr)
        return 130 if search.interrupted else 1
    print(
        f"best: {best.candidate.label}: {best.figure.text()}" + (" (so far: interrupted)" if search.interrupted else "")
    )
    kept, note = overlay_pick(target, best, points)
    if note:
        print(f"recipe tune: {note}", file=sys.stderr)
    try:
        written = write_overlay(folder, target, kept, command, capacity, sets).name if kept else ""
    except NoOverlay as e:
        print(f"recipe tune: {e}", file=sys.stderr)
        written = ""
    print(
        f"recipe tune: wrote {folder}/: table.txt results.json plot.svg points.jsonl {written}".rstrip(),
        file=sys.stderr,
    )
    return 130 if search.interrupted else 0


def verdict(search: Search, best: Point | None) -> str:
    """Whether the pick is resolved from the rest, or a tie and how it was broken."""
    if best is None:
        return ""
    if search.tie is not None:
        spent = f" ({search.tie.runs} more runs did not separate them)" if search.tie.runs else ""
        return search.tie.text() + spent + "\n"
    if sum(p.status == MEASURED for p in search.points) > 1:
        how = "" if best.figure.sure else f" (more than {1 - CLOSE:.0%} ahead: its interval is under 95%)"
        return f"resolved: the interval of {best.candidate.label} is clear of every other measured candidate's{how}\n"
    return ""


def _output(target: Target, output_dir: str | None) -> Path:
    if output_dir:
        folder = Path(output_dir)
        if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
            raise RecipeError(f"{folder}: exists and is not an empty folder (hint: pick a new --output-dir)")
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise RecipeError(f"--output-dir {folder}: cannot create it ({e.strerror})") from None
        return folder
    from registry.run import claim

    return claim(Path("runs") / "tune" / target.slug)
