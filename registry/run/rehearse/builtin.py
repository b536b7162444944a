"""Rehearsing a recipe of the built-in trainer: its deterministic synthetic episodes
(dataset.synthetic) in place of any dataset; its policy always starts from random weights."""

from __future__ import annotations

from pathlib import Path

LOSS_LINE = None  # the built-in trainer writes metrics.jsonl, one line per logged step


def note() -> str:
    return "weights random; the built-in trainer's synthetic episodes (dataset.synthetic)"


def make(doc: dict, out: Path, python: str, samples: int, log: Path) -> dict:
    return {}


def overrides(doc: dict, made: dict, steps: int) -> dict[str, object]:
    synthetic = (doc.get("dataset") or {}).get("synthetic") or {}
    return {"dataset.root": None, "dataset.synthetic": {**synthetic}, "train.log_every": 1}


def env(made: dict) -> dict[str, str]:
    return {}
