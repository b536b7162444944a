"""The recipe against the dataset it points at (docs/preflight.md §dataset): cameras, state and
action sizes, image sizes against the crop and resize, the frame rate against the action
frequency, episode lengths against the chunk and history, frames against the global batch, and
the memory estimate at the dataset's own image size. Each check reads the typed recipe and the
dataset's metadata (registry/run/preflight/metadata.py) and returns Findings; every finding names
the dataset file it read."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from registry import view
from registry.run.preflight import rules
from registry.run.preflight.metadata import DatasetMeta
from registry.topology import world_size
from registry.validate.checks import DIFFUSION_HORIZON, Finding
from registry.view import Section

STATE, ACTION = "observation.state", "action"


@dataclass(frozen=True)
class Policy:
    """What the policy expects of its data: the recipe's settings, else its trainer's defaults,
    and the features a pretrained checkpoint was built with (config.json, where on this disk)."""

    recipe: Section
    defaults: dict
    pretrained: tuple[Path, dict] | None = None

    def setting(self, name: str):
        options = self.recipe.policy.options
        if options is not None and name in options:
            return view.plain(options[name])
        return self.defaults.get(name)

    def pretrained_shape(self, key: str) -> list | None:
        if not self.pretrained:
            return None
        found = self.pretrained[1].get(key)
        return found["shape"] if found else None

    @property
    def trainer(self) -> str:
        return self.recipe.trainer.kind

    @property
    def name(self) -> str:
        return {"lerobot": "LeRobot", "opentau": "OpenTau"}.get(self.trainer, "the trainer")

    @property
    def who(self) -> str:
        return f"{self.name}'s"


def policy_of(recipe: Section, pretrained: tuple[Path, dict] | None = None) -> Policy:
    return Policy(recipe, rules.upstream(recipe.trainer.kind, recipe.policy.type), pretrained)


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def cameras(meta: DatasetMeta, policy: Policy) -> list[Finding]:
    recipe, found = policy.recipe, []
    n, want = len(meta.cameras), recipe.dataset.num_cams
    if n != want:
        found.append(
            Finding(
                "error",
                ("dataset", "num_cams"),
                f"{meta.path} has {_plural(n, 'camera')} ({meta.camera_names()}) and the recipe declares"
                f" dataset.num_cams {want}",
                f"set dataset.num_cams={n} if the policy is to see all of them; the memory estimate and"
                " OpenTau's camera slots follow it",
            )
        )
    if policy.pretrained:
        config, features = policy.pretrained
        expected = [k for k, f in features.items() if f.get("type") == "VISUAL"]
        missing = [k for k in expected if k not in {c.name for c in meta.cameras}]
        if missing:
            found.append(
                Finding(
                    "error",
                    ("policy", "pretrained_path"),
                    f"{config} was trained on cameras {', '.join(expected)}; {meta.path} lacks"
                    f" {', '.join(missing)} (it has {meta.camera_names()})",
                    "rename the dataset's cameras to the checkpoint's (LeRobot's --rename_map), or train from scratch",
                )
            )
    return found


def _vector(meta: DatasetMeta, policy: Policy, key: str, limit_name: str, what: str) -> list[Finding]:
    size = meta.vectors.get(key)
    if size is None:
        return []
    found = []
    limit = policy.setting(limit_name)
    if isinstance(limit, int) and size > limit:
        found.append(
            Finding(
                "error",
                ("policy", "options", limit_name),
                f"{meta.path}: {key} has {size} values and {policy.who} {policy.recipe.policy.type} pads {what}"
                f" to {limit_name} {limit}: its {what} projection takes {limit} inputs, so the first step fails"
                " on the shapes",
                f"set policy.options.{limit_name}={size} or more (a pretrained checkpoint keeps its own)",
            )
        )
    shape = policy.pretrained_shape(key)
    if shape and shape[-1] != size and not (isinstance(limit, int) and shape[-1] == limit and size <= limit):
        found.append(
            Finding(
                "error",
                ("policy", "pretrained_path"),
                f"{policy.pretrained[0]} was trained with {key} of {shape[-1]} values; {meta.path} has {size}",
            )
        )
    return found


def state_size(meta: DatasetMeta, policy: Policy) -> list[Finding]:
    return _vector(meta, policy, STATE, "max_state_dim", "state")


def action_size(meta: DatasetMeta, policy: Policy) -> list[Finding]:
    return _vector(meta, policy, ACTION, "max_action_dim", "action")


def _pair(value) -> tuple[int, int] | None:
    if isinstance(value, (list, tuple)) and len(value) == 2 and all(isinstance(v, int) for v in value):
        return value[0], value[1]
    return None


def frame_seen(policy: Policy) -> tuple[str, tuple[int, int]] | None:
    """("crop", (h, w)) where the policy crops, ("resize", (h, w)) where it resizes, else None."""
    crop, resize = _pair(policy.setting("crop_shape")), _pair(policy.setting("resize_shape"))
    return ("crop", crop) if crop else ("resize", resize) if resize else None


def frame_pixels(meta: DatasetMeta, policy: Policy) -> float | None:
    """Pixels of the frame the policy's network sees: the crop where it crops, the resize where it
    resizes, else the dataset's mean camera image; None without cameras."""
    if meta.mean_pixels is None:
        return None
    seen = frame_seen(policy)
    return float(seen[1][0] * seen[1][1]) if seen else meta.mean_pixels


def image_size(meta: DatasetMeta, policy: Policy) -> list[Finding]:
    if not meta.cameras:
        return []
    found = []
    crop, resize = _pair(policy.setting("crop_shape")), _pair(policy.setting("resize_shape"))
    if crop and not resize:
        small = [c for c in meta.cameras if crop[0] > c.height or crop[1] > c.width]
        for c in small:
            found.append(
                Finding(
                    "error",
                    ("policy", "options", "crop_shape"),
                    f"{meta.path}: {c.name} is {c.shape} and the policy crops {crop[0]} x {crop[1]} out of it"
                    f" ({policy.who} config refuses a crop that does not fit the image)",
                )
            )
    if policy.recipe.policy.type == "diffusion" and len({(c.height, c.width) for c in meta.cameras}) > 1:
        shapes = ", ".join(f"{c.name} {c.shape}" for c in meta.cameras)
        found.append(
            Finding(
                "error",
                ("dataset", "num_cams"),
                f"{meta.path}: cameras of different sizes ({shapes}); {policy.who} diffusion policy expects every"
                " camera at one size",
                "resize the cameras to one size, or set policy.options.resize_shape",
            )
        )
    return found


def fps(meta: DatasetMeta, policy: Policy) -> list[Finding]:
    recipe = policy.recipe
    want = recipe.dataset.action_freq
    if want is None or meta.fps is None or abs(meta.fps - want) < 1e-6:
        return []
    chunk = recipe.policy.chunk_size
    if policy.trainer == "opentau":
        if meta.fps >= want:
            return []  # OpenTau resamples down to action_freq: what it is for
        return [
            Finding(
                "warning",
                ("dataset", "action_freq"),
                f"{meta.path} is recorded at {meta.fps:g} fps and OpenTau resamples it up to dataset.action_freq"
                f" {want:g}: actions between recorded frames are interpolated"
                f" ({recipe.dataset.vector_resample_strategy or 'its default'} strategy), not observed",
                "set dataset.action_freq to the dataset's fps or lower",
            )
        ]
    spans = (
        f": a chunk of {chunk} actions spans {chunk / meta.fps:.2f} s instead of {chunk / want:.2f} s" if chunk else ""
    )
    return [
        Finding(
            "error",
            ("dataset", "action_freq"),
            f"{meta.path} is recorded at {meta.fps:g} fps and the recipe assumes dataset.action_freq {want:g};"
            f" {policy.name} trains at the dataset's own rate{spans}",
            f"set dataset.action_freq={meta.fps:g} and scale policy.chunk_size with it, or use a dataset recorded"
            f" at {want:g} fps",
        )
    ]


def _chunk(policy: Policy) -> int | None:
    chunk = policy.recipe.policy.chunk_size
    if chunk is None and policy.trainer == "lerobot" and policy.recipe.policy.type == "diffusion":
        return DIFFUSION_HORIZON
    return chunk


def _mean_episode(meta: DatasetMeta) -> float | None:
    if not meta.episodes or meta.frames is None:
        return None
    return meta.frames / meta.episodes


def episode_length(meta: DatasetMeta, policy: Policy) -> list[Finding]:
    mean = _mean_episode(meta)
    if mean is None:
        return []
    found, p = [], policy.recipe.policy
    reach = f"episodes average {mean:.0f} frames ({meta.frames} in {meta.episodes})"
    chunk = _chunk(policy)
    if chunk and chunk > mean:
        found.append(
            Finding(
                "warning",
                ("policy", "chunk_size"),
                f"{meta.path}: {reach} and an action chunk reaches {chunk} frames ahead: most chunks run past"
                " the episode's end and train on padding",
            )
        )
    history = (p.n_obs_steps - 1) * (p.history_interval or 1) + 1
    if history > mean:
        found.append(
            Finding(
                "warning",
                ("policy", "n_obs_steps"),
                f"{meta.path}: {reach} and a sample looks {history} frames back: most histories begin"
                " before the episode and repeat its first frame",
            )
        )
    return found


def frames(meta: DatasetMeta, policy: Policy) -> list[Finding]:
    """Frames left to sample against one global batch. OpenTau draws with replacement, so only
    LeRobot's (and a command trainer's) epochs are counted."""
    mean = _mean_episode(meta)
    if mean is None or policy.trainer == "opentau":
        return []
    recipe = policy.recipe
    chosen = recipe.dataset.episodes
    count = len([e for e in chosen if e < meta.episodes]) if chosen else meta.episodes
    dropped = policy.setting("drop_n_last_frames") or 0
    usable = count * max(0.0, mean - dropped)
    batch = recipe.train.micro_batch_size * recipe.train.gradient_accumulation_steps * world_size(recipe)
    which = f"{_plural(count, 'episode')} of about {mean:.0f} frames"
    if dropped:
        which += f", less the last {dropped} of each that {policy.who} sampler drops"
    if usable < 1:
        return [
            Finding(
                "error",
                ("train", "micro_batch_size"),
                f"{meta.path}: {which}, leave no frame to sample: the data loader yields nothing, and"
                f" {policy.who} training loop waits on it without end",
                "train on more or longer episodes",
            )
        ]
    if usable < batch:
        return [
            Finding(
                "warning",
                ("train", "micro_batch_size"),
                f"{meta.path}: {which}, give about {usable:.0f} frames, fewer than one global batch of {batch}:"
                " every step draws the same frames again",
            )
        ]
    return []


def memory_fit(meta: DatasetMeta, policy: Policy) -> list[Finding]:
    """The estimate again, its per-frame activations at the dataset's image size."""
    from registry import estimate as memory

    recipe = policy.recipe
    at, pixels = memory.frame_shape(recipe), frame_pixels(meta, policy)
    if at is None or pixels is None:
        return []
    est = memory.estimate(recipe, pixels)
    if est is None or not est.finite or est.needed_fraction <= 1.0:
        return []
    return [
        Finding(
            "error",
            ("train", "micro_batch_size"),
            f"{meta.path}: at the images of its {meta.camera_sizes()} (the part measured {at[0]} x {at[1]},"
            " policy.memory.frame_shape),"
            f" a step needs about {est.total_gib:.1f} GiB per rank of {est.capacity_gib:.1f} GiB"
            f" ({est.fraction:.0%}); the largest micro batch that fits is {est.largest_micro_batch}",
        )
    ]


CHECKS = {
    "cameras": cameras,
    "state-size": state_size,
    "action-size": action_size,
    "image-size": image_size,
    "fps": fps,
    "episode-length": episode_length,
    "frames": frames,
    "memory-fit": memory_fit,
}
