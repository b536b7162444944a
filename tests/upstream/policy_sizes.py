"""The sizes `policy.memory` declares, derived from the trainer's own model code.

    python policy_sizes.py lerobot [--policies act,diffusion] [--no-activations] [-o OUT.json]
    python policy_sizes.py opentau [--policies pi05,pi07] [-o OUT.json]

Runs in the trainer's environment, never in the project's, and never imports `registry`: LeRobot's
(Python >= 3.12, RECIPE_LEROBOT_PYTHON) or OpenTau's (tests/upstream/opentau_env.sh). Each policy is
built from the library's own config and policy classes; nothing is downloaded (HF_HUB_OFFLINE).

For each policy it prints one JSON object:
  - params, trainable_params: unique parameters of the built policy (requires_grad for trainable);
  - units: for each wrap class, how many modules of that class and the largest one's parameters,
    counting only what no nested wrap module owns (FSDP's nested wrapping);
    largest_unit_params: the largest of those over the part's block classes (FSDP1's wrap list),
    root_unit_params: what no module of those classes owns (FSDP's root unit); the same two over
    the part's module classes (FSDP2 adds SiglipVisionEmbeddings) as *_module_classes;
  - activations (LeRobot's ACT and diffusion; `--no-activations` skips them): the bytes saved for
    backward by one forward of the training loss on CPU in float32, counted with
    torch.autograd.graph.saved_tensors_hooks as unique storages other than parameters and buffers,
    at two batch sizes and two camera counts; per sample = the batch-size difference, per camera
    frame = its camera-count difference divided by the frames a camera adds (n_obs_steps). The
    `*_gib_bf16` figures halve the float32 bytes: the estimator declares activations relative to a
    model computing in bf16 throughout (registry/estimate.py, _activation_factor).

Built on the meta device (no memory, no weights) for counting; activations need a real CPU model
with random weights (pretrained_backbone_weights=None).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import sys
from importlib.metadata import version
from pathlib import Path

os.environ.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", HF_DATASETS_OFFLINE="1", WANDB_MODE="disabled")

GIB = 1024**3

# What each bundled policy part wraps (recipes/policy/<part>.yaml block_classes / module_classes)
# and the dataset shapes its recipe trains on. Kept here, not read from the parts: this script
# must not import the registry, and the CI test checks these against the parts.
LEROBOT = {
    "act": {
        "part": "act",
        "block_classes": ["ACTEncoderLayer", "ACTDecoderLayer"],
        "module_classes": ["ACTEncoderLayer", "ACTDecoderLayer"],
        "n_obs_steps": 1,
        "options": {"chunk_size": 100, "n_action_steps": 100},
        # lerobot/aloha_sim_transfer_cube_human: one 480 x 640 camera, 14-dim state and action
        "shapes": {"image": [3, 480, 640], "state": 14, "action": 14},
    },
    "diffusion": {
        "part": "diffusion",
        "block_classes": ["DiffusionConditionalResidualBlock1d"],
        "module_classes": ["DiffusionConditionalResidualBlock1d"],
        "n_obs_steps": 2,
        "options": {"n_action_steps": 8},
        # lerobot/pusht: one 96 x 96 camera, 2-dim state and action
        "shapes": {"image": [3, 96, 96], "state": 2, "action": 2},
    },
}
# The offline toy dataset the GPU benchmark trains on (benchmarks/make_dataset.py).
TOY = {"image": [3, 96, 96], "state": 14, "action": 14}

OPENTAU = {
    "pi05": {
        "part": "pi05",
        "block_classes": ["GemmaDecoderLayer", "SiglipEncoderLayer"],
        "module_classes": ["GemmaDecoderLayer", "SiglipEncoderLayer", "SiglipVisionEmbeddings"],
        "config": {"freeze_vision_encoder": False, "train_expert_only": False},
    },
    "pi07": {
        "part": "pi07",
        "block_classes": ["InterleavedDecoderLayer", "SiglipEncoderLayer"],
        "module_classes": ["InterleavedDecoderLayer", "SiglipEncoderLayer", "SiglipVisionEmbeddings"],
        "config": {"n_obs_steps": 6, "chunk_size": 10, "n_action_steps": 10, "proj_width": 1280},
        "vlm": {"freeze_vision_encoder": True, "train_expert_only": False},
    },
}
# The FAST action tokenizer's vocabulary (`discrete_action_tokenizer_path`, physical-intelligence/fast
# on the Hub) sizes the discrete-action embedding and head; offline it cannot be read, so it is an
# input here (recorded in the output).
FAST_VOCAB = 2048


def counts(model, block_classes: list[str], module_classes: list[str]) -> dict:
    """Parameter counts and FSDP wrap units of `model` (see the module docstring)."""
    params = {id(p): p for p in model.parameters()}
    out = {
        "params": sum(p.numel() for p in params.values()),
        "trainable_params": sum(p.numel() for p in params.values() if p.requires_grad),
        "units": {},
    }
    for key, classes in (("", block_classes), ("_module_classes", module_classes)):
        owner: dict[int, tuple[str, str]] = {}
        for name, module in model.named_modules():  # pre-order: an inner unit overrides its outer one
            kind = type(module).__name__
            if kind in classes:
                for p in module.parameters():
                    owner[id(p)] = (kind, name)
        sizes: dict[tuple[str, str], int] = {}
        for pid, unit in owner.items():
            sizes[unit] = sizes.get(unit, 0) + params[pid].numel()
        for kind in classes:
            mine = [n for (k, _), n in sizes.items() if k == kind]
            out["units"][kind] = {"count": len(mine), "largest": max(mine, default=0)}
        out[f"largest_unit_params{key}"] = max(sizes.values(), default=0)
        out[f"root_unit_params{key}"] = out["params"] - sum(sizes.values())
    return out


def saved_bytes(step) -> int:
    """Bytes of the unique storages autograd saves for backward while `step()` runs, parameters and
    buffers excluded (`step` returns the module whose parameters to exclude, and the loss)."""
    import torch

    seen: dict[int, int] = {}

    def pack(t):
        storage = t.untyped_storage()
        seen[storage.data_ptr()] = storage.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        model, loss = step()
    weights = {t.untyped_storage().data_ptr() for t in (*model.parameters(), *model.buffers())}
    loss.backward()
    return sum(n for ptr, n in seen.items() if ptr not in weights)


# --- LeRobot --------------------------------------------------------------------------------------
def lerobot_policy(name: str, shapes: dict, cams: int, device: str):
    import torch
    from lerobot.configs.types import FeatureType, PolicyFeature

    spec = LEROBOT[name]
    inputs = {
        f"observation.images.cam{i}": PolicyFeature(type=FeatureType.VISUAL, shape=tuple(shapes["image"]))
        for i in range(cams)
    }
    inputs["observation.state"] = PolicyFeature(type=FeatureType.STATE, shape=(shapes["state"],))
    outputs = {"action": PolicyFeature(type=FeatureType.ACTION, shape=(shapes["action"],))}
    common = {"input_features": inputs, "output_features": outputs, "device": "cpu", **spec["options"]}
    if name == "act":
        from lerobot.policies.act.configuration_act import ACTConfig
        from lerobot.policies.act.modeling_act import ACTPolicy

        config, cls = ACTConfig(pretrained_backbone_weights=None, **common), ACTPolicy
    else:
        from lerobot.policies.diffusion.configuration_diffusion import DiffusionConfig
        from lerobot.policies.diffusion.modeling_diffusion import DiffusionPolicy

        config, cls = DiffusionConfig(pretrained_backbone_weights=None, **common), DiffusionPolicy
    with torch.device(device):
        return cls(config), config


def lerobot_batch(name: str, config, shapes: dict, cams: int, batch: int) -> dict:
    """A training batch of random data shaped as LeRobot's dataloader delivers it."""
    import torch

    obs = config.n_obs_steps
    time = (obs,) if name == "diffusion" else ()  # diffusion stacks n_obs_steps observations
    horizon = config.horizon if name == "diffusion" else config.chunk_size
    out = {f"observation.images.cam{i}": torch.rand(batch, *time, *shapes["image"]) for i in range(cams)}
    out["observation.state"] = torch.randn(batch, *time, shapes["state"])
    out["action"] = torch.randn(batch, horizon, shapes["action"])
    out["action_is_pad"] = torch.zeros(batch, horizon, dtype=torch.bool)
    return out


def lerobot_activations(name: str, shapes: dict, batches=(1, 2), cams=(1, 2)) -> dict:
    import torch

    torch.manual_seed(0)
    measured = {}
    for c in cams:
        policy, config = lerobot_policy(name, shapes, c, "cpu")
        policy.train()
        for b in batches:
            data = lerobot_batch(name, config, shapes, c, b)

            def step(policy=policy, data=data):
                loss = policy.forward(data)[0]
                return policy, loss

            measured[(b, c)] = saved_bytes(step)
            policy.zero_grad(set_to_none=True)
    (b1, b2), (c1, c2) = batches, cams
    frames = LEROBOT[name]["n_obs_steps"]
    per_sample = {c: (measured[(b2, c)] - measured[(b1, c)]) / (b2 - b1) for c in cams}
    per_frame = (per_sample[c2] - per_sample[c1]) / ((c2 - c1) * frames)
    base = per_sample[c1] - per_frame * c1 * frames
    split = {"per_sample_bytes": round(base), "per_frame_bytes": round(per_frame)}
    if base < 0:
        # Attention over the camera tokens grows faster than the cameras (ACT at 480 x 640: 300
        # tokens a camera): the linear split overshoots. Keep the first camera count exact instead,
        # all of it per frame.
        base, per_frame = 0.0, per_sample[c1] / (c1 * frames)
    return {
        "dtype": "float32",
        "image": shapes["image"],
        "saved_bytes": {f"batch{b}_cams{c}": n for (b, c), n in sorted(measured.items())},
        "linear_split": split,
        "per_sample_bytes": round(base),
        "per_frame_bytes": round(per_frame),
        "activation_gib_per_sample_bf16": round(base / 2 / GIB, 4),
        "activation_gib_per_frame_bf16": round(per_frame / 2 / GIB, 4),
    }


def lerobot(policies: list[str], activations: bool) -> dict:
    out = {}
    for name in policies:
        spec = LEROBOT[name]
        policy, _ = lerobot_policy(name, spec["shapes"], 1, "meta")
        entry = {"part": spec["part"], "shapes": spec["shapes"], "cameras": 1, "n_obs_steps": spec["n_obs_steps"]}
        entry.update(counts(policy, spec["block_classes"], spec["module_classes"]))
        if activations:
            entry["activations"] = lerobot_activations(name, spec["shapes"])
            entry["activations_toy"] = lerobot_activations(name, TOY)
        out[name] = entry
    return out


# --- OpenTau --------------------------------------------------------------------------------------
class _Tokenizer:
    """Stands in for the Hub tokenizer the flow-matching module loads in its constructor (it reads
    only the length of the "Action: " prompt from it, and tokenizers hold no parameters)."""

    def encode(self, text, add_special_tokens=False):
        return list(range(len(text.split()) + 1))


@contextlib.contextmanager
def _no_hub_tokenizer(module):
    real = module.AutoTokenizer
    module.AutoTokenizer = type("AutoTokenizer", (), {"from_pretrained": staticmethod(lambda *a, **k: _Tokenizer())})
    try:
        yield
    finally:
        module.AutoTokenizer = real


def opentau_model(name: str):
    """The flow-matching module of the policy (the policy class itself only adds tokenizers and
    normalisation buffers, and loads both tokenizers from the Hub), built on the meta device."""
    import torch

    spec = OPENTAU[name]
    if name == "pi05":
        from opentau.policies.pi05 import modeling_pi05 as modeling
        from opentau.policies.pi05.configuration_pi05 import PI05Config

        config = PI05Config(**spec["config"])
        with _no_hub_tokenizer(modeling), torch.device("meta"), _no_loc_tokens(modeling):
            return modeling.PI05FlowMatching(config, FAST_VOCAB, language_tokenizer=_Tokenizer())
    from opentau.policies.pi07.low_level import modeling_pi07_low_level as modeling
    from opentau.policies.pi07.low_level.configuration_pi07_low_level import PI07LowLevelConfig

    config = PI07LowLevelConfig(**spec["config"])
    for key, value in spec["vlm"].items():
        setattr(config.vlm_config, key, value)
    with _no_hub_tokenizer(modeling), torch.device("meta"):
        return modeling.PI07LowLevelFlowMatching(config, FAST_VOCAB)


@contextlib.contextmanager
def _no_loc_tokens(module):
    """pi05 promotes PaliGemma's <loc> tokens on the tokenizer it is given: nothing to do on the stand-in."""
    real = getattr(module, "ensure_loc_tokens", None)
    module.ensure_loc_tokens = lambda tokenizer: None
    try:
        yield
    finally:
        if real is not None:
            module.ensure_loc_tokens = real


def opentau(policies: list[str]) -> dict:
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "registry" / "validate" / "checkers"))
    import importlib.util

    if importlib.util.find_spec("torchvision") is None:  # as opentau_check.py does
        from opentau_check import TorchvisionStandIn

        sys.meta_path.insert(0, TorchvisionStandIn())
    out = {}
    for name in policies:
        spec = OPENTAU[name]
        model = opentau_model(name)
        entry = {"part": spec["part"], "fast_vocab": FAST_VOCAB}
        entry.update(counts(model, spec["block_classes"], spec["module_classes"]))
        out[name] = entry
    return out


def versions(trainer: str) -> dict:
    names = ["torch", "transformers"] + (
        ["lerobot", "diffusers", "torchvision"] if trainer == "lerobot" else ["opentau"]
    )
    found = {"python": platform.python_version()}
    for name in names:
        with contextlib.suppress(Exception):
            found[name] = version(name)
    return found


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trainer", choices=["lerobot", "opentau"])
    parser.add_argument("--policies", help="comma-separated (default: all of the trainer's)")
    parser.add_argument("--no-activations", action="store_true", help="LeRobot: parameter counts only")
    parser.add_argument("-o", "--output", type=Path, help="write the JSON here as well as to stdout")
    parser.add_argument(
        "--fixture", type=Path, help="replace this trainer's section of a fixture file (tests/data/policy_sizes.json)"
    )
    args = parser.parse_args(argv)
    known = LEROBOT if args.trainer == "lerobot" else OPENTAU
    policies = args.policies.split(",") if args.policies else list(known)
    unknown = [p for p in policies if p not in known]
    if unknown:
        parser.error(f"unknown {args.trainer} policies: {unknown} (known: {list(known)})")
    found = lerobot(policies, not args.no_activations) if args.trainer == "lerobot" else opentau(policies)
    report = {"trainer": args.trainer, "versions": versions(args.trainer), "policies": found}
    text = json.dumps(report, indent=1)
    if args.output:
        args.output.write_text(text + "\n")
    if args.fixture:
        fixture = json.loads(args.fixture.read_text()) if args.fixture.is_file() else {}
        shown = [args.trainer] + [f"--policies={args.policies}"] * bool(args.policies)
        shown += ["--no-activations"] * args.no_activations + [f"--fixture={args.fixture}"]
        report["command"] = " ".join(["python", f"tests/upstream/{Path(__file__).name}", *shown])
        fixture[args.trainer] = report
        args.fixture.write_text(json.dumps(fixture, indent=1, sort_keys=True) + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
