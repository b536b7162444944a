"""Train LeRobot itself through `recipe run`, then read back what LeRobot made of the recipe.

For each cell: `recipe run CELL trainer.env=ENV dataset.repo_id=... dataset.root=... <overrides>`
in a fresh run folder, then from that folder:
  - the loss LeRobot logged at each log step (its own `loss:` field, averaged over ranks): it must fall;
  - the checkpoints LeRobot wrote (output/checkpoints/<step>/pretrained_model/model.safetensors);
  - LeRobot's saved train_config.json against the recipe: lr, batch size, steps, seed, save
    frequency, optimizer and scheduler, the preset turned off.

    python benchmarks/lerobot_e2e.py --env ENV --dataset-root ROOT [--repo-id local/toy]
        [--cell act/ddp/2xH100 ...] [--steps 200] [-o results.json] [--allow-hardware-mismatch]

ENV is LeRobot's own environment (a virtualenv folder or its python); the dataset is made with
LeRobot's API (shared/gpu/make_dataset.py). Exit 0 when every cell passes every check.
Commands and results for 2 GPUs: benchmarks/results/trainers_gpu.md.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LOSS = re.compile(r"(?<![\w])step:(\S+) .*?(?<![\w])loss:(\S+)")


def losses(log: str) -> list[tuple[str, float]]:
    """(step, loss) from LeRobot's log lines; tqdm shares lines with them after a carriage return."""
    found = []
    for line in re.split(r"[\r\n]", log):
        match = LOSS.search(line)
        if match:
            found.append((match.group(1), float(match.group(2))))
    return found


def launch(cell: str, overrides: list[str], folder: Path, allow_mismatch: bool, env: dict | None = None):
    """`recipe run CELL OVERRIDES --output-dir FOLDER`: (command, completed process, wall seconds, the
    run's launch.log, or the command's own output when the run folder has none)."""
    command = [sys.executable, "-m", "registry", "run", cell, *overrides, "--output-dir", str(folder)]
    if allow_mismatch:
        command.append("--allow-hardware-mismatch")
    start = time.time()
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, env=env)
    wall = time.time() - start
    log = (folder / "launch.log").read_text() if (folder / "launch.log").is_file() else done.stdout + done.stderr
    return command, done, wall, log


def recipe_values(cell: str, overrides: list[str]) -> dict:
    out = subprocess.run(
        [sys.executable, "-m", "registry", "show", cell, *overrides, "--format", "json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout)


def expected(doc: dict) -> dict:
    train = doc["train"]
    return {
        "batch_size": train["micro_batch_size"],
        "steps": train["steps"],
        "seed": train["seed"],
        "save_freq": train["checkpoint"]["every"] or train["steps"],
        "log_freq": train["log_every"],
        "use_policy_training_preset": False,
        "optimizer.type": train["optimizer"]["type"],
        "optimizer.lr": train["optimizer"]["lr"],
        "optimizer.weight_decay": train["optimizer"]["weight_decay"],
        "optimizer.grad_clip_norm": train["optimizer"]["grad_clip_norm"] or 0,
        "scheduler.num_warmup_steps": train["scheduler"]["warmup_steps"],
        "policy.type": doc["policy"]["type"],
        "policy.chunk_size": doc["policy"].get("chunk_size"),
    }


def dig(config: dict, dotted: str):
    for key in dotted.split("."):
        config = (config or {}).get(key)
    return config


def one(cell: str, args) -> dict:
    folder = Path(tempfile.mkdtemp(prefix="lerobot-e2e-")) / "run"
    overrides = [
        f"trainer.env={args.env}",
        f"dataset.repo_id={args.repo_id}",
        f"dataset.root={args.dataset_root}",
        f"train.steps={args.steps}",
        f"train.checkpoint.every={args.steps // 2}",
        f"train.log_every={max(1, args.steps // 20)}",
        "train.num_workers=2",
        "policy.options.pretrained_backbone_weights=null",  # ResNet weights need a download
        *args.override,
    ]
    command, done, wall, log = launch(cell, overrides, folder, args.allow_hardware_mismatch)
    series = losses(log)
    steps = sorted((folder / "output" / "checkpoints").glob("[0-9]*")) if folder.is_dir() else []
    saved = steps[-1] / "pretrained_model" / "train_config.json" if steps else None
    config = json.loads(saved.read_text()) if saved and saved.is_file() else {}
    want = expected(recipe_values(cell, overrides))
    mismatched = {k: [dig(config, k), v] for k, v in want.items() if v is not None and dig(config, k) != v}
    result = {
        "cell": cell,
        "command": " ".join(command[1:]),
        "rc": done.returncode,
        "wall_s": round(wall, 1),
        "loss_first": series[0] if series else None,
        "loss_last": series[-1] if series else None,
        "loss_falls": bool(series) and series[-1][1] < series[0][1],
        "checkpoints": [p.name for p in steps],
        "model_saved": bool(steps) and (steps[-1] / "pretrained_model" / "model.safetensors").is_file(),
        "saved_config_matches": bool(config) and not mismatched,
        "mismatched": mismatched,
        "saved_config": {k: dig(config, k) for k in want},
    }
    result["ok"] = (
        result["rc"] == 0 and result["loss_falls"] and result["model_saved"] and result["saved_config_matches"]
    )
    if not result["ok"]:
        result["tail"] = log[-3000:]
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", required=True, help="LeRobot's environment (trainer.env)")
    parser.add_argument("--dataset-root", required=True)
    parser.add_argument("--repo-id", default="local/toy")
    parser.add_argument("--cell", action="append", help="default: act/ddp/2xH100 and act/fsdp/2xH100")
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--override", action="append", default=[], help="more KEY=VALUE for every cell")
    parser.add_argument("--allow-hardware-mismatch", action="store_true")
    parser.add_argument("-o", "--output", help="write the results as JSON")
    args = parser.parse_args()
    results = []
    for cell in args.cell or ["act/ddp/2xH100", "act/fsdp/2xH100"]:
        result = one(cell, args)
        results.append(result)
        print(json.dumps({k: v for k, v in result.items() if k not in ("tail", "saved_config")}), flush=True)
    if args.output:
        Path(args.output).write_text(json.dumps(results, indent=1) + "\n")
    return 0 if all(r["ok"] for r in results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
