"""A dataset's own description, read without downloading it: LeRobot's `meta/info.json` (v3.0,
and the v2.x files of the same shape) from `dataset.root`, or from the local Hugging Face cache
where LeRobot keeps what it downloaded (docs/preflight.md §reading). Nothing is fetched: a
dataset that is not on this disk is reported as unreadable, once, and the checks that need it
do not run.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from registry import untrusted

INFO = "meta/info.json"
INFO_MAX_BYTES = 16 << 20
CONFIG_MAX_BYTES = 4 << 20  # a checkpoint's config.json: a few KiB of settings
REF_MAX_BYTES = 256  # a hub cache ref: one commit hash
VISUAL = ("image", "video")


@dataclass(frozen=True)
class Camera:
    name: str  # the feature's key: observation.images.top
    height: int
    width: int

    @property
    def shape(self) -> str:
        return f"{self.height} x {self.width}"


@dataclass(frozen=True)
class DatasetMeta:
    path: Path  # the info.json read: every finding names it
    fps: float | None
    episodes: int | None
    frames: int | None
    cameras: tuple[Camera, ...] = ()
    vectors: dict[str, int] = field(default_factory=dict)  # 1-D features by key: observation.state -> 14
    version: str | None = None

    @property
    def mean_pixels(self) -> float | None:
        """Pixels of the average camera image, or None without cameras."""
        if not self.cameras:
            return None
        return sum(c.height * c.width for c in self.cameras) / len(self.cameras)

    def camera_names(self) -> str:
        return ", ".join(c.name for c in self.cameras) or "none"

    def camera_sizes(self) -> str:
        """How many cameras and each one's height x width: `2 cameras (observation.images.top
        480 x 640, observation.images.wrist 240 x 320)`, what a finding at their size says it used."""
        count = len(self.cameras)
        sizes = ", ".join(f"{c.name} {c.shape}" for c in self.cameras)
        return f"{count} camera{'' if count == 1 else 's'} ({sizes})"


class Unreadable(Exception):
    """Why a dataset's metadata cannot be read here: one note, never an error."""


def lerobot_home(env: dict[str, str]) -> Path:
    """LeRobot's cache: HF_LEROBOT_HOME, else HF_HOME/lerobot, else ~/.cache/huggingface/lerobot."""
    if env.get("HF_LEROBOT_HOME"):
        return Path(env["HF_LEROBOT_HOME"]).expanduser()
    if env.get("HF_HOME"):
        return Path(env["HF_HOME"]).expanduser() / "lerobot"
    cache = env.get("XDG_CACHE_HOME") or os.path.join(env.get("HOME") or str(Path.home()), ".cache")
    return Path(cache) / "huggingface" / "lerobot"


MAX_SIDE = 1 << 16  # pixels: past any camera a robot carries
_REF = re.compile(r"[0-9A-Za-z_.-]{1,128}")  # a commit as the hub cache names its snapshot folders


def candidates(entry: dict, base: Path | None, env: dict[str, str]) -> list[Path]:
    """Where a dataset entry's info.json would be, in the order LeRobot looks: `root` when given
    (relative to `base`, the folder the trainer runs in; None for a run folder not made yet);
    else the repo's folder in LeRobot's cache, then the revision's snapshot in its hub cache (the newest snapshot when the revision
    has no ref there)."""
    if entry.get("root"):
        root = Path(os.path.expanduser(str(entry["root"])))
        if not root.is_absolute() and base is None:
            raise Unreadable(
                f"dataset.root {entry['root']} is relative to the run folder, which this run makes new:"
                " the trainer finds nothing there (hint: an absolute dataset.root, or --output-dir a"
                " folder that holds it)"
            )
        return [(root if root.is_absolute() else base / root) / INFO]
    repo = entry.get("repo_id")
    if not repo:
        return []
    home = lerobot_home(env)
    found = [home / repo / INFO]
    hub = home / "hub" / ("datasets--" + repo.replace("/", "--"))
    ref = hub / "refs" / str(entry.get("revision") or "main")
    snapshots = []
    try:
        if ref.is_file():
            commit = untrusted.read_text(ref, REF_MAX_BYTES).strip()
            snapshots = [hub / "snapshots" / commit] if _REF.fullmatch(commit) and commit.strip(".") else []
        elif (hub / "snapshots").is_dir():
            named = [p for p in (hub / "snapshots").iterdir() if _REF.fullmatch(p.name)]  # a name printed later
            snapshots = sorted(named, key=lambda p: p.stat().st_mtime, reverse=True)
    except (OSError, untrusted.Rejected):
        pass
    return found + [s / INFO for s in snapshots]


def find(entry: dict, base: Path | None, env: dict[str, str]) -> DatasetMeta:
    """The first readable info.json of an entry ({repo_id, root, revision}); Unreadable naming
    where it looked otherwise."""
    places = candidates(entry, base, env)
    if not places:
        raise Unreadable("the recipe names no dataset (dataset.repo_id or dataset.root)")
    for path in places:
        if os.path.lexists(path):  # a FIFO or a device there is read, and refused, not passed over
            return read(path)
    looked = ", ".join(str(p) for p in places[:2])
    name = entry.get("repo_id") or entry.get("root")
    raise Unreadable(f"{name}: no local {INFO} (looked in {looked}); not downloaded")


def read(path: Path) -> DatasetMeta:
    """The metadata an info.json holds, through the guarded reader (docs/failure-modes.md §68): a
    value of the wrong type is left unread, as if absent, and the checks that need it say nothing."""
    try:
        info = untrusted.read_json(path, INFO_MAX_BYTES)
    except untrusted.Rejected as e:
        raise Unreadable(str(e)) from None
    if not isinstance(info, dict) or not isinstance(info.get("features"), dict):
        raise Unreadable(f"{path}: no `features` mapping; not a LeRobot dataset's info.json")
    cameras, vectors = [], {}
    for name, feature in info["features"].items():
        if not isinstance(feature, dict) or not isinstance(feature.get("shape"), list):
            continue
        shape = feature["shape"]
        if feature.get("dtype") in VISUAL:
            size = _height_width(shape, feature.get("names"))
            if size:
                cameras.append(Camera(str(name), *size))
        elif len(shape) == 1 and _count(shape[0]):
            vectors[str(name)] = shape[0]
    return DatasetMeta(
        path,
        _number(info.get("fps")),
        info.get("total_episodes") if _count(info.get("total_episodes")) else None,
        info.get("total_frames") if _count(info.get("total_frames")) else None,
        tuple(cameras),
        vectors,
        info.get("codebase_version") if isinstance(info.get("codebase_version"), str) else None,
    )


def _height_width(shape: list, names) -> tuple[int, int] | None:
    """(height, width) of an image feature: by its axis names where it has them (LeRobot writes
    [height, width, channels]), else channels last unless the first axis looks like channels."""
    if len(shape) != 3 or not all(_count(n) and 0 < n <= MAX_SIDE for n in shape):
        return None  # no camera is 0 pixels wide or wider than MAX_SIDE: not an image we can judge
    if isinstance(names, list) and len(names) == 3:
        axes = [str(n).lower() for n in names]
        if "height" in axes and "width" in axes:
            return shape[axes.index("height")], shape[axes.index("width")]
    return (shape[1], shape[2]) if shape[0] in (1, 3, 4) and shape[2] not in (1, 3, 4) else (shape[0], shape[1])


def _count(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _number(value) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0 else None


def pretrained_features(path: str | None, base: Path | None, env: dict[str, str]) -> tuple[Path, dict] | None:
    """A pretrained policy's own config (LeRobot and OpenTau write `input_features` and
    `output_features` into its config.json): from a local folder, or the snapshot the Hugging Face
    hub cache holds for a hub id. None where it is not on this disk; Unreadable where a config.json
    is there and cannot be read (a FIFO, a device, too large, not JSON, features of the wrong kind)."""
    if not path:
        return None
    local = Path(os.path.expanduser(path))
    # relative to the folder the trainer runs in: none yet for a new run folder, so nothing local
    places = [(local if local.is_absolute() else base / local) / "config.json"] if local.is_absolute() or base else []
    if "/" in path and not local.is_absolute():
        hub = Path(env.get("HF_HUB_CACHE") or Path(env.get("HF_HOME") or Path.home() / ".cache/huggingface") / "hub")
        snapshots = hub / ("models--" + path.replace("/", "--")) / "snapshots"
        try:
            places += [s / "config.json" for s in sorted(snapshots.iterdir())] if snapshots.is_dir() else []
        except OSError:
            pass
    for place in places:
        if not os.path.lexists(place):
            continue
        try:
            config = untrusted.read_json(place, CONFIG_MAX_BYTES, nonfinite=True)  # the shapes are checked
        except untrusted.Rejected as e:
            raise Unreadable(str(e)) from None
        if not isinstance(config, dict):
            raise Unreadable(f"{place}: {type(config).__name__}, not a mapping; not a policy's config.json")
        features = {}
        for side in ("input_features", "output_features"):
            declared = config.get(side)
            if declared is None:
                continue
            if not isinstance(declared, dict):
                raise Unreadable(f"{place}: {side} is {type(declared).__name__}, not a mapping of features")
            for name, feature in declared.items():  # a feature of another shape is skipped
                shape = feature.get("shape") if isinstance(feature, dict) else None
                if isinstance(shape, list) and shape and all(_count(n) for n in shape):
                    features[name] = {"type": feature.get("type"), "shape": shape}
        return place, features
    return None
