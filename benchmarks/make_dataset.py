"""Create a small, ACT-compatible LeRobotDataset offline with LeRobot 0.6.1's own API.

Usage: python3 benchmarks/make_dataset.py ROOT [--episodes 4] [--frames 50] [--fps 10] [--repo-id local/toy]

Run it with LeRobot's Python (benchmarks/lerobot_memory.py calls it). One 96 x 96 camera
(observation.images.top), 14-dim state and action.

ROOT must not exist yet (LeRobot refuses to create into an existing folder).
Images are stored as PNG files (use_videos=False), so no video encoding is needed;
LeRobot still needs the `av` package importable (lerobot.datasets imports it).
"""

import argparse
from pathlib import Path

import numpy as np
from lerobot.datasets.lerobot_dataset import LeRobotDataset

DIM = 14  # aloha-like: 14 joints
H = W = 96


def features() -> dict:
    joint_names = [f"joint_{i}" for i in range(DIM)]
    return {
        "observation.images.top": {
            "dtype": "image",
            "shape": (H, W, 3),
            "names": ["height", "width", "channels"],
        },
        "observation.state": {"dtype": "float32", "shape": (DIM,), "names": joint_names},
        "action": {"dtype": "float32", "shape": (DIM,), "names": joint_names},
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("root", type=Path)
    ap.add_argument("--repo-id", default="local/toy")
    ap.add_argument("--episodes", type=int, default=4)
    ap.add_argument("--frames", type=int, default=50)
    ap.add_argument("--fps", type=int, default=10)
    args = ap.parse_args()

    rng = np.random.default_rng(0)
    ds = LeRobotDataset.create(
        repo_id=args.repo_id,
        fps=args.fps,
        features=features(),
        root=args.root,
        robot_type="toy",
        use_videos=False,
    )
    for _ in range(args.episodes):
        phase = rng.uniform(0, 2 * np.pi, size=DIM)
        for t in range(args.frames):
            state = np.sin(phase + 0.1 * t).astype(np.float32)
            action = np.sin(phase + 0.1 * (t + 1)).astype(np.float32)
            img = rng.integers(0, 256, size=(H, W, 3), dtype=np.uint8)
            ds.add_frame(
                {
                    "observation.images.top": img,
                    "observation.state": state,
                    "action": action,
                    "task": "toy task",
                }
            )
        ds.save_episode()
    ds.finalize()
    print(f"dataset {args.repo_id} at {args.root}: {ds.meta.total_episodes} episodes, {ds.meta.total_frames} frames")


if __name__ == "__main__":
    main()
