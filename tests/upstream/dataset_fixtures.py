"""Make the dataset twins of tests/data/datasets/ with LeRobot's own API (LeRobotDataset.create,
add_frame, save_episode, finalize; lerobot 0.6.1) and keep only what the pre-flight reads, each
twin's meta/info.json.

Usage: RECIPE_LEROBOT_PYTHON tests/upstream/dataset_fixtures.py OUT

Run with LeRobot's Python (it needs lerobot's `dataset` extra: datasets, pandas, pyarrow, av).
Each twin differs from `toy` (the dataset of benchmarks/make_dataset.py: one 96 x 96 camera,
14-dim state and action, 4 episodes of 50 frames at 10 fps) in one respect. Images are stored as
PNG (use_videos=False), so nothing is encoded. tests/test_preflight.py regenerates them and
compares with the committed files where RECIPE_LEROBOT_PYTHON is set.
"""

import json
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np
from lerobot.datasets.lerobot_dataset import LeRobotDataset

TOY = {"cameras": {"top": (96, 96)}, "dim": 14, "fps": 10, "episodes": 4, "frames": 50}
TWINS = {
    "toy": {},
    "two-cameras": {"cameras": {"top": (96, 96), "wrist": (96, 96)}},
    "mixed-cameras": {"cameras": {"top": (96, 96), "wrist": (64, 64)}},
    "wide-state": {"dim": 40},
    "small-image": {"cameras": {"top": (64, 64)}},
    "fps-30": {"fps": 30},
    "few-frames": {"episodes": 2, "frames": 5},
}


def features(spec: dict) -> dict:
    joints = [f"joint_{i}" for i in range(spec["dim"])]
    out = {
        f"observation.images.{name}": {"dtype": "image", "shape": (h, w, 3), "names": ["height", "width", "channels"]}
        for name, (h, w) in spec["cameras"].items()
    }
    out["observation.state"] = {"dtype": "float32", "shape": (spec["dim"],), "names": joints}
    out["action"] = {"dtype": "float32", "shape": (spec["dim"],), "names": joints}
    return out


def make(name: str, spec: dict, scratch: Path) -> Path:
    rng = np.random.default_rng(0)
    root = scratch / name
    ds = LeRobotDataset.create(
        repo_id=f"local/{name}", fps=spec["fps"], features=features(spec), root=root, robot_type="toy", use_videos=False
    )
    for _ in range(spec["episodes"]):
        phase = rng.uniform(0, 2 * np.pi, size=spec["dim"])
        for t in range(spec["frames"]):
            frame = {
                f"observation.images.{cam}": rng.integers(0, 256, size=(h, w, 3), dtype=np.uint8)
                for cam, (h, w) in spec["cameras"].items()
            }
            frame["observation.state"] = np.sin(phase + 0.1 * t).astype(np.float32)
            frame["action"] = np.sin(phase + 0.1 * (t + 1)).astype(np.float32)
            frame["task"] = "toy task"
            ds.add_frame(frame)
        ds.save_episode()
    ds.finalize()
    return root / "meta" / "info.json"


def main() -> None:
    out = Path(sys.argv[1])
    with tempfile.TemporaryDirectory() as scratch:
        for name, change in TWINS.items():
            info = make(name, {**TOY, **change}, Path(scratch))
            target = out / name / "meta" / "info.json"
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(info, target)
            print(name, json.loads(target.read_text())["total_frames"], "frames")


if __name__ == "__main__":
    main()
