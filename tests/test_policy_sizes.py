"""The sizes the LeRobot and OpenTau policy parts declare (policy.memory) are the ones derived from the
trainers' own model code (tests/upstream/policy_sizes.py), recorded in tests/data/policy_sizes.json.

1. Every part's declared sizes equal the fixture's (a part edited by hand, or a fixture refreshed
   without the parts, fails here), except the figures listed in KEPT with the reason.
2. The derivation script builds the wrap classes and shapes the parts declare.
3. Its counting (nested wrap units, the root, saved-for-backward bytes) on small torch models.
4. Re-derivation in the trainer's environment: OpenTau's venv (tests/upstream/opentau_env.sh, built
   in CI) and LeRobot's (tests/upstream/lerobot_env.sh, built in CI, or RECIPE_LEROBOT_PYTHON) give the
   fixture's figures again.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import subprocess

import pytest
import yaml
from conftest import ROOT, USER_ENV, lerobot_python

FIXTURE = ROOT / "tests" / "data" / "policy_sizes.json"
SCRIPT = ROOT / "tests" / "upstream" / "policy_sizes.py"
DATA = json.loads(FIXTURE.read_text())
FIELDS = ("params", "trainable_params", "largest_unit_params", "root_unit_params")
# (part, field): why the part keeps a figure other than the derived one
KEPT: dict[tuple[str, str], str] = {}

spec = importlib.util.spec_from_file_location("policy_sizes", SCRIPT)
sizes = importlib.util.module_from_spec(spec)
spec.loader.exec_module(sizes)


def part(name: str) -> dict:
    return yaml.safe_load((ROOT / "recipes" / "policy" / f"{name}.yaml").read_text())


def entries() -> list[tuple[str, str, dict]]:
    return [
        (trainer, name, entry)
        for trainer in ("lerobot", "opentau")
        for name, entry in DATA[trainer]["policies"].items()
    ]


def declared(memory: dict, field: str):
    if field == "trainable_params" and "trainable_params" not in memory:
        return memory["params"]  # the estimator's default: all trainable
    return memory.get(field)


@pytest.mark.parametrize("trainer, name, entry", entries(), ids=lambda v: v if isinstance(v, str) else "")
def test_part_declares_the_derived_sizes(trainer, name, entry):
    memory = part(entry["part"])["policy"]["memory"]
    wrong = {}
    for field in FIELDS:
        if (entry["part"], field) in KEPT:
            continue
        if declared(memory, field) != entry[field]:
            wrong[field] = (declared(memory, field), entry[field])
    if trainer == "lerobot":
        for field in ("activation_gib_per_sample", "activation_gib_per_frame"):
            derived = entry["activations"][f"{field}_bf16"]
            if not math.isclose(memory[field], derived, abs_tol=1e-9):
                wrong[field] = (memory[field], derived)
    assert not wrong, f"recipes/policy/{entry['part']}.yaml declares (declared, derived): {wrong}"


def test_every_lerobot_and_opentau_part_is_derived_or_says_why():
    derived = {e["part"] for _, _, e in entries()}
    for name in ("act", "diffusion", "pi05", "pi07", "smolvla"):
        if name not in derived:  # SmolVLA: its VLM's config comes from the Hub
            assert "Hub" in (ROOT / "recipes" / "policy" / f"{name}.yaml").read_text(), name
    assert {"act", "diffusion", "pi05", "pi07"} <= derived


@pytest.mark.parametrize("table", ["LEROBOT", "OPENTAU"])
def test_script_wraps_what_the_parts_declare(table):
    for name, spec in getattr(sizes, table).items():
        policy = part(spec["part"])["policy"]
        assert spec["block_classes"] == policy["block_classes"], name
        assert spec["module_classes"] == policy["module_classes"], name
        if table == "LEROBOT":
            assert spec["n_obs_steps"] == policy["n_obs_steps"], name
            for key, value in spec["options"].items():
                assert policy[key] == value, (name, key)


def test_counts_nested_units_and_the_root():
    import torch.nn as nn

    class Block(nn.Module):
        def __init__(self, inner: bool):
            super().__init__()
            self.fc = nn.Linear(4, 4)  # 20
            self.inner = Inner() if inner else None

    class Inner(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 8)  # 40

    model = nn.Sequential(nn.Linear(2, 2), Block(True), Block(False))  # root: 6
    model[2].fc.weight.requires_grad = False
    found = sizes.counts(model, ["Block"], ["Block", "Inner"])
    assert found["params"] == 6 + 60 + 20 and found["trainable_params"] == 86 - 16
    assert found["largest_unit_params"] == 60 and found["root_unit_params"] == 6
    assert found["largest_unit_params_module_classes"] == 40 and found["root_unit_params_module_classes"] == 6
    assert found["units"] == {"Block": {"count": 2, "largest": 20}, "Inner": {"count": 1, "largest": 40}}


def test_saved_bytes_counts_activations_not_weights():
    import torch
    import torch.nn as nn

    model = nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 1))
    batches = {}
    for b in (4, 8):
        x = torch.randn(b, 256)
        batches[b] = sizes.saved_bytes(lambda x=x: (model, model(x).sum()))
    # per sample: the input (256) and ReLU's output (512, which the second Linear saves too: one
    # storage), float32; the weights autograd also saves are not counted
    assert batches[8] - batches[4] == 4 * 4 * (256 + 512)
    assert batches[4] == 4 * 4 * (256 + 512)


def rederive(python, trainer: str, tmp_path, *flags: str) -> dict:
    out = tmp_path / f"{trainer}.json"
    done = subprocess.run(
        [str(python), str(SCRIPT), trainer, "-o", str(out), *flags],
        capture_output=True,
        text=True,
        timeout=1200,
        env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(out.read_text())


def same_counts(found: dict, recorded: dict) -> dict:
    return {
        name: {
            f: (found["policies"][name].get(f), e[f])
            for f in (*FIELDS, "units")
            if found["policies"][name].get(f) != e[f]
        }
        for name, e in recorded["policies"].items()
    }


@pytest.mark.upstream
def test_opentau_rederives_the_fixture(tmp_path):
    from test_opentau_upstream import venv_python

    found = rederive(venv_python(), "opentau", tmp_path)
    assert found["versions"]["opentau"] == DATA["opentau"]["versions"]["opentau"]
    drift = {k: v for k, v in same_counts(found, DATA["opentau"]).items() if v}
    assert not drift, f"OpenTau's model differs from tests/data/policy_sizes.json (found, recorded): {drift}"


@pytest.mark.upstream
def test_lerobot_rederives_the_fixtures_counts(tmp_path):
    found = rederive(lerobot_python(), "lerobot", tmp_path, "--no-activations")
    assert found["versions"]["lerobot"] == DATA["lerobot"]["versions"]["lerobot"]
    drift = {k: v for k, v in same_counts(found, DATA["lerobot"]).items() if v}
    assert not drift, f"LeRobot's model differs from tests/data/policy_sizes.json (found, recorded): {drift}"


@pytest.mark.upstream
def test_lerobot_rederives_the_fixtures_activations(tmp_path):
    """Real forward and backward passes of ACT (480 x 640 images) and diffusion at two batch sizes
    and two camera counts: about 4 minutes of CPU, so only where RECIPE_LEROBOT_ACTIVATIONS is set
    (tests/allowed_skips.txt)."""
    if not USER_ENV.get("RECIPE_LEROBOT_ACTIVATIONS"):
        pytest.skip("LeRobot's activations take about 4 minutes of CPU: set RECIPE_LEROBOT_ACTIVATIONS=1 to run them")
    found = rederive(lerobot_python(), "lerobot", tmp_path)
    drift = {k: v for k, v in same_counts(found, DATA["lerobot"]).items() if v}
    for name, recorded in DATA["lerobot"]["policies"].items():
        for key in ("activations", "activations_toy"):
            for field in ("per_sample_bytes", "per_frame_bytes"):
                got, want = found["policies"][name][key][field], recorded[key][field]
                if not math.isclose(got, want, rel_tol=0.02, abs_tol=1024**2):
                    drift.setdefault(name, {})[f"{key}.{field}"] = (got, want)
    assert not drift, f"LeRobot's model differs from tests/data/policy_sizes.json (found, recorded): {drift}"


def test_fixture_records_how_it_was_made():
    for trainer in ("lerobot", "opentau"):
        assert DATA[trainer]["command"].startswith(f"python tests/upstream/policy_sizes.py {trainer}")
        assert DATA[trainer]["versions"][trainer]
