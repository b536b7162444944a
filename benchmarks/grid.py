"""Exhaustive grid of training configurations, and the estimator's error on held-out points.

measure (on a GPU host): run every configuration policy x backend x micro batch of one hardware
cell with the built-in trainer, keeping the global batch fixed: gradient accumulation =
global / (micro x world). Unlike `recipe bench`, the candidate's accumulation is kept (the loop
accumulates with accelerator.accumulate and logs samples/s = micro x accumulation x world per
optimizer step over the slowest rank's step time, registry/train/loop.py). One JSON line per
configuration goes to --out: wall seconds of the whole run (launch to exit), samples/s, peak
allocated/reserved GiB (fullest rank), status ok|oom|failed|invalid, the estimator's prediction.

    python3 benchmarks/grid.py measure --policies ref-100m,ref-1b --gpus 0,1 --port 29510 \
        --shard 0/4 --out grid-0.jsonl

Several instances share one host: each gets its own GPUs (--gpus sets CUDA_VISIBLE_DEVICES for
the launched run; the generated accelerate yaml names no gpu_ids, so accelerate keeps it), its own
rendezvous port and its own shard of the list (round-robin, so every shard gets a mix of backends
and micro batches). A configuration already in --out is skipped, so an interrupted instance is
resumed by running the same command again; --deadline stops starting new ones after that many
seconds.

Steps: 2 warm-up + 8 measured optimizer steps (--steps). Step 1 builds NCCL communicators,
DeepSpeed's buckets and the optimizer's lazily created Adam states; step 2 is the first with every
allocation in place (the peak memory is reached by then). samples/s is the median step's, with a
95% distribution-free interval for it (`samples_per_s_interval`, registry/run/interval.py: 8
steps give [min, max] at 99%; 4 steps reached only 87.5%); the per-step spread is recorded too
(`step_spread`, max/min - 1). --repeats R launches each configuration R times and pools their
steps, the interval widened to hold each launch's median (launches of one loop differ by up to
20%); `wall_s` is then one launch's mean. Phase timing is off by default (it synchronises the GPU
four times per micro batch); --phase-timing turns it on for per-phase peaks and resident memory,
as benchmarks/calibrate.py records them.

merge: join the instances' JSON lines into benchmarks/results/grid_<host>.json with provenance,
and name per policy the fastest configuration and those within noise of it (overlapping intervals).

    python3 benchmarks/grid.py merge grid-*.jsonl --command "..."

evaluate (anywhere, no GPU): the estimator's error |predicted / measured - 1| on the measured
points that are not calibration points (the (recipe, micro batch, accumulation) triples the
estimator was fitted on: benchmarks/results/calibrate_2xH200.json at accumulation 1 and
calibrate_accumulation.json above it): count, median, worst and the under-predictions (the
dangerous direction), overall, per backend, and apart for accumulation 1 and accumulation > 1,
each against its own acceptance; writes benchmarks/results/heldout_<host>.json. A `recipe tune`
points.jsonl is read too: every tune run adds evaluation data.

    python3 benchmarks/grid.py evaluate benchmarks/results/grid_2xH100.json runs/tune/X/points.jsonl
"""

from __future__ import annotations

import argparse
import json
import math
import re
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from registry.run import interval  # noqa: E402  (pure Python: no torch)

RESULTS = ROOT / "benchmarks" / "results"
CALIBRATION = RESULTS / "calibrate_2xH200.json"  # accumulation 1
CALIBRATION_FILES = (CALIBRATION, RESULTS / "calibrate_accumulation.json")
BACKENDS = "ddp,zero1,zero2,zero3,zero3-offload,fsdp,fsdp-grad-op,fsdp2"
MICRO = "1,2,4,8,16,32"
WARMUP, STEPS = 2, 8
ACCEPT = {  # held-out memory error |predicted / measured - 1|: issue 15 (accumulation 1), issue 23
    "accumulation 1": {"median": 0.05, "worst": 0.10},
    "accumulation > 1": {"median": 0.03, "worst": 0.08, "under_5_percent": 0},
}


# --- configurations ------------------------------------------------------------------------------


def configs(policies, backends, micros, hardware, global_batch, accumulation, world) -> list[dict]:
    """Every policy x backend x micro batch, with the accumulation that keeps the global batch
    (or a fixed accumulation when `accumulation` is given). `world` is the ranks of `hardware`."""
    out = []
    for policy in policies:
        for backend in backends:
            for micro in micros:
                if accumulation:
                    accum, why = accumulation, None
                else:
                    accum, rest = divmod(global_batch, micro * world)
                    why = (
                        None
                        if accum >= 1 and rest == 0
                        else f"global batch {global_batch} is not a multiple of {micro} x {world}"
                    )
                out.append(
                    {
                        "recipe": f"{policy}/{backend}/{hardware}",
                        "policy": policy,
                        "backend": backend,
                        "hardware": hardware,
                        "micro_batch_size": micro,
                        "gradient_accumulation_steps": accum if not why else None,
                        "global_batch": micro * accum * world if not why else global_batch,
                        "world_size": world,
                        **({"indivisible": why} if why else {}),
                    }
                )
    return out


def shard(items: list, spec: str) -> list:
    """`i/n`: every n-th item from the i-th (round-robin)."""
    i, n = (int(x) for x in spec.split("/"))
    if not 0 <= i < n:
        raise SystemExit(f"--shard {spec}: want i/n with 0 <= i < n")
    return items[i::n]


def key(point: dict) -> tuple:
    return (point["recipe"], int(point["micro_batch_size"]), point.get("gradient_accumulation_steps"))


# --- measure -------------------------------------------------------------------------------------


def overrides(config: dict, port: int, phase_timing: bool, steps: int = STEPS) -> list[str]:
    timing = "true" if phase_timing else "false"
    return [
        f"train.micro_batch_size={config['micro_batch_size']}",
        f"train.gradient_accumulation_steps={config['gradient_accumulation_steps']}",
        "train.log_every=1",
        "train.checkpoint={every: 0, consolidated: false, resumable: false}",
        f"trainer.builtin={{progress: false, phase_timing: {timing}}}",
        f"train.steps={WARMUP + steps}",
        f"launch.main_process_port={port}",
    ]


def predicted(doc: dict) -> dict:
    from registry.estimate import estimate

    est = estimate(doc)
    if est is None or not est.finite:
        return {}
    return {
        "predicted_allocated_gib": round(est.allocated_gib, 3),
        "predicted_reserved_gib": round(est.reserved_gib, 3),
        "predicted_fits": est.needed_fraction <= 1.0,
        "predicted_phase": est.phase,
    }


def summary(records: list[dict]) -> dict:
    steps = [r for r in records if "loss" in r and r["step"] > WARMUP]
    if not steps:
        return {}
    times = [r["step_time_s"] for r in steps]
    rates = [r["samples_per_s"] for r in steps]  # one record per optimizer step (train.log_every=1)
    figure = interval.figure([rates])
    out = {
        "samples_per_s": round(figure.median, 3),
        "samples_per_s_interval": figure.json(),
        "step_rates": [[round(r, 3) for r in rates]],
        "step_time_s": round(statistics.median(times), 4),
        "step_spread": round(max(times) / min(times) - 1, 4) if min(times) > 0 else None,
        "measured_steps": len(steps),
        "peak_allocated_gib": round(max(r["peak_allocated_gib"] for r in records if "loss" in r), 3),
        "peak_reserved_gib": round(max(r["peak_reserved_gib"] for r in records if "loss" in r), 3),
    }
    if any("phase_peak_allocated_gib" in r for r in steps):
        phases = steps[0]["phase_peak_allocated_gib"]
        out["phase_peaks_gib"] = {p: round(max(r["phase_peak_allocated_gib"][p] for r in steps), 3) for p in phases}
        out["resident_gib"] = round(max(r.get("resident_allocated_gib", 0.0) for r in steps), 3)
    return out


def failure(log: Path) -> str:
    """ "oom" or "failed", read from the run's launch.log as recipe tune reads it."""
    from registry.run.tune import failure_kind

    return failure_kind(log.read_text(errors="replace") if log.exists() else "")[0]


def run_one(config: dict, port: int, gpus: str | None, phase_timing: bool, steps: int = STEPS) -> dict:
    from registry.compose import compose
    from registry.resolve import resolve
    from registry.run import launch_in
    from registry.validate import validate

    point = dict(config)
    if "indivisible" in config:
        return {**point, "status": "invalid", "rules": ["global-batch-indivisible"]}
    recipe = compose(config["recipe"], overrides(config, port, phase_timing, steps))
    point.update(predicted(recipe.data))
    errors = sorted({p.rule for p in validate(recipe.data, recipe.origins) if p.is_error})
    if errors:
        return {**point, "status": "invalid", "rules": errors}
    started = time.perf_counter()
    gpu_env = {"CUDA_VISIBLE_DEVICES": gpus} if gpus is not None else None
    code, folder = launch_in(recipe, resolve(recipe), Path("runs") / "grid", False, gpu_env)
    point["wall_s"] = round(time.perf_counter() - started, 2)
    ended = time.time()
    point["run_dir"] = str(folder)
    metrics = folder / "metrics.jsonl"
    records = [json.loads(line) for line in metrics.read_text().splitlines()] if metrics.exists() else []
    measured = summary(records)
    if records and "startup_s" in records[0]:
        point["startup_s"] = records[0]["startup_s"]
    if records and "time" in records[-1]:  # from the trainer's end to the last process's exit
        point["exit_s"] = round(ended - records[-1]["time"], 3)
    if code or not measured:
        status = failure(folder / "launch.log") if code else "failed"
        return {**point, "status": status, "exit_code": code, **measured}
    return {**point, "status": "ok", **measured}


def measure(args) -> int:
    from registry.compose import compose
    from registry.topology import world_size

    policies, backends = args.policies.split(","), args.backends.split(",")
    micros = [int(m) for m in args.micro.split(",")]
    world = int(world_size(compose(f"{policies[0]}/{backends[0]}/{args.hardware}").data))
    todo = shard(
        configs(policies, backends, micros, args.hardware, args.global_batch, args.accumulation, world), args.shard
    )
    done = set()
    if args.out.exists():
        done = {key(json.loads(line)) for line in args.out.read_text().splitlines() if line.strip()}
    began, installed, host = time.perf_counter(), versions(), host_gpus()
    for config in todo:
        if key(config) in done:
            continue
        if args.deadline and time.perf_counter() - began > args.deadline:
            print(f"grid: deadline {args.deadline} s reached; run again to resume", file=sys.stderr, flush=True)
            return 3
        point = repeated([run_one(config, args.port, args.gpus, args.phase_timing, args.steps)])
        while point["status"] == "ok" and point["launches"] < args.repeats:
            point = repeated([point, run_one(config, args.port, args.gpus, args.phase_timing, args.steps)])
        point.update(
            {"gpus": args.gpus, "port": args.port, "shard": args.shard, "date": time.strftime("%Y-%m-%d %H:%M:%S")}
        )
        point["versions"] = installed  # of the measuring host: merge may run elsewhere
        point["host"] = host
        print(json.dumps(point), flush=True)
        with args.out.open("a") as f:
            f.write(json.dumps(point) + "\n")
    return 0


def repeated(points: list[dict]) -> dict:
    """Launches of one configuration as one point: steps pooled (interval widened to each launch's
    median), the fullest peaks, `wall_s` one launch's mean. A launch that did not finish stands."""
    last = points[-1]
    if last["status"] != "ok":
        return last
    if len(points) == 1:
        return {**last, "launches": 1}
    first = points[0]
    launches = first["launches"] + 1
    rates = first["step_rates"] + last["step_rates"]
    figure = interval.figure(rates)
    return {
        **last,
        "launches": launches,
        "samples_per_s": round(figure.median, 3),
        "samples_per_s_interval": figure.json(),
        "step_rates": rates,
        "measured_steps": first["measured_steps"] + last["measured_steps"],
        "step_spread": max(first["step_spread"] or 0.0, last["step_spread"] or 0.0),
        "wall_s": round((first["wall_s"] * first["launches"] + last["wall_s"]) / launches, 2),
        "peak_allocated_gib": max(first["peak_allocated_gib"], last["peak_allocated_gib"]),
        "peak_reserved_gib": max(first["peak_reserved_gib"], last["peak_reserved_gib"]),
        "run_dirs": first.get("run_dirs", [first["run_dir"]]) + [last["run_dir"]],
    }


def figure_of(point: dict):
    """A grid point's samples/s as an interval.Figure; a point from before intervals is exact."""
    return interval.from_json(point["samples_per_s"], point.get("samples_per_s_interval"))


def label(point: dict) -> str:
    return f"{point['backend']} mb{point['micro_batch_size']}x{point['gradient_accumulation_steps']}"


def within_noise(points: list[dict]) -> dict:
    """Per policy: the configuration with the highest median, and those whose intervals overlap its."""
    out = {}
    for policy in sorted({p["policy"] for p in points}):
        ok = sorted(
            (p for p in points if p["policy"] == policy and p["status"] == "ok"), key=lambda p: -p["samples_per_s"]
        )
        if ok:
            top = figure_of(ok[0])
            tied = [label(p) for p in ok[1:] if figure_of(p).overlaps(top)]
            out[policy] = {"fastest": label(ok[0]), "within_noise": tied, "resolved": not tied}
    return out


# --- merge ---------------------------------------------------------------------------------------


def host_gpus() -> str:
    from registry.run import machine

    gpus = machine.gpus()
    return f"{len(gpus)} x {gpus[0].name}" if gpus else "no GPU"


def versions() -> dict[str, str]:
    from registry.run.bench import versions as installed  # what `recipe bench --record` records

    return installed()


def relative(path: Path) -> str:
    """A path as the repository names it, where it is inside the repository."""
    full = path.resolve()
    return str(full.relative_to(ROOT)) if full.is_relative_to(ROOT) else str(path)


def tag(gpus: str) -> str:
    """'8 x NVIDIA H100 80GB HBM3' -> '8xH100', for file names."""
    m = re.match(r"(\d+) x (.*)", gpus)
    if not m:
        return re.sub(r"[^A-Za-z0-9_.-]+", "", gpus) or "host"
    model = next((w for w in m.group(2).split() if re.search(r"[A-Z]\d", w)), m.group(2).split()[-1])
    return f"{m.group(1)}x{model}"


def merge(args) -> int:
    points = []
    for path in args.parts:
        points += [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    points.sort(key=lambda p: (p["recipe"], p["micro_batch_size"]))
    # the measuring host's GPUs, as its points recorded them: merge usually runs on another machine
    gpus = args.host or next((p["host"] for p in points if p.get("host")), None) or host_gpus()
    doc = {
        "benchmark": "grid",
        "date": time.strftime("%Y-%m-%d"),
        "hardware": gpus,
        "versions": next((p["versions"] for p in points if p.get("versions")), None) or versions(),
        "command": args.command,
        "steps": (
            f"{WARMUP} warm-up + {sorted({p['measured_steps'] // p.get('launches', 1) for p in points if 'measured_steps' in p})}"
            " measured optimizer steps per launch, gradient accumulation kept"
        ),
        "samples_per_s": f"the median step's, with its interval: {interval.METHOD}",
        "fastest": within_noise(points),
        "wall_s_total": round(sum(p.get("wall_s", 0.0) for p in points), 1),
        "counts": {s: sum(p["status"] == s for p in points) for s in ("ok", "oom", "failed", "invalid")},
        "points": points,
    }
    out = args.output or RESULTS / f"grid_{args.name or tag(gpus)}.json"
    out.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"{len(points)} points -> {out}")
    return 0


# --- evaluate ------------------------------------------------------------------------------------


def calibration_keys(paths=CALIBRATION_FILES) -> set[tuple[str, int, int]]:
    """(recipe, micro batch, accumulation) of every point the estimator was fitted on."""
    keys = set()
    for path in paths:
        for p in json.loads(Path(path).read_text())["points"]:
            keys.add((p["recipe"], int(p["micro_batch_size"]), int(p.get("gradient_accumulation_steps") or 1)))
    return keys


def accumulation(point: dict) -> int:
    return int(point.get("gradient_accumulation_steps") or 1)


def measured_gib(point: dict) -> float | None:
    return point.get("measured_allocated_gib", point.get("peak_allocated_gib"))


def load_points(path: Path) -> tuple[list[dict], str]:
    """Measured points and their host: a grid_<host>.json (or any {"points": [...]} or list), or a
    `recipe tune` points.jsonl (one run a line). In a points.jsonl a configuration measured again
    at a later rung counts once, by its last measured run; a line without `recipe` (written
    before tune recorded it) is skipped, and so is a cut-off last line (a host lost mid-write)."""
    try:
        text = path.read_text()
    except OSError as e:
        raise SystemExit(f"{path}: {e.strerror}") from None
    if path.suffix != ".jsonl":
        try:
            data = json.loads(text)
        except ValueError as e:
            raise SystemExit(f"{path}: not JSON ({e})") from None
        return (data["points"], data.get("hardware", "host")) if isinstance(data, dict) else (data, "host")
    lines = [line for line in text.splitlines() if line.strip()]
    last: dict[tuple, dict] = {}
    skipped = 0
    for number, line in enumerate(lines, 1):
        try:
            p = json.loads(line)
        except ValueError:
            if number == len(lines):
                skipped += 1
                continue
            raise SystemExit(f"{path}:{number}: not a JSON line") from None
        if "recipe" not in p:
            skipped += 1
            continue
        key = (
            p["recipe"],
            tuple(p.get("overrides") or ()),
            p["micro_batch_size"],
            p.get("gradient_accumulation_steps"),
            bool(p.get("gradient_checkpointing")),
            p.get("hardware"),
        )
        if p.get("status") == "measured" or last.get(key, {}).get("status") != "measured":
            last[key] = p
    if skipped:
        print(f"{path}: {skipped} line(s) skipped (no recipe recorded, or cut off)", file=sys.stderr)
    points = list(last.values())
    return points, next((p["hardware"] for p in points if p.get("hardware")), "host")


def heldout(points: list[dict], calibration: set) -> tuple[list, dict]:
    """The held-out points, and what was left out and why. A point of a run with added overrides
    (a tune of a recipe file) or added checkpointing is evaluated as composed."""
    kept, left = [], {"calibration": 0, "not measured": 0}
    for p in points:
        if p.get("status", "ok") not in ("ok", "measured") or measured_gib(p) is None:
            left["not measured"] += 1
        elif (p["recipe"], int(p["micro_batch_size"]), accumulation(p)) in calibration and not p.get(
            "gradient_checkpointing"
        ):
            left["calibration"] += 1
        else:
            kept.append(p)
    return kept, left


def errors(points: list[dict], predict) -> list[dict]:
    rows = []
    for p in points:
        guess, meas = predict(p), measured_gib(p)
        rows.append(
            {
                "recipe": p["recipe"],
                "backend": p.get("backend") or p["recipe"].split("/")[1],
                "micro_batch_size": int(p["micro_batch_size"]),
                "gradient_accumulation_steps": accumulation(p),
                "measured_allocated_gib": meas,
                "predicted_allocated_gib": round(guess, 3),
                "ratio": round(guess / meas, 4),
                "error": round(abs(guess / meas - 1), 4),
            }
        )
    return rows


def stats(rows: list[dict]) -> dict:
    errs = [r["error"] for r in rows]
    if not errs:
        return {"count": 0}
    worst = max(rows, key=lambda r: r["error"])
    under = [r for r in rows if r["ratio"] < 1]
    return {
        "count": len(errs),
        "median": round(statistics.median(errs), 4),
        "worst": round(worst["error"], 4),
        "worst_point": f"{worst['recipe']} micro {worst['micro_batch_size']} accumulation "
        f"{worst['gradient_accumulation_steps']}",
        "over_5_percent": sum(e > 0.05 for e in errs),
        # the dangerous direction: a recipe let through that goes out of memory
        "under_predicted": len(under),
        "under_rate": round(len(under) / len(rows), 4),
        "under_5_percent": sum(r["ratio"] < 0.95 for r in rows),
        "worst_under": round(max((1 - r["ratio"] for r in under), default=0.0), 4),
    }


def current_prediction(point: dict) -> float:
    """The current estimator's prediction (the recorded one may predate an estimator change)."""
    from registry.compose import compose
    from registry.estimate import estimate

    sets = [
        *point.get("overrides", []),
        f"train.micro_batch_size={point['micro_batch_size']}",
        f"train.gradient_accumulation_steps={accumulation(point)}",
    ]
    if point.get("gradient_checkpointing"):
        sets.append("policy.gradient_checkpointing=true")
    return estimate(compose(point["recipe"], sets).data).allocated_gib


def judge(group: str, summary: dict, min_points: int) -> dict:
    """A group's acceptance: issue 15's bar for accumulation 1, issue 23's for accumulation > 1
    (tighter, and no point under-predicted by more than 5%)."""
    bar = ACCEPT[group]
    met = summary["count"] >= min_points and summary["median"] <= bar["median"] and summary["worst"] <= bar["worst"]
    if "under_5_percent" in bar:
        met = met and summary["under_5_percent"] <= bar["under_5_percent"]
    return {**bar, "min_points": min_points, "met": met}


def evaluate(args) -> int:
    points, hosts = [], []
    for path in args.results:
        some, host = load_points(path)
        points += some
        hosts.append(host)
    kept, left = heldout(points, calibration_keys(args.calibration))
    rows = errors(kept, current_prediction)
    by_backend = {b: stats([r for r in rows if r["backend"] == b]) for b in sorted({r["backend"] for r in rows})}
    groups = {
        "accumulation 1": stats([r for r in rows if r["gradient_accumulation_steps"] == 1]),
        "accumulation > 1": stats([r for r in rows if r["gradient_accumulation_steps"] > 1]),
    }
    verdicts = {g: judge(g, s, args.min_points) for g, s in groups.items() if s["count"]}
    ok = bool(verdicts) and all(v["met"] for v in verdicts.values())
    print(f"{'RECIPE':<28} {'MICRO':>5} {'ACC':>4} {'MEASURED':>9} {'PREDICTED':>9} {'RATIO':>6}")
    for r in sorted(rows, key=lambda r: -r["error"]):
        print(
            f"{r['recipe']:<28} {r['micro_batch_size']:>5} {r['gradient_accumulation_steps']:>4} "
            f"{r['measured_allocated_gib']:>9.2f} {r['predicted_allocated_gib']:>9.2f} {r['ratio']:>6.3f}"
        )
    for b, s in by_backend.items():
        print(f"{b:<14} n={s['count']:<3} median {s['median']:.1%} worst {s['worst']:.1%}")
    print(f"held out: {len(rows)} points (left out: {left})")
    for g, s in groups.items():
        if not s["count"]:
            print(f"  {g}: no points")
            continue
        v = verdicts[g]
        print(
            f"  {g}: {s['count']} points, median {s['median']:.1%}, worst {s['worst']:.1%} ({s['worst_point']}); "
            f"under-predicted {s['under_predicted']} of {s['count']} ({s['under_rate']:.0%}), "
            f"{s['under_5_percent']} by more than 5% (worst {s['worst_under']:.1%}); "
            f"acceptance (>= {args.min_points} points, median <= {v['median']:.0%}, worst <= {v['worst']:.0%}"
            + (", none under by more than 5%" if "under_5_percent" in v else "")
            + f"): {'met' if v['met'] else 'NOT met'}"
        )
    if not args.no_write:
        host = hosts[0]
        out = args.output or RESULTS / f"heldout_{tag(host)}.json"
        report = {
            "benchmark": "heldout",
            "date": time.strftime("%Y-%m-%d"),
            "source": [relative(p) for p in args.results],
            "calibration": [relative(Path(p)) for p in args.calibration],
            "hardware": sorted(set(hosts)),
            "left_out": left,
            "overall": stats(rows),
            "groups": groups,
            "by_backend": by_backend,
            "acceptance": {"groups": verdicts, "met": ok},
            "points": rows,
        }
        out.write_text(json.dumps(report, indent=1) + "\n")
        print(f"-> {out}")
    return 0 if ok else 1


# --- accept: recipe tune against the grid (issue 15) ---------------------------------------------
ACCEPT_RATIO, ACCEPT_WALL, ACCEPT_OOMS = 0.95, 0.25, 1


def judge_tune(grid: dict, tune: dict, tune_wall_s: float, policy: str) -> dict:
    """What issue 15 asks of a tune run, against the grid measured in the same session: the
    grid's own measurement of tune's pick is not shown to be below 0.95x the grid's best (with
    intervals: the pick's upper bound is at least 0.95x the best's lower bound; `ratio_bounds` is
    [pick lower / best upper, pick upper / best lower], and `ratio_resolved` says whether the
    whole interval of ratios lies on one side of 0.95; a grid without intervals compares the
    medians, as before); tune's wall time at
    most 25% of the grid's (the sum of its configurations' wall times: what one pair of GPUs
    would spend on it); at most one out-of-memory run per backend. The grid must hold every
    backend x micro batch of tune's search space (any status): a partial grid's best and wall
    time are only bounds, and it is never `met`. Candidates with added activation checkpointing
    are outside the grid (it measures the recipes as they are) and are not asked of it."""
    points = [p for p in grid["points"] if p["policy"] == policy and p["status"] == "ok"]
    if not points:
        raise SystemExit(f"accept: the grid has no measured point of {policy}")
    best = max(points, key=lambda p: p["samples_per_s"])
    win = tune.get("winner") or {}
    pick = next(
        (
            p
            for p in points
            if (p["backend"], p["micro_batch_size"], p["gradient_accumulation_steps"])
            == (win.get("backend"), win.get("micro_batch_size"), win.get("gradient_accumulation_steps"))
        ),
        None,
    )
    grid_wall = sum(p.get("wall_s", 0.0) for p in grid["points"] if p["policy"] == policy)
    held = {(p["backend"], p["micro_batch_size"]) for p in grid["points"] if p["policy"] == policy}
    space = {
        (r["backend"], r.get("micro_batch_size"))
        for r in tune.get("candidates", [])
        if not r.get("gradient_checkpointing")
    }
    missing = sorted(space - held, key=str)
    ooms: dict[str, int] = {}
    for row in tune.get("candidates", []):
        if row.get("status") == "oom":
            ooms[row["backend"]] = ooms.get(row["backend"], 0) + 1
    ratio = pick["samples_per_s"] / best["samples_per_s"] if pick else 0.0
    bounds = [0.0, 0.0]
    if pick:
        a, b = figure_of(pick), figure_of(best)
        bounds = [a.lower / b.upper if b.upper else 0.0, a.upper / b.lower if b.lower else math.inf]
    resolved = bounds[0] >= ACCEPT_RATIO or bounds[1] < ACCEPT_RATIO
    wall = tune_wall_s / grid_wall if grid_wall else math.inf
    return {
        "policy": policy,
        "grid_best": {
            k: best.get(k)
            for k in (
                "backend",
                "micro_batch_size",
                "gradient_accumulation_steps",
                "samples_per_s",
                "samples_per_s_interval",
            )
        },
        "tune_pick": {k: win.get(k) for k in ("backend", "micro_batch_size", "gradient_accumulation_steps")},
        "pick_in_grid_samples_per_s": pick["samples_per_s"] if pick else None,
        "pick_in_grid_interval": pick.get("samples_per_s_interval") if pick else None,
        "ratio_to_best": round(ratio, 4),
        "ratio_bounds": [round(x, 4) for x in bounds],
        "ratio_resolved": resolved,
        "grid_within_noise_of_best": [
            label(p) for p in points if p is not best and figure_of(p).overlaps(figure_of(best))
        ],
        "tune_wall_s": round(tune_wall_s, 1),
        "grid_wall_s": round(grid_wall, 1),
        "wall_fraction": round(wall, 4),
        "ooms_per_backend": ooms,
        "grid_missing": [f"{b} mb{m}" for b, m in missing],
        "met": not missing
        and bounds[1] >= ACCEPT_RATIO
        and wall <= ACCEPT_WALL
        and all(n <= ACCEPT_OOMS for n in ooms.values()),
    }


def accept(args) -> int:
    grid = json.loads(args.grid.read_text())
    tune = json.loads(args.tune.read_text())
    verdict = judge_tune(grid, tune, args.tune_wall, args.policy)
    print(json.dumps(verdict, indent=1))
    if args.output:
        args.output.write_text(json.dumps(verdict, indent=1) + "\n")
    return 0 if verdict["met"] else 1


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="verb", required=True)
    m = sub.add_parser("measure", help="run the grid (or a shard of it) on this host's GPUs")
    m.add_argument("--policies", default="ref-100m,ref-1b")
    m.add_argument("--backends", default=BACKENDS)
    m.add_argument("--micro", default=MICRO)
    m.add_argument("--hardware", default="2xH100", help="hardware part whose GPU count matches --gpus")
    m.add_argument("--global-batch", type=int, default=64, help="samples per optimizer step, kept fixed")
    m.add_argument("--accumulation", type=int, default=0, help="fixed accumulation instead (1: memory points)")
    m.add_argument("--gpus", default=None, help="CUDA_VISIBLE_DEVICES for the launched runs, e.g. 0,1")
    m.add_argument("--port", type=int, default=29510, help="rendezvous port, distinct per concurrent instance")
    m.add_argument("--shard", default="0/1", help="i/n: this instance's share of the list")
    m.add_argument("--deadline", type=float, default=0, help="start no configuration after this many seconds")
    m.add_argument("--phase-timing", action="store_true", help="per-phase peaks and resident memory (syncs the GPU)")
    m.add_argument("--steps", type=int, default=STEPS, help=f"measured steps per launch (default {STEPS})")
    m.add_argument("--repeats", type=int, default=1, help="launches per configuration, steps pooled (default 1)")
    m.add_argument("--out", type=Path, required=True, help="JSON-lines file, one per instance")
    g = sub.add_parser("merge", help="join instances' JSON lines into results/grid_<name>.json")
    g.add_argument("parts", type=Path, nargs="+")
    g.add_argument("--command", default="", help="the command line(s) that measured, for provenance")
    g.add_argument("--host", default=None, help="host GPUs (default: as the points recorded them, else this machine's)")
    g.add_argument("--name", default=None, help="file name suffix (default: the hardware cell)")
    g.add_argument("--output", type=Path, default=None)
    e = sub.add_parser("evaluate", help="the estimator's error on points not used to fit it")
    e.add_argument("results", type=Path, nargs="+", help="grid_<host>.json files, or any files of measured points")
    e.add_argument("--calibration", type=Path, nargs="+", default=list(CALIBRATION_FILES))
    e.add_argument("--min-points", type=int, default=24)
    e.add_argument("--output", type=Path, default=None)
    e.add_argument("--no-write", action="store_true")
    a = sub.add_parser("accept", help="judge a recipe tune run against the grid of the same session")
    a.add_argument("grid", type=Path, help="grid_<host>.json of the same session")
    a.add_argument("tune", type=Path, help="the tune run's results.json")
    a.add_argument("--policy", required=True)
    a.add_argument("--tune-wall", type=float, required=True, help="the tune command's wall seconds")
    a.add_argument("--output", type=Path, default=None)
    args = ap.parse_args(argv)
    return {"measure": measure, "merge": merge, "evaluate": evaluate, "accept": accept}[args.verb](args)


if __name__ == "__main__":
    sys.exit(main())
