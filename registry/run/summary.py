"""The lines `recipe run` ends with: how the run ended, how far it got and in how long, its last
loss, where its model, checkpoints, metrics and log are, and, when it stopped or failed with a
checkpoint to go on from, the command that resumes it."""

from __future__ import annotations

import json
import shlex
import signal
from dataclasses import dataclass
from pathlib import Path

from registry import view
from registry.compose import Recipe
from registry.run.resume import RESUMABLE

# Exit codes of a launcher ended by a signal the user or a scheduler sends to stop a run.
STOPPED = {128 + s for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
# Where each trainer leaves its output, relative to the run folder (trainers/*.py, train/).
OUTPUT = {
    "builtin": {"model": "checkpoints/last/model.safetensors", "checkpoints": "checkpoints"},
    "lerobot": {"model": "output/checkpoints/last/pretrained_model", "checkpoints": "output/checkpoints"},
    "opentau": {"model": "output/checkpoints/last/pretrained_model", "checkpoints": "output/checkpoints"},
}


@dataclass(frozen=True)
class Progress:
    step: int | None = None  # the last step logged
    loss: float | None = None  # its loss
    ended: bool = False  # the trainer logged its end


def progress(folder: Path) -> Progress:
    """What metrics.jsonl (the built-in trainer's) says; nothing where there is none. A line cut
    short by a kill is skipped."""
    step, loss, ended = None, None, False
    try:
        with open(folder / "metrics.jsonl", encoding="utf-8") as f:
            for line in f:
                try:
                    record = json.loads(line)
                except ValueError:
                    continue
                if not isinstance(record, dict):
                    continue
                if record.get("event") == "end":
                    ended = True
                if isinstance(record.get("loss"), (int, float)) and isinstance(record.get("step"), int):
                    step, loss = record["step"], record["loss"]
    except OSError:
        pass
    return Progress(step, loss, ended)


def lines(
    recipe: Recipe,
    target: str,
    overrides: list[str],
    folder: Path,
    code: int,
    seconds: float,
    waived: dict[str, str] | None = None,
) -> list[str]:
    """`target` is the NAME or FILE the run was given: the resume command repeats it, since a
    file's recipe name is no name `recipe run` can find."""
    doc = view.of(recipe.data)
    kind = doc.trainer.kind
    status = "finished" if code == 0 else f"stopped (exit {code})" if code in STOPPED else f"failed (exit {code})"
    done = progress(folder)
    facts = []
    if done.step is not None:
        facts.append(f"step {done.step}/{doc.train.steps}")
    facts.append(f"{duration(seconds)} wall time")
    if done.loss is not None:
        facts.append(f"final loss {done.loss:.4g}")
    out = [f"recipe: {status}: {recipe.name}, {', '.join(facts)}"]
    where = {name: folder / rel for name, rel in OUTPUT.get(kind, {}).items()}
    where |= {"metrics": folder / "metrics.jsonl", "log": folder / "launch.log"}
    shown = {name: path for name, path in where.items() if path.exists()}
    width = max((len(name) for name in shown), default=0)
    for name, path in shown.items():
        out.append(f"  {name:<{width}}  {_shown(path)}")
    if code != 0 and kind in RESUMABLE and doc.train.checkpoint.resumable and "checkpoints" in shown:
        waivers = [w for rule, reason in (waived or {}).items() for w in ("--waive", f"{rule}={reason}")]
        command = shlex.join(["recipe", "run", target, *overrides, "--resume", str(folder), *waivers])
        out.append(f"  go on with: {command}")
    return out


def _shown(path: Path) -> str:
    """A path, with where a `last` link points (the step it holds)."""
    parts = path.parts
    if "last" in parts:
        link = Path(*parts[: parts.index("last") + 1])
        if link.is_symlink():
            return f"{path} (last = {link.readlink()})"
    return str(path)


def duration(seconds: float) -> str:
    """1h02m, 3m05s, 41.2s."""
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, secs = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"
