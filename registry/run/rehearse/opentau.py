"""Rehearsing an OpenTau recipe: what it trains on instead of the hub's weights, data and tokenizers.

OpenTau builds a fresh policy when policy.pretrained_path is null, and reaches the hub three more
ways (docs/rehearsal.md, What is synthetic): the dataset, the language tokenizer it loads by name
(`AutoTokenizer.from_pretrained("google/gemma-3-4b-pt")`, resolved offline from HF_HOME's cache) and
the FAST action tokenizer (policy.discrete_action_tokenizer_path). opentau_assets.py makes all
three in the trainer's own environment; this module says what to make, from the recipe's own
shapes, and how the recipe points at it.
"""

from __future__ import annotations

import json
import math
import subprocess
from pathlib import Path

from registry import untrusted, view
from registry.doc import lookup
from registry.errors import RecipeError

# run in the trainer's Python from a folder of their own: its sys.path[0] must not hold this package
ASSETS = Path(__file__).parent / "trainer_side" / "opentau_assets.py"
# tokenizer ids OpenTau's policies load by name: Gemma 3's (pi07) and PaliGemma's (pi05, pi07_paligemma_*)
TOKENIZER_IDS = ("google/gemma-3-4b-pt", "google/paligemma-3b-pt-224")
FAST_VOCAB = 1024  # the size physical-intelligence/fast's BPE is fitted at by OpenTau's own fit script
# OpenTau's own defaults where a recipe leaves them to it (configuration_pi07_low_level.py, Gemma 3 4B)
DEFAULTS = {"max_state_dim": 32, "max_action_dim": 32, "vocab_size": 262_208, "first_image_token": 255_999}
ASSETS_TIMEOUT_S = 1800


def spec(doc: dict, out: Path, samples: int) -> dict:
    """What opentau_assets.py makes: the recipe's cameras, image size, state and action sizes and
    rate; episodes long enough for a chunk after the history, and enough of them for `samples`."""
    r = view.of(doc)
    options = _mapping(doc, "policy.options")
    chunk = int(r.policy.chunk_size or 10)
    history = int(r.dataset.n_obs_history or r.policy.n_obs_steps or 1) * int(r.policy.history_interval or 1)
    frames = max(50, 2 * (chunk + history))
    height, width = r.dataset.resolution or r.policy.resize_imgs_with_padding or (224, 224)
    return {
        "out": str(out),
        "cameras": int(r.dataset.num_cams or 1),
        "image_size": [int(height), int(width)],
        "state_dim": int(options.get("max_state_dim", DEFAULTS["max_state_dim"])),
        "action_dim": int(options.get("max_action_dim", DEFAULTS["max_action_dim"])),
        "fps": float(r.dataset.action_freq or 20.0),
        "episodes": max(2, math.ceil(samples / frames)),
        "frames": frames,
        "chunk": chunk,
        "seed": int(r.train.seed or 0),
        "text_vocab": text_vocab(options),
        "fast_vocab": FAST_VOCAB,
        "tokenizer_ids": list(TOKENIZER_IDS),
    }


def _mapping(doc: dict, path: str) -> dict:
    found = lookup(doc, path)
    return found if isinstance(found, dict) else {}


def text_vocab(options: dict) -> int:
    """The ids a text tokenizer may use: below the vocabulary and the image tokens' ids."""
    backbone = _mapping(options, "vlm_config.gemma3_config")
    vocab = _mapping(backbone, "text_config").get("vocab_size", DEFAULTS["vocab_size"])
    special = [backbone.get(k) for k in ("image_token_index", "boi_token_index", "eoi_token_index")]
    firsts = [int(v) for v in special if isinstance(v, int)] or [DEFAULTS["first_image_token"]]
    return min(int(vocab), *firsts)


def make(doc: dict, out: Path, python: str, samples: int, log: Path) -> dict:
    """Run opentau_assets.py in the trainer's Python; what it made (its JSON line)."""
    out.mkdir(parents=True, exist_ok=True)
    spec_file = out / "spec.json"
    spec_file.write_text(json.dumps(spec(doc, out, samples), indent=2) + "\n")
    with log.open("wb") as err:
        try:
            done = subprocess.run(
                [python, str(ASSETS), str(spec_file)],
                stdout=subprocess.PIPE,
                stderr=err,
                stdin=subprocess.DEVNULL,
                timeout=ASSETS_TIMEOUT_S,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as e:
            raise RecipeError(f"rehearsal: cannot make the synthetic data with {python}: {e}") from None
    if done.returncode != 0:
        tail = log.read_text(errors="replace").strip().splitlines()[-3:]
        raise RecipeError(
            f"rehearsal: making the synthetic data failed (exit {done.returncode}): {' / '.join(tail)}"
            f" (hint: the whole output is in {log})"
        )
    try:  # what the trainer's Python printed, read as everything from outside is (docs/failure-modes.md §68)
        made = untrusted.loads(done.stdout.strip().splitlines()[-1], ASSETS.name)
        return untrusted.expect(made, dict, ASSETS.name, "its report")
    except (untrusted.Rejected, IndexError):
        raise RecipeError(f"rehearsal: {ASSETS.name} printed no report (hint: see {log})") from None


def overrides(doc: dict, made: dict, steps: int) -> dict[str, object]:
    """The recipe keys a rehearsal sets: random weights, the synthetic dataset and tokenizer, no
    checkpoint (a full-size one is tens of GB), a line of losses per step."""
    dataset = {"repo_id": "local/rehearsal", "root": made["dataset"], "data_features_name_mapping": made["mapping"]}
    return {
        "policy.pretrained_path": None,
        "dataset.repo_id": "local/rehearsal",
        "dataset.root": made["dataset"],
        "dataset.revision": None,
        "dataset.episodes": None,
        "train.log_every": 1,
        "train.checkpoint.every": steps,  # OpenTau divides by save_freq even with checkpoints off
        "trainer.opentau.config": {
            **_mapping(doc, "trainer.opentau.config"),
            "save_checkpoint": False,
            "dataset_mixture": {"datasets": [dataset]},  # the mapping lives per dataset
            "policy": {"discrete_action_tokenizer_path": made["fast"]},
        },
    }


def env(made: dict) -> dict[str, str]:
    """Nothing reaches the hub: the tokenizer resolves from the rehearsal's cache."""
    offline = {k: "1" for k in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE")}
    return {**offline, "HF_HOME": made["hf_home"], "WANDB_MODE": "disabled"}


# step:12(12) smpl:48(48) total_loss:8.509512 mse_loss:2.623513 ce_loss:5.885999 lr:9.3e-04 grad_norm:3.341
LOSS_LINE = r"\bstep:\S*\((\d+)\) smpl:\S+ total_loss:(\S+)(?:.*?\bgrad_norm:(\S+))?"


def note() -> str:
    return (
        "weights random (policy.pretrained_path null); dataset, language tokenizer and FAST action"
        " tokenizer synthetic, made here"
    )
