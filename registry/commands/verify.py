"""`recipe verify RUN_DIR|LOCK`: this host's environment against the one a run's lock records."""

from __future__ import annotations

import sys

from registry.errors import Exit

NAME = "verify"
HELP = "compare this host's environment with the one a run's lock records"
# `--help` lists them, with the codes every verb shares (registry/commands/__init__.py)
EXIT_CODES = {0: "this host has the recorded environment", 1: "it differs (each difference is printed)"}
EXAMPLES = """\
examples:
  recipe verify runs/tiny_ddp_cpu/20250101-120000
  recipe verify path/to/recipe.lock.yaml
"""
DESCRIPTION = (
    "Asks this host what `recipe run` recorded in the lock's environment section (Python; torch,"
    " accelerate, DeepSpeed, transformers and the trainer's package as the trainer's interpreter sees"
    " them; torch's CUDA; NVIDIA driver, GPU model and count; the dataset's revision) and prints each"
    " field that differs with its recorded and current value. Exit 0: the same; 1: some differ; 2: not"
    " a lock with an environment (recipe resolve writes none). Nothing the lock names is run: the"
    " trainer's interpreter is the one this host would use, --trainer-env or the launcher on PATH."
)


def register(subparsers) -> None:
    p = subparsers.add_parser(NAME, help=HELP, description=DESCRIPTION, epilog=EXAMPLES)
    p.add_argument("target", metavar="RUN_DIR|LOCK")
    p.add_argument(
        "--trainer-env",
        metavar="ENV",
        help="this host's environment for the trainer (as trainer.env); without it, the trainer's launcher on"
        " PATH is asked, never an interpreter the lock names",
    )
    p.set_defaults(func=run)


def run(args) -> int:
    from registry.run import envlock

    lock, content = envlock.read(args.target)
    recorded = content[envlock.ENVIRONMENT]
    current, note = envlock.current_for(content, lock, args.trainer_env)
    if note:
        print(f"recipe: note: {note}", file=sys.stderr)
    found = envlock.differences(recorded, current)
    for field, old, new in found:
        print(envlock.difference_line(field, old, new))
    asked = _asked(recorded.get("interpreter"), current.get("interpreter"))
    if found:
        count = f"{len(found)} field{'s' if len(found) > 1 else ''}"
        print(f"recipe: this host differs from the environment {lock} records in {count}{asked}")
        return Exit.INVALID
    print(f"recipe: this host has the environment {lock} records ({_summary(current)}){asked}")
    return Exit.OK


def _asked(before, now) -> str:
    from registry.run.envlock import shown

    if before == now:
        return ""
    return f" (the run asked {shown(before)}, this host {shown(now)})"


def _summary(env: dict) -> str:
    from registry.run.envlock import shown

    packages = env.get("packages") or {}
    parts = [f"Python {shown(env.get('python'))}"]
    parts += [f"{name} {shown(v)}" for name, v in packages.items()]
    gpus = f"{env.get('gpu_count')} x {env.get('gpu_model')}" if env.get("gpu_count") else "no GPU"
    return ", ".join(parts + [gpus])
