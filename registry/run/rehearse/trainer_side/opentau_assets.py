"""What an OpenTau rehearsal trains on, made on this machine with nothing fetched (docs/rehearsal.md).

    python opentau_assets.py SPEC.json

Runs in the trainer's environment (trainer.env), never in the project's: it imports opentau,
transformers and tokenizers, not `registry`. SPEC.json (written by registry/run/rehearse/opentau.py):

    {"out": DIR, "cameras": N, "image_size": [H, W], "state_dim": D, "action_dim": D, "fps": F,
     "episodes": E, "frames": T, "chunk": C, "seed": S, "text_vocab": V, "fast_vocab": V,
     "tokenizer_ids": ["google/gemma-3-4b-pt", ...]}

It writes under DIR:
  - dataset/: a LeRobot v2.1 dataset made with OpenTau's own LeRobotDataset.create / add_frame /
    save_episode: N cameras of H x W images, state and action vectors of D, E episodes of T frames
    at F fps. The motion is smooth (a few sines a dimension) and the images move with it, so the
    policy has something learnable and the statistics have no zero range;
  - hf/hub/models--ORG--NAME/: for each tokenizer id OpenTau loads by name, the cache layout that
    transformers resolves offline (refs/main and snapshots/<id>/): a byte-level BPE trained here
    on the rehearsal's prompts, with Gemma's special ids (<pad> 0, <eos> 1, <bos> 2, <unk> 3);
  - fast/: a FAST-style action tokenizer fitted on the dataset's normalised action chunks
    (fast_tokenizer.py).
Prints one JSON line: {"dataset", "hf_home", "fast", "mapping", "frames", "text_vocab", "fast_vocab"}.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
from pathlib import Path

os.environ.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", HF_DATASETS_OFFLINE="1", WANDB_MODE="disabled")

import numpy as np

SPECIALS = ["<pad>", "<eos>", "<bos>", "<unk>"]  # Gemma's ids 0..3, which OpenTau's policies assume
TASKS = ["pick up the red block", "push the green cube to the left", "open the top drawer", "stack the two cups"]
INDICATORS = ["Task: ", "State: ", "Action: ", "Subtask: ", ";\n ", ", "]  # what OpenTau's prompts add


def motion(rng, frames: int, dims: int, fps: float) -> np.ndarray:
    """(frames, dims): each dimension a sum of two slow sines of its own phase and amplitude."""
    t = np.arange(frames)[:, None] / fps
    freq = rng.uniform(0.1, 0.8, size=(2, dims))
    phase = rng.uniform(0, 2 * np.pi, size=(2, dims))
    amp = rng.uniform(0.2, 1.0, size=(2, dims))
    return (
        amp[0] * np.sin(2 * np.pi * freq[0] * t + phase[0]) + amp[1] * np.sin(2 * np.pi * freq[1] * t + phase[1])
    ).astype(np.float32)


def image(h: int, w: int, shift: float, camera: int) -> np.ndarray:
    """A smooth picture that moves with the state: compresses well as PNG, not constant."""
    y, x = np.mgrid[0:h, 0:w].astype(np.float32)
    r = 0.5 + 0.5 * np.sin((x / w + shift) * 2 * np.pi * (camera + 1))
    g = 0.5 + 0.5 * np.cos((y / h - shift) * 2 * np.pi)
    b = 0.5 + 0.5 * np.sin(((x + y) / (h + w) + shift * 0.5) * 2 * np.pi)
    return (np.stack([r, g, b], axis=-1) * 255).astype(np.uint8)


def write_dataset(spec: dict, root: Path) -> dict:
    from opentau.datasets.lerobot_dataset import LeRobotDataset

    h, w = spec["image_size"]
    cams = [f"observation.images.camera{i}" for i in range(spec["cameras"])]
    features = {
        **{c: {"dtype": "image", "shape": (h, w, 3), "names": ["height", "width", "channels"]} for c in cams},
        "observation.state": {"dtype": "float32", "shape": (spec["state_dim"],), "names": None},
        "action": {"dtype": "float32", "shape": (spec["action_dim"],), "names": None},
    }
    fps = round(spec["fps"])
    dataset = LeRobotDataset.create("local/rehearsal", fps, root=root, features=features, use_videos=False)
    rng = np.random.default_rng(spec["seed"])
    actions = []
    for episode in range(spec["episodes"]):
        state = motion(rng, spec["frames"] + 1, spec["state_dim"], fps)
        action = motion(rng, spec["frames"], spec["action_dim"], fps)
        actions.append(action)
        for t in range(spec["frames"]):
            frame = {c: image(h, w, float(state[t, 0]) * 0.25 + t / spec["frames"], i) for i, c in enumerate(cams)}
            frame.update({"observation.state": state[t], "action": action[t], "task": TASKS[episode % len(TASKS)]})
            dataset.add_frame(frame)
        dataset.save_episode()
    mapping = {f"camera{i}": c for i, c in enumerate(cams)}
    mapping.update(state="observation.state", actions="action", prompt="task", response="response")
    return {"mapping": mapping, "actions": np.stack(actions)}


def write_text_tokenizer(spec: dict, hf_home: Path) -> int:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    bpe = Tokenizer(models.BPE(unk_token="<unk>"))
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    size = max(len(SPECIALS) + 256, min(spec["text_vocab"], 1024))
    trainer = trainers.BpeTrainer(
        vocab_size=size,
        special_tokens=SPECIALS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    corpus = [f"Task: {t}, " for t in TASKS] + INDICATORS + TASKS
    bpe.train_from_iterator(corpus * 4, trainer=trainer)
    if bpe.get_vocab_size() > spec["text_vocab"]:
        raise SystemExit(
            f"the text tokenizer needs {bpe.get_vocab_size()} ids; the model's vocabulary has {spec['text_vocab']}"
        )
    fast = PreTrainedTokenizerFast(
        tokenizer_object=bpe, pad_token="<pad>", eos_token="<eos>", bos_token="<bos>", unk_token="<unk>"
    )
    for repo in spec["tokenizer_ids"]:
        org, name = repo.split("/", 1)
        cache = hf_home / "hub" / f"models--{org}--{name}"
        revision = hashlib.sha1(repo.encode()).hexdigest()  # a 40-hex id, as the hub's commits are
        snapshot = cache / "snapshots" / revision
        fast.save_pretrained(snapshot)
        (cache / "refs").mkdir(parents=True, exist_ok=True)
        (cache / "refs" / "main").write_text(revision)
    return bpe.get_vocab_size()


def chunks(actions: np.ndarray, chunk: int) -> np.ndarray:
    """Every action chunk of the dataset, min-max normalised to [-1, 1] as OpenTau feeds FAST."""
    flat = actions.reshape(-1, actions.shape[-1])
    low, high = flat.min(axis=0), flat.max(axis=0)
    scaled = 2 * (actions - low) / np.maximum(high - low, 1e-8) - 1
    windows = [ep[i : i + chunk] for ep in scaled for i in range(0, len(ep) - chunk + 1)]
    return np.stack(windows)


def main(path: str) -> None:
    spec = json.loads(Path(path).read_text())
    out = Path(spec["out"])
    for sub in ("dataset", "hf", "fast"):
        shutil.rmtree(out / sub, ignore_errors=True)  # a rehearsal cut short: start again
    out.mkdir(parents=True, exist_ok=True)
    made = write_dataset(spec, out / "dataset")
    text_vocab = write_text_tokenizer(spec, out / "hf")
    sys.path.insert(0, str(Path(__file__).parent))
    from fast_tokenizer import RehearsalFastProcessor

    fast = RehearsalFastProcessor.fit(chunks(made["actions"], spec["chunk"]), spec["fast_vocab"])
    fast.save_pretrained(out / "fast")
    report = {
        "dataset": str(out / "dataset"),
        "hf_home": str(out / "hf"),
        "fast": str(out / "fast"),
        "mapping": made["mapping"],
        "frames": spec["episodes"] * spec["frames"],
        "text_vocab": text_vocab,
        "fast_vocab": fast.vocab_size,
    }
    print(json.dumps(report))


if __name__ == "__main__":
    main(sys.argv[1])
