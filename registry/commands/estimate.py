"""`recipe estimate`: per-rank GPU memory at the peak of a step, and the largest micro batch
that fits."""

from __future__ import annotations

import json
import sys

from registry.errors import Exit, RecipeError

NAME = "estimate"
HELP = "per-rank GPU memory: the breakdown, and the largest micro batch that fits"
# `--help` lists them, with the codes every verb shares (registry/commands/__init__.py)
EXIT_CODES = {
    0: "estimated (a CPU recipe: a note, nothing to estimate)",
    1: "the schema rejects the recipe, its policy declares no sizes, or the sizes overflow",
}
EXAMPLES = """\
examples:
  recipe estimate pi07/zero2/8xA100 train.micro_batch_size=24
  recipe estimate ref-1b/fsdp2/2xH100 train.micro_batch_size=4 train.gradient_accumulation_steps=8
  recipe estimate pi07/fsdp/8xA100 --format json

accuracy, on points it was not fitted on (the reference policies under all
eight backends on 2 GPUs, six on 4; benchmarks/results/heldout.json):
  accumulation 1:   48 points, median 1.0%, worst 6.1% (over)
  accumulation 2-8: 57 points, median 0.9%, worst 6.7% (over)
  under-predicted (the dangerous direction): 31 of 48 and 33 of 57,
  none by more than 5% (worst 4.7% and 4.0%)
LeRobot ACT and diffusion against LeRobot's logged peak: within 13%
not measured: more than 4 ranks; OpenTau past one H200 (pi07 there: within 1.3%) and its published points
"""


def register(subparsers) -> None:
    p = subparsers.add_parser(NAME, help=HELP, epilog=EXAMPLES)
    p.add_argument("target", metavar="NAME|FILE")
    p.add_argument("overrides", nargs="*", metavar="KEY=VALUE")
    p.add_argument("--format", choices=("text", "json"), default="text")
    p.set_defaults(func=run)


def run(args) -> int:
    from registry import estimate as memory
    from registry.commands.render import table
    from registry.compose import compose
    from registry.validate import typed

    recipe = compose(args.target, args.overrides)
    doc = typed(recipe.data, recipe.origins, recipe.name)
    if doc.hardware.gpu is None:  # not a failure: there is no GPU memory to run out of
        note = "runs on CPU (hardware.gpu: null): no GPU memory to estimate"
        if args.format == "json":
            print(json.dumps({"recipe": recipe.name, "device": "cpu", "note": note}, indent=2))
        else:
            print(f"{recipe.name}: {note}")
        return Exit.OK
    frames = frame_source(recipe.data)
    est = memory.estimate(doc, frames["pixels"])
    if est is None:
        raise RecipeError(
            f"{recipe.name}: its policy declares no sizes (policy.memory): nothing to estimate",
            Exit.INVALID,
        )
    if not est.finite:
        raise RecipeError(f"{recipe.name}: {memory.overflow(recipe.data)}", Exit.INVALID)
    if args.format == "json":
        print(
            json.dumps(
                {
                    "recipe": recipe.name,
                    "capacity_gib": est.capacity_gib,
                    "breakdown_gib": est.breakdown,
                    "allocated_gib": est.allocated_gib,
                    "reserved_gib": est.reserved_gib,
                    "per_sample_gib": est.per_sample_gib,
                    "total_gib": est.total_gib,
                    "fraction": est.fraction,
                    "needed_fraction": est.needed_fraction,
                    "peak_phase": est.phase,
                    "micro_batch_size": est.micro_batch_size,
                    "gradient_accumulation_steps": est.accumulation,
                    "largest_micro_batch": est.largest_micro_batch,
                    "largest_micro_batch_under_90": est.largest_under(0.9),
                    "frames": frames,
                },
                indent=2,
            )
        )
        return Exit.OK
    steps = f" x accumulation {est.accumulation}" if est.accumulation > 1 else ""
    print(
        f"{recipe.name}: {memory.describe(recipe.data)}, micro batch {est.micro_batch_size}{steps}; peak in {est.phase}"
    )
    rows = [[k, f"{v:.2f}"] for k, v in est.breakdown.items()]
    rows.append(["total", f"{est.total_gib:.2f}"])
    sys.stdout.write(table(rows, ["PER RANK", "GiB"]))
    print(
        f"{est.fraction:.0%} of {est.capacity_gib:.2f} GiB (allocated {est.allocated_gib:.2f}, reserved {est.reserved_gib:.2f}; "
        f"activations {est.per_sample_gib:.3f} GiB per sample)"
    )
    print(
        f"largest micro batch that fits: {est.largest_micro_batch}, by what it allocates"
        f" ({est.needed_fraction:.0%} now); under 90% with the reserve: {est.largest_under(0.9)}"
    )
    print(f"activations per frame: {frames['said']}")
    return Exit.OK


def frame_source(doc: dict) -> dict:
    """Which image size the per-frame activations are counted at: the dataset's own, from its
    metadata on this disk, scaled from the size the part measured them at; else the part's
    (docs/preflight.md §dataset-memory-fit). {"from": "dataset"|"part"|"policy", "pixels", "said"}."""
    import os

    from registry import estimate as memory
    from registry import view
    from registry.run import preflight
    from registry.run.preflight import data, metadata

    recipe = view.of(doc)
    shape, entries = memory.frame_shape(recipe), preflight.dataset_entries(doc)
    if not entries:
        return {"from": "part", "pixels": None, "said": "the part's: the trainer makes its own data"}
    if shape is None:
        said = "the part's: the policy resizes every image itself, so the dataset's size changes nothing"
        return {"from": "part", "pixels": None, "said": said}
    part = f"the part's {shape[0]} x {shape[1]} (policy.memory.frame_shape)"
    try:
        # as recipe run and doctor read it: a relative root is the run folder's, not this folder's
        meta = metadata.find(entries[0], None, dict(os.environ))
    except metadata.Unreadable as e:
        return {"from": "part", "pixels": None, "said": f"{part}; dataset not read: {e}"}
    pixels = data.frame_pixels(meta, data.policy_of(recipe))
    if pixels is None:
        return {"from": "part", "pixels": None, "said": f"{part}; {meta.path} has no camera"}
    scale = pixels / (shape[0] * shape[1])
    seen = data.frame_seen(data.policy_of(recipe))
    if seen:  # the network sees the crop (or the resize), whatever the cameras' sizes
        how = f"the policy's {seen[0]} {seen[1][0]} x {seen[1][1]} of"
    else:
        how = "the mean image of" if len({(c.height, c.width) for c in meta.cameras}) > 1 else "the images of"
    return {
        "from": "dataset",
        "pixels": pixels,
        "path": str(meta.path),
        "cameras": [{"name": c.name, "height": c.height, "width": c.width} for c in meta.cameras],
        "said": f"at {how} {meta.path}'s {meta.camera_sizes()}, {scale:.3g} x {part}",
    }
