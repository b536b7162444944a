"""`recipe bench`: run recipes with the built-in trainer under measuring conditions (gradient
accumulation 1, docs/failure-modes.md §20; phase timing on; no checkpoints) and report global samples/s
(slowest rank: the median step's, with its confidence interval, registry/run/interval.py), peak
allocated and reserved memory (fullest rank) and where the step time goes. A recipe of a trainer
the rehearsal drives (OpenTau) is benched through its rehearsal: its own trainer and launch, random
weights and synthetic data, timed by the rank probe (docs/rehearsal.md); no phase shares there."""

from __future__ import annotations

import contextlib
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field, replace
from importlib import metadata
from pathlib import Path

import yaml

from registry import __version__, view
from registry.commands.render import table
from registry.compose import compose, patterns
from registry.errors import Exit, RecipeError
from registry.files import write_atomic
from registry.load import load_text
from registry.names import looks_like_file, parse
from registry.resolve import resolve
from registry.run import interval, launch_in, machine
from registry.sharing import sources
from registry.train import PHASES
from registry.validate import ROOT, validate

GIB = 1024**3
MEASURING = [
    "train.gradient_accumulation_steps=1",  # else throughput is over-reported (docs/failure-modes.md §20)
    "train.log_every=1",
    "train.checkpoint={every: 0, consolidated: false, resumable: false}",
    "trainer.builtin={progress: false, phase_timing: true}",
]


@dataclass
class Outcome:
    name: str
    skipped: str | None = None
    samples_per_s: float = 0.0
    peak_allocated_gib: float = 0.0
    peak_reserved_gib: float = 0.0
    shares: dict[str, float] = field(default_factory=dict)  # of the step time; they add up to 1
    phase_peaks_gib: dict[str, float] = field(default_factory=dict)  # peak allocated per phase (GPU only)
    resident_gib: float = 0.0  # allocated between steps (GPU only)
    micro_batch_size: int = 0
    gradient_accumulation_steps: int = 1
    world_size: int = 0
    run_dir: Path | None = None
    doc: dict | None = None
    rehearsed: bool = False  # measured through `recipe run --rehearse`: synthetic weights and data
    rates: list[list[float]] = field(default_factory=list)  # each launch's per-step samples/s after warm-up

    @property
    def figure(self) -> interval.Figure:
        return interval.figure(self.rates) if self.rates else interval.exact(self.samples_per_s)


def summarize(records: list[dict], warmup: int) -> dict:
    steps = [r for r in records if "loss" in r and r["step"] > warmup]
    if not steps:
        raise RecipeError("no measured steps in metrics.jsonl (hint: --steps must be at least 1)", Exit.INVALID)
    time_total = sum(r["step_time_s"] for r in steps)
    # each record is one step (log_every=1): the global batch over the slowest rank's step time
    rates = [r["samples_per_s"] for r in steps]
    phases = {p: statistics.fmean(r.get("phases_s", {}).get(p, 0.0) for r in steps) for p in PHASES}
    step_time = time_total / len(steps)
    shares = {p: phases[p] / step_time for p in PHASES}
    shares["other"] = max(0.0, 1.0 - sum(shares.values()))
    scale = sum(shares.values())
    return {
        "samples_per_s": interval.median(rates),
        "rates": [rates],
        "peak_allocated_gib": max(r["peak_allocated_gib"] for r in steps),
        "peak_reserved_gib": max(r["peak_reserved_gib"] for r in steps),
        "shares": {k: v / scale for k, v in shares.items()},
        "phase_peaks_gib": {p: max(r.get("phase_peak_allocated_gib", {}).get(p, 0.0) for r in steps) for p in PHASES},
        "resident_gib": max(r.get("resident_allocated_gib", 0.0) for r in steps),
    }


def bench_one(
    target: str,
    overrides: list[str],
    steps: int,
    warmup: int,
    allow_mismatch: bool,
    echo: bool,
    keep_accumulation: bool = False,
    base: Path = Path("runs") / "bench",
) -> Outcome:
    """`keep_accumulation` (recipe tune): measure with the recipe's own gradient accumulation. The
    built-in loop steps under accelerator.accumulate and logs one record per optimizer step, with
    micro x accumulation x world samples over the whole step's wall time, so samples/s stays right."""
    measuring = [m for m in MEASURING if not (keep_accumulation and m.startswith("train.gradient_accumulation"))]
    recipe = compose(target, [*overrides, *measuring, f"train.steps={warmup + steps}"])
    name = recipe.name
    kind = recipe.data["trainer"]["kind"]
    if kind != "builtin":
        from registry.run.rehearse import ADAPTERS

        if kind not in ADAPTERS:
            return Outcome(name, skipped=f"the {kind} trainer reports no metrics.jsonl and has no rehearsal")
        return _bench_rehearsed(target, overrides, steps, warmup, allow_mismatch, base, keep_accumulation)
    errors = [p for p in validate(recipe.data, recipe.origins) if p.is_error]
    if errors:
        return Outcome(name, skipped="invalid: " + ", ".join(sorted({p.rule for p in errors})))
    why = machine.mismatch(recipe.data, machine.gpus())
    if why and not allow_mismatch:
        return Outcome(name, skipped=why)
    code, folder = launch_in(recipe, resolve(recipe), base, echo)
    if code:
        return Outcome(name, skipped=f"failed with exit code {code} (see {folder / 'launch.log'})", run_dir=folder)
    records = [json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines()]
    world = records[0]["world_size"]
    return Outcome(
        name,
        run_dir=folder,
        doc=recipe.data,
        world_size=world,
        micro_batch_size=int(recipe.data["train"]["micro_batch_size"]),
        gradient_accumulation_steps=int(recipe.data["train"]["gradient_accumulation_steps"]),
        **summarize(records, warmup),
    )


def _bench_rehearsed(
    target: str, overrides: list[str], steps: int, warmup: int, allow: bool, base: Path, keep_accumulation: bool
) -> Outcome:
    """One launch of a real trainer's recipe through its rehearsal, its step rates read from the
    rank probe's records (the slowest rank's optimizer step end to end, as the rehearsal reports
    them: with accumulation, one record covers every micro batch of the step)."""
    from registry.run.rehearse import rehearse
    from registry.run.rehearse import report as rehearsal

    if not keep_accumulation:
        overrides = [*overrides, "train.gradient_accumulation_steps=1"]
    recipe = compose(target, overrides)
    errors = [p for p in validate(recipe.data, recipe.origins) if p.is_error]
    if errors:
        return Outcome(recipe.name, skipped="invalid: " + ", ".join(sorted({p.rule for p in errors})))
    base.mkdir(parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp(prefix=recipe.name.replace("/", "_") + "-", dir=base))
    with contextlib.redirect_stdout(sys.stderr):  # the trainer's output: stdout carries the bench's table or JSON
        code = rehearse(
            target,
            overrides,
            steps=warmup + steps + 1,  # the first update has no start to time it from
            output_dir=str(folder),
            allow_mismatch=allow,
            waive=None,
        )
    if code:
        return Outcome(
            recipe.name, skipped=f"the rehearsal failed with exit code {code} (see {folder})", run_dir=folder
        )
    records = rehearsal.ranks(folder / "ranks")
    rates = rehearsal.step_rates(records, rehearsal.samples_per_step(recipe.data), warmup)
    if not rates:
        return Outcome(recipe.name, skipped=f"no timed steps after the warm-up (see {folder})", run_dir=folder)
    gpu = [r for r in records if "peak_allocated_bytes" in r]
    # on CPU, as the built-in trainer reports it: the ranks' peak resident set
    cpu = max((r.get("max_rss_bytes", 0) / GIB for r in records), default=0.0)
    return Outcome(
        recipe.name,
        run_dir=folder,
        doc=recipe.data,
        rehearsed=True,
        world_size=len(records),
        micro_batch_size=int(recipe.data["train"]["micro_batch_size"]),
        gradient_accumulation_steps=int(recipe.data["train"]["gradient_accumulation_steps"]),
        samples_per_s=interval.median(rates),
        rates=[rates],
        peak_allocated_gib=max((r["peak_allocated_bytes"] / GIB for r in gpu), default=cpu),
        peak_reserved_gib=max((r["peak_reserved_bytes"] / GIB for r in gpu), default=cpu),
    )


def repeated(outcomes: list[Outcome]) -> Outcome:
    """Several launches of one recipe as one outcome: their step rates pooled, the fullest peaks,
    the mean phase shares. A skipped or failed launch stands for the whole."""
    bad = next((o for o in outcomes if o.skipped), None)
    if bad is not None or len(outcomes) == 1:
        return bad or outcomes[0]
    rates = [r for o in outcomes for r in o.rates]
    n = len(outcomes)
    return replace(
        outcomes[-1],
        rates=rates,
        samples_per_s=interval.figure(rates).median,
        peak_allocated_gib=max(o.peak_allocated_gib for o in outcomes),
        peak_reserved_gib=max(o.peak_reserved_gib for o in outcomes),
        resident_gib=max(o.resident_gib for o in outcomes),
        shares={k: sum(o.shares.get(k, 0.0) for o in outcomes) / n for k in outcomes[0].shares},
        phase_peaks_gib={k: max(o.phase_peaks_gib.get(k, 0.0) for o in outcomes) for k in outcomes[0].phase_peaks_gib},
    )


def bench_cell(target: str, overrides: list[str], steps: int, warmup: int, repeats: int, allow: bool, echo: bool):
    """`repeats` launches of one recipe (each a fresh launch: launch-to-launch variance is part of the
    figure only when there are several, registry/run/interval.py)."""
    outcomes = []
    for _ in range(repeats):
        outcomes.append(bench_one(target, overrides, steps, warmup, allow, echo))
        if outcomes[-1].skipped:
            break
    return repeated(outcomes)


def report(outcomes: list[Outcome]) -> str:
    header = ["RECIPE", "SAMPLES/S", "ALLOC GiB", "RESERVED GiB", *(p.upper() for p in PHASES), "OTHER", "INTERVAL"]
    rows = []
    for o in outcomes:
        if o.skipped:
            rows.append([o.name, "-", "-", "-", *(["-"] * (len(PHASES) + 1)), "-"])
            continue
        rows.append(
            [
                o.name,
                f"{o.samples_per_s:.1f}",
                f"{o.peak_allocated_gib:.2f}",
                f"{o.peak_reserved_gib:.2f}",
                *(f"{o.shares[p]:.0%}" if p in o.shares else "-" for p in (*PHASES, "other")),
                f"{o.figure.bounds()} {o.figure.confidence:.0%}",
            ]
        )
    text = table(rows, header)
    for o in outcomes:
        synthetic = " (rehearsed: random weights, synthetic data)" if o.rehearsed and not o.skipped else ""
        text += f"{o.name}: skipped: {o.skipped}\n" if o.skipped else f"{o.name}: {o.figure.text()}{synthetic}\n"
    return text + within_noise(outcomes)


def within_noise(outcomes: list[Outcome]) -> str:
    """Which recipes of a matrix the fastest is not separated from: their intervals overlap."""
    measured = sorted((o for o in outcomes if not o.skipped), key=lambda o: -o.samples_per_s)
    if len(measured) < 2:
        return ""
    top = measured[0]
    tied = [o.name for o in measured[1:] if o.figure.overlaps(top.figure)]
    if not tied:
        short = "" if all(o.figure.sure for o in measured) else "; an interval under 95%: too few steps"
        return f"fastest: {top.name} (its interval is clear of every other{short})\n"
    return f"fastest: not resolved: {top.name} and {', '.join(tied)} within noise (intervals overlap)\n"


def host() -> str:
    gpus = machine.gpus()
    if gpus:
        return f"{len(gpus)} x {gpus[0].name}"
    model = next(
        (line.split(":", 1)[1].strip() for line in _cpuinfo() if line.startswith("model name")),
        platform.processor() or "CPU",
    )
    return f"CPU: {model}, {os.cpu_count()} cores"


def _cpuinfo() -> list[str]:
    try:
        return Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        return []


def versions() -> dict[str, str]:
    found = {"recipe-registry": __version__}
    for package in ("torch", "accelerate", "deepspeed", "transformers"):
        try:
            found[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            pass
    return found


def result_entry(
    outcome: Outcome,
    command: str,
    steps: int,
    source: str = "recipe bench (built-in trainer)",
    memory_fraction: float | None = None,
    figure: interval.Figure | None = None,
) -> dict:
    """One `results` entry: the figures and their provenance (hardware seen, versions, date, command).
    `figure`: the samples/s with its interval, when pooled over more launches than `outcome` holds."""
    accumulation = outcome.gradient_accumulation_steps
    figure = figure or outcome.figure
    entry = {
        "samples_per_s": round(figure.median, 3),
        "samples_per_s_interval": figure.json(),
        "peak_allocated_gib": round(outcome.peak_allocated_gib, 3),
        "peak_reserved_gib": round(outcome.peak_reserved_gib, 3),
        "micro_batch_size": outcome.micro_batch_size,
        "gradient_accumulation_steps": accumulation,
        "num_cams": view.of(outcome.doc).dataset.num_cams,
        "steps": steps,
        "phases": {k: round(v, 4) for k, v in outcome.shares.items()},
        "hardware": host(),
        "versions": versions(),
        "date": time.strftime("%Y-%m-%d"),
        "command": command,
        "source": source,
    }
    if accumulation > 1:  # the built-in loop steps under accelerator.accumulate (docs/failure-modes.md §20)
        entry["loop_uses_accumulate"] = True
    if memory_fraction is not None:
        entry["memory_fraction"] = round(memory_fraction, 4)
    return entry


def record(outcome: Outcome, path: Path, command: str, steps: int, **entry_options) -> None:
    """Append the measurement to the recipe file's `results` (which must be its last section)."""
    text = path.read_text(encoding="utf-8")
    doc = load_text(text, str(path)).data
    if "results" in doc and list(doc)[-1] != "results":
        raise RecipeError(f"{path}: results must be the last section to record into it")
    entry = result_entry(outcome, command, steps, **entry_options)
    block = yaml.safe_dump([entry], sort_keys=False, width=1000)
    block = "".join("  " + line if line.strip() else line for line in block.splitlines(keepends=True))
    new = text if text.endswith("\n") else text + "\n"
    if "results" not in doc:
        new += "results:\n"
    new += block
    loaded = load_text(new, str(path))
    problems = [p for p in validate(loaded.data, loaded.origins, ROOT) if p.is_error]
    if problems:
        raise RecipeError("; ".join(p.render() for p in problems), Exit.INVALID)
    write_atomic(path, new)


def record_files(cells: list[str]) -> dict[str, Path | None]:
    """The file each cell's measurement is appended to (None: an untuned cell, no file of its
    own), worked out before anything runs so that a refusal costs no benchmark. A FILE is
    recorded into as given, a NAME into its file in a directory source; never into the installed
    package's recipes, a git source's clone (`recipe source update` moves it) or a published
    version (frozen under its sha256)."""
    from registry.files import RECIPES_DIR
    from registry.sharing import versions

    package = (Path(__file__).resolve().parent.parent, RECIPES_DIR.resolve())
    found: dict[str, Path | None] = {}
    for cell in cells:
        name = cell
        if looks_like_file(cell):
            path: Path | None = Path(cell)
            if path.resolve().is_relative_to(RECIPES_DIR.resolve()):
                name = path.resolve().relative_to(RECIPES_DIR.resolve()).with_suffix("").as_posix()
        else:
            version = versions.lookup(parse(cell))
            if version is not None:
                raise RecipeError(
                    f"{cell}: --record would change published version {version.qualified}, which is frozen "
                    f"under its sha256 (hint: {_copy_hint(cell)})"
                )
            path = sources.find(parse(cell))
            root = sources.root_of(path) if path else None
            kind = next((s.kind for s in sources.all_sources() if root and s.name == root.name), "")
            if kind == "git":
                raise RecipeError(
                    f"{cell}: --record would write into the clone of git source {root.name!r}, which recipe "
                    f"source update moves (hint: {_copy_hint(cell)}, or publish to it)"
                )
        if path is not None and any(path.resolve().is_relative_to(p) for p in package):
            where = "" if path == Path(cell) else f" ({path})"
            raise RecipeError(
                f"{cell}: --record would write into the installed package's recipes{where} (hint: {_copy_hint(name)})"
            )
        found[cell] = path
    return found


def _copy_hint(name: str) -> str:
    return f"record into a copy: recipe cp {name} mine.yaml, then recipe bench mine.yaml --record"


def said(repeats: int, warmup: int, steps: int) -> str:
    launches = f"{repeats} launches of " if repeats > 1 else ""
    return f"{launches}{warmup} warm-up + {steps} measured steps"


def main(
    targets: list[str],
    overrides: list[str],
    steps: int,
    warmup: int,
    allow_mismatch: bool,
    record_to: bool,
    command: str,
    repeats: int = 1,
) -> int:
    cells: list[str] = []
    for target in targets:
        cells += patterns.expand(target) if patterns.is_pattern(target) else [target]
    single = len(cells) == 1
    files = record_files(cells) if record_to else {}
    outcomes = []
    for cell in cells:
        print(f"recipe bench: {cell} ({said(repeats, warmup, steps)})", file=sys.stderr, flush=True)
        outcomes.append(bench_cell(cell, overrides, steps, warmup, repeats, allow_mismatch, echo=single))
    sys.stdout.write(report(outcomes))
    if record_to:
        for o, cell in zip(outcomes, cells):
            if o.skipped:
                continue
            path = files[cell]
            if path is None:  # an untuned cell: only its parts have files
                print(
                    f"{cell}: not recorded: it has no file of its own (hint: write a tuned overlay {cell}.yaml)",
                    file=sys.stderr,
                )
                continue
            record(o, path, command, steps)
            print(f"{cell}: recorded in {path}", file=sys.stderr)
    return Exit.INVALID if all(o.skipped for o in outcomes) else Exit.OK
