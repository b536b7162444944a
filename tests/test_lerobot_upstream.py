"""LeRobot's own parser and validate() on the command lines the registry writes (lerobot 0.6.1).

LeRobot needs Python >= 3.12 and torch, so it runs in an environment of its own,
`bash tests/upstream/lerobot_env.sh` (CI builds it), or the interpreter RECIPE_LEROBOT_PYTHON names
(the GPU host's, benchmarks/results/trainers_gpu.md); registry/validate/checkers/lerobot_check.py runs there, in
one process for every case.

1. Every valid bundled LeRobot cell parses and validates, and LeRobot's parsed config holds the
   recipe's values: batch size, steps, seed, save and log frequency, workers, the optimizer and
   scheduler with the preset off, the policy's chunking.
2. Differential: for each rule that mirrors a LeRobot check, a recipe that breaks it fails both
   `recipe validate` and LeRobot; its fixed twin passes both. Where the registry refuses a field
   LeRobot has no counterpart for, the flag a naive mapping would write is added by hand, and
   LeRobot must refuse it too.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from conftest import ROOT, USER_ENV, lerobot_python

from registry.compose import Recipe, compose
from registry.resolve import resolve
from registry.validate import validate

pytestmark = pytest.mark.upstream

CHECKER = ROOT / "registry" / "validate" / "checkers" / "lerobot_check.py"
OFFLINE = ["--policy.pretrained_backbone_weights=null"]  # ACT and diffusion would download ResNet weights


@dataclass(frozen=True)
class Pair:
    rule: str
    cell: str
    broken: tuple[str, ...]  # overrides that break only `rule`
    fixed: tuple[str, ...]
    says: str  # in LeRobot's refusal of the broken twin
    flags: tuple[str, ...] = ()  # added to the broken command line: what a naive mapping would write


ACT, SMOLVLA = "act/ddp/8xA100", "smolvla/ddp/8xA100"
REFUSED = "The fields `{}` are not valid"  # draccus, for a policy config without that field
PAIRS = [
    Pair("lerobot-act-obs", ACT, ("policy.n_obs_steps=2", "dataset.n_obs_history=2"), (), "Multiple observation steps"),
    Pair("lerobot-push-to-hub", ACT, ("trainer.lerobot.push_to_hub=true",), (), "'repo_id' argument missing"),
    Pair("lerobot-policy-type", ACT, ("policy.type=act2",), (), "invalid choice: 'act2'"),
    Pair("action-steps-chunk", ACT, ("policy.n_action_steps=120",), ("policy.n_action_steps=50",), "upper bound"),
    Pair("action-steps-chunk", SMOLVLA, ("policy.n_action_steps=60",), ("policy.n_action_steps=10",), "upper bound"),
    Pair(
        "lerobot-no-accumulation",
        ACT,
        ("train.gradient_accumulation_steps=2",),
        (),
        "unrecognized arguments: --gradient_accumulation_steps=2",
        ("--gradient_accumulation_steps=2",),
    ),
    Pair(
        "lerobot-scheduler-type",
        ACT,
        ("train.scheduler.type=linear",),
        (),
        "invalid choice: 'linear'",
        ("--scheduler.type=linear",),
    ),
    Pair(
        "lerobot-policy-dtype",
        ACT,
        ("policy.dtype=bfloat16",),
        (),
        REFUSED.format("dtype"),
        ("--policy.dtype=bfloat16",),
    ),
    Pair(
        "lerobot-policy-checkpointing",
        ACT,
        ("policy.gradient_checkpointing=true",),
        (),
        REFUSED.format("gradient_checkpointing"),
        ("--policy.gradient_checkpointing=true",),
    ),
    Pair(
        "lerobot-policy-compile",
        ACT,
        ("policy.use_torch_compile=true",),
        (),
        REFUSED.format("compile_model"),
        ("--policy.compile_model=true",),
    ),
    Pair(
        "lerobot-policy-freeze",
        ACT,
        ("policy.freeze_vision_encoder=true",),
        (),
        REFUSED.format("freeze_vision_encoder"),
        ("--policy.freeze_vision_encoder=true",),
    ),
    Pair(  # policy.options against the fields of LeRobot's own config (schemas/trainers.upstream.schema.json)
        "key-name",
        ACT,
        ("policy.options.dim_feedforwardd=3200",),
        ("policy.options.dim_feedforward=3200",),
        "unrecognized arguments: --policy.dim_feedforwardd=3200",
    ),
    Pair(
        "lerobot-not-applicable",
        ACT,
        ("train.loss_weights={MSE: 1, CE: 0.5}",),
        (),
        "unrecognized arguments: --loss_weighting",
        ('--loss_weighting={"MSE":1,"CE":0.5}',),
    ),
    Pair(
        "lerobot-not-applicable",
        ACT,
        ("dataset.resolution=[96, 96]",),
        (),
        "unrecognized arguments: --resolution",
        ("--resolution=[96,96]",),
    ),
]


def flags_of(files: dict[str, str]) -> list[str]:
    """lerobot-train's flags on launch.sh's exec line: what follows `-m <the training module>`."""
    argv = shlex.split(next(line for line in files["launch.sh"].splitlines() if line.startswith("exec ")))
    return [token for token in argv[argv.index("-m") + 2 :] if token != "$@"]  # launch.sh's own arguments


def lerobot_cells(matrix) -> list[str]:
    return [
        name
        for name, cell in matrix.items()
        if cell.report.exit_code == 0 and cell.recipe.data["trainer"]["kind"] == "lerobot"
    ]


def args_for(flags: list[str]) -> list[str]:
    # the checker picks a fresh output folder; ACT and diffusion would download ResNet weights
    resnet = any(f in flags for f in ("--policy.type=act", "--policy.type=diffusion"))
    return [f for f in flags if not f.startswith("--output_dir=")] + (OFFLINE if resnet else [])


@pytest.fixture(scope="module")
def upstream(matrix, tmp_path_factory) -> dict:
    """One LeRobot process for every case: cells, broken and fixed twins."""
    python = lerobot_python()
    cases = [{"id": name, "args": args_for(flags_of(matrix[name].bundle.files))} for name in lerobot_cells(matrix)]
    for i, pair in enumerate(PAIRS):
        for side in ("broken", "fixed"):
            overrides = list(pair.broken if side == "broken" else pair.fixed)
            doc = compose(pair.cell, overrides).data
            flags = flags_of(render(doc))
            extra = list(pair.flags) if side == "broken" else []
            cases.append({"id": f"{i}/{side}", "args": args_for(flags) + extra})
    for entry in corpus_entries():  # the teams' own flags, as they are
        cases.append({"id": f"corpus/{entry['id']}", "args": args_for(shlex.split(entry["args"]))})
    folder = tmp_path_factory.mktemp("lerobot")
    (folder / "cases.json").write_text(json.dumps(cases))
    done = subprocess.run(
        [python, str(CHECKER), str(folder / "cases.json"), "-o", str(folder / "out.json")],
        capture_output=True,
        text=True,
        timeout=900,
        env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {"PYTHONPATH": USER_ENV.get("PYTHONPATH", "")},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    if USER_ENV.get("RECIPE_LEROBOT_RESULTS"):  # keep LeRobot's verdicts (benchmarks/results/)
        Path(USER_ENV["RECIPE_LEROBOT_RESULTS"]).write_text((folder / "out.json").read_text())
    return {r["id"]: r for r in json.loads((folder / "out.json").read_text())}


CORPUS = ROOT / "tests" / "data" / "corpus"


def corpus_entries() -> list[dict]:
    """The corpus's LeRobot command lines (tests/test_corpus.py)."""
    entries = yaml.safe_load((CORPUS / "manifest.yaml").read_text())["entries"]
    return [e for e in entries if e.get("trainer") == "lerobot"]


def render(doc: dict) -> dict[str, str]:
    """The files for a recipe, invalid ones included (the differential needs the broken twin's)."""
    return resolve(Recipe(name="differential", data=doc, origins={})).files


def expected(doc: dict) -> dict:
    """What LeRobot's parsed config must hold for the recipe."""
    train, policy = doc["train"], doc["policy"]
    out = {
        "batch_size": train["micro_batch_size"],
        "steps": train["steps"],
        "seed": train["seed"],
        "save_freq": train["checkpoint"]["every"] or train["steps"],
        "log_freq": train["log_every"],
        "num_workers": train["num_workers"],
        "use_policy_training_preset": False,
        "optimizer.type": train["optimizer"]["type"],
        "optimizer.lr": train["optimizer"]["lr"],
        "optimizer.weight_decay": train["optimizer"]["weight_decay"],
        "optimizer.grad_clip_norm": train["optimizer"]["grad_clip_norm"] or 0,
        "scheduler.num_warmup_steps": train["scheduler"]["warmup_steps"],
        "policy.type": policy["type"],
        "policy.n_obs_steps": policy["n_obs_steps"],
        "policy.n_action_steps": policy["n_action_steps"],
        "policy.push_to_hub": False,
        "dataset.repo_id": doc["dataset"]["repo_id"],
    }
    if train["optimizer"]["type"] != "sgd":
        out["optimizer.betas"] = list(train["optimizer"]["betas"])
    if "chunk_size" in policy:
        out["policy.horizon" if policy["type"] == "diffusion" else "policy.chunk_size"] = policy["chunk_size"]
    return out


def dig(config: dict, dotted: str):
    for key in dotted.split("."):
        config = config[key]
    return list(config) if isinstance(config, tuple) else config


def test_valid_cells_parse_validate_and_keep_the_recipe(upstream, matrix):
    cells = lerobot_cells(matrix)
    assert len(cells) > 50
    failures = {}
    for name in cells:
        result = upstream[name]
        if not result["ok"]:
            failures[name] = f"{result['stage']}: {result['error']} {result.get('cause') or ''}"
            continue
        wrong = {
            key: (dig(result["config"], key), want)
            for key, want in expected(matrix[name].recipe.data).items()
            if dig(result["config"], key) != want
        }
        if wrong:
            failures[name] = f"LeRobot read {wrong} (got, recipe)"
    assert not failures, json.dumps(dict(list(failures.items())[:10]), indent=1)


def registry_rules(pair: Pair, side: str) -> set[str]:
    recipe = compose(pair.cell, list(pair.broken if side == "broken" else pair.fixed))
    return {p.rule for p in validate(recipe.data, recipe.origins) if p.is_error}


@pytest.mark.parametrize("i", range(len(PAIRS)), ids=[f"{p.rule}:{p.broken[0]}" for p in PAIRS])
def test_broken_recipe_fails_both_and_its_twin_passes_both(upstream, i):
    pair = PAIRS[i]
    assert pair.rule in registry_rules(pair, "broken")
    broken = upstream[f"{i}/broken"]
    assert not broken["ok"], "LeRobot accepted what the registry refuses"
    assert pair.says in f"{broken['error']} {broken.get('cause') or ''}", broken["error"]
    assert registry_rules(pair, "fixed") == set()
    fixed = upstream[f"{i}/fixed"]
    assert fixed["ok"], f"{fixed['stage']}: {fixed['error']} {fixed.get('cause') or ''}"


@pytest.mark.parametrize("entry", corpus_entries(), ids=lambda e: e["id"])
def test_corpus_trainer_verdicts_are_lerobots(upstream, entry):
    """Where the corpus records that LeRobot refuses a team's flags (tests/test_corpus.py then wants
    a registry error), LeRobot's own parser refuses them; everywhere else it accepts them."""
    result = upstream[f"corpus/{entry['id']}"]
    recorded = entry.get("trainer_verdict", {"accepted": True})
    assert result["ok"] == recorded["accepted"], f"{result['stage']}: {result['error']}"
    if not recorded["accepted"]:
        assert recorded["error"] in result["error"]
