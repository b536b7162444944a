"""The trainer adapters' own pieces, in-process and value by value: how `recipe import` reads
lerobot-train's flags (the split, draccus's bool spellings, --policy.path), and the command lines
the adapters write (torchrun on one node and several, accelerate in the trainer's own interpreter,
a team's program with its placeholders). tests/test_roundtrip.py and tests/test_corpus.py import
whole cells and real configs; this file pins each branch those take."""

from __future__ import annotations

import json
import os

import pytest

from registry.compose import compose
from registry.errors import RecipeError
from registry.trainers import builtin, command, lerobot
from registry.trainers.base import Context, Raw, flag_value

# --- lerobot-train's command line ----------------------------------------------------------------


def test_parse_reads_both_flag_forms_and_keeps_values_whole():
    args = "--policy.type=act --steps 200 --dataset.repo_id='lerobot/pusht' --job_name=a=b --x.y ''"
    assert lerobot.parse(args) == {
        "policy.type": "act",
        "steps": "200",
        "dataset.repo_id": "lerobot/pusht",
        "job_name": "a=b",  # split at the first =
        "x.y": "",
    }
    assert lerobot.parse("") == {}
    assert lerobot.parse("--a=1 --a=2") == {"a": "2"}  # the last one wins, as argparse reads it


@pytest.mark.parametrize(
    ("args", "said"),
    [
        ("--steps", "--trainer-args: cannot read '--steps'"),  # a flag with no value
        ("--steps --batch_size=8", "--trainer-args: cannot read '--steps'"),
        ("steps=200", "--trainer-args: cannot read 'steps=200'"),
        ("--a=1 200", "--trainer-args: cannot read '200'"),
    ],
)
def test_parse_refuses_what_is_no_flag(args, said):
    with pytest.raises(RecipeError) as e:
        lerobot.parse(args)
    assert str(e.value) == f"{said} (hint: --key=value flags as lerobot-train takes them)"


def test_parse_refuses_an_unbalanced_quote():
    with pytest.raises(RecipeError) as e:
        lerobot.parse("--job_name='x")
    assert str(e.value) == '--trainer-args: cannot split "--job_name=\'x": No closing quotation'


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("true", True),
        ("True", True),
        ("YES", True),
        ("on", True),
        ("1", True),
        ("false", False),
        ("False", False),
        ("no", False),
        ("OFF", False),
        ("0", False),
        ("2", "2"),
        ("t", "t"),
        ("", ""),
    ],
)
def test_bool_spellings_as_draccus_reads_them(text, value):
    assert lerobot._bool(text) is value if isinstance(value, bool) else lerobot._bool(text) == value


def policy_path(given: dict) -> tuple[dict, list[str]]:
    given, notes = dict(given), []
    lerobot._policy_path(given, notes)
    return given, notes


def test_policy_path_names_the_type_by_the_checkpoints_name():
    given, notes = policy_path({"policy.path": "lerobot/smolvla_base", "steps": "5"})
    assert given == {"steps": "5", "policy.type": "smolvla", "policy.pretrained_path": "lerobot/smolvla_base"}
    assert notes == [
        "lerobot-train flags --policy.path=lerobot/smolvla_base: policy.type smolvla is read from the checkpoint's"
        " name and policy.pretrained_path is lerobot/smolvla_base; the policy part stands in for the checkpoint's"
        " config.json"
    ]


@pytest.mark.parametrize(
    ("path", "kind"),
    [
        ("lerobot/pi0_fast_base", "pi0_fast"),  # the longer name first: not pi0
        ("lerobot/pi05_libero/", "pi05"),  # a trailing slash
        ("/ckpt/ACT_aloha", "act"),  # any case
        ("lerobot/pi0", "pi0"),
        ("diffusion_pusht", "diffusion"),
    ],
)
def test_policy_path_reads_the_last_part_of_the_name(path, kind):
    given, _ = policy_path({"policy.path": path})
    assert given == {"policy.type": kind, "policy.pretrained_path": path}


def test_policy_path_keeps_a_pretrained_path_given_beside_it():
    given, _ = policy_path({"policy.path": "lerobot/act_x", "policy.pretrained_path": "/mine"})
    assert given == {"policy.type": "act", "policy.pretrained_path": "/mine"}


def test_policy_path_with_a_type_given_becomes_the_pretrained_path():
    given, notes = policy_path({"policy.path": "lerobot/smolvla_base", "policy.type": "act"})
    assert given == {"policy.type": "act", "policy.pretrained_path": "lerobot/smolvla_base"}
    assert notes == [
        "lerobot-train flags --policy.path=lerobot/smolvla_base: the policy type is not read from a checkpoint's"
        " config.json; name it with --policy.type"
    ]


def test_policy_path_of_an_unknown_name_is_left_for_validation():
    given, notes = policy_path({"policy.path": "me/my_policy"})
    assert given == {"policy.path": "me/my_policy"} and len(notes) == 1
    assert notes[0].endswith("name it with --policy.type")
    assert policy_path({"steps": "5"}) == ({"steps": "5"}, [])


# --- command lines -------------------------------------------------------------------------------


def test_torchrun_on_one_node_and_on_several():
    one = Context("torchrun", "accelerate.yaml", nodes=1, processes_per_node=4)
    assert one.torchrun() == ["torchrun", "--standalone", "--nproc-per-node=4"]
    two = Context("torchrun", "accelerate.yaml", nodes=2, processes_per_node=8, python="/envs/t/bin/python")
    argv = two.torchrun()
    assert argv == [
        "/envs/t/bin/python",
        "-m",
        "torch.distributed.run",
        "--nproc-per-node=8",
        "--nnodes=2",
        "--node-rank",
        '"${MACHINE_RANK}"',
        "--master-addr",
        '"${MAIN_PROCESS_IP}"',
        "--master-port",
        '"${MAIN_PROCESS_PORT}"',
        "--rdzv-backend=static",
    ]
    assert [type(a) is Raw for a in argv] == [False] * 6 + [True, False, True, False, True, False]


def test_accelerate_in_the_trainers_interpreter_or_from_path():
    assert Context("accelerate", "a.yaml", 1, 2).accelerate() == ["accelerate", "launch", "--config_file", "a.yaml"]
    own = Context("accelerate", Raw('"node${MACHINE_RANK}.yaml"'), 2, 2, python="/p/python")
    assert own.accelerate() == ["/p/python", "-m", "accelerate.commands.launch", "--config_file", own.accelerate_config]


@pytest.mark.parametrize("launcher", ["accelerate", "torchrun"])
def test_builtin_invocation(launcher):
    doc = compose("tiny/ddp/cpu").data
    ctx = Context(launcher, "accelerate.yaml", 1, 2)
    inv = builtin.invocation(doc, ctx)
    start = ["accelerate", "launch", "--config_file", "accelerate.yaml"] if launcher == "accelerate" else None
    start = start or ["torchrun", "--standalone", "--nproc-per-node=2"]
    assert inv.argv == [*start, "-m", "registry.train", "train_config.json"]
    assert (inv.program, inv.install_hint) == (
        (launcher, "pip install accelerate") if launcher == "accelerate" else ("torchrun", "pip install torch")
    )
    assert inv.uses_accelerate_config is (launcher == "accelerate") and inv.same_python is True
    assert inv.files == {"train_config.json": json.dumps(doc, indent=2, sort_keys=False) + "\n"}


def test_flag_values_as_trainers_spell_them():
    assert [flag_value(v) for v in (True, False, None, [96, 96], {"a": 1}, 3, 0.5, "x")] == [
        "true",
        "false",
        "null",
        "[96,96]",
        '{"a":1}',
        "3",
        "0.5",
        "x",
    ]


def command_doc(program: str, args: list[str]) -> dict:
    return compose(
        "tiny/ddp/cpu",
        ["trainer.kind=command", f"trainer.command.program={program}", f"trainer.command.args={json.dumps(args)}"],
    ).data


def test_command_launch_values():
    doc = compose("tiny/ddp/cpu").data
    from registry import view

    ctx = Context("accelerate", "accelerate.yaml", 1, 2)
    assert command.launch_values(view.of(doc), ctx) == {
        "output_dir": "output",
        "world_size": 2,
        "accelerate_config": "accelerate.yaml",
        "deepspeed_config": "deepspeed.json",
        "recipe_lock": "recipe.lock.yaml",
    }


def test_command_fill_plain_and_shell_text():
    from registry import view

    recipe = view.of(compose("tiny/ddp/cpu").data)
    known = {"output_dir": "output", "accelerate_config": Raw('"node${MACHINE_RANK}.yaml"')}
    mb = recipe.train.micro_batch_size
    assert command.fill("--bs={train.micro_batch_size}", recipe, known) == f"--bs={mb}"
    assert command.fill("{output_dir}/x", recipe, known) == "output/x"
    assert command.fill("plain", recipe, known) == "plain"
    filled = command.fill("--cfg={accelerate_config} --o={output_dir}", recipe, known)
    # the recipe's text quoted, the shell text left as it is
    assert isinstance(filled, Raw) and filled == "--cfg=\"node${MACHINE_RANK}.yaml\"' --o='output"
    assert command.fill("{accelerate_config}", recipe, known) == '"node${MACHINE_RANK}.yaml"'


def test_command_invocation_of_a_program_and_of_a_script(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    ctx = Context("accelerate", "accelerate.yaml", 1, 2)
    inv = command.invocation(command_doc("bin/train", ["--bs={train.micro_batch_size}"]), ctx)
    program = os.path.join(str(tmp_path), "bin/train")  # the launch runs in the run folder
    assert inv.argv[:5] == ["accelerate", "launch", "--config_file", "accelerate.yaml", "--no_python"]
    assert inv.argv[5] == program and inv.argv[6].startswith("--bs=")
    assert (inv.program, inv.install_hint, inv.python) == (program, f"put {program} on PATH", None)

    script = command.invocation(command_doc("/abs/train.py", []), Context("accelerate", "a.yaml", 1, 2, "/p/py"))
    assert script.argv == ["/p/py", "-m", "accelerate.commands.launch", "--config_file", "a.yaml", "/abs/train.py"]
    assert (script.program, script.install_hint, script.python) == ("/p/py", "pip install accelerate", "/p/py")
    on_path = command.invocation(command_doc("train.py", []), ctx)
    assert on_path.argv[-1] == "train.py" and on_path.program == "accelerate"  # a bare name stays a name


# --- a whole lerobot-train command line into a recipe ----------------------------------------------
def import_flags(args: str) -> tuple[str | None, dict, list[str]]:
    recipe, notes = {}, []
    part = lerobot.import_flags(args, recipe, notes)
    return part, recipe, notes


PRESET = "lerobot-train flags: the policy preset chose the optimizer; the recipe takes the policy part's"


def test_import_flags_takes_lerobots_defaults_and_says_so():
    """The flags as given, then LeRobot's defaults for those not given where the recipe alone would
    resolve another value (registry/trainers/lerobot_defaults.py): what the team ran, in one note."""
    from registry.trainers import lerobot_defaults

    given = "--policy.type=act --dataset.repo_id=lerobot/pusht"
    part, recipe, notes = import_flags(given)
    assert part == "act"  # the bundled policy part the recipe extends
    assert recipe == {
        "trainer": {"kind": "lerobot", "lerobot": {"api": "accelerate"}},
        "policy": {"type": "act"},
        "dataset": {"repo_id": "lerobot/pusht"},
    }
    assert notes == [PRESET]
    lerobot_defaults.settle(recipe, part, {"policy.type": "act", "dataset.repo_id": "lerobot/pusht"}, notes)
    assert recipe["trainer"]["lerobot"] == {"api": "accelerate", "push_to_hub": True}  # LeRobot's default
    assert recipe["train"] == {"checkpoint": {"every": 20000}, "log_every": 200, "num_workers": 4}
    assert notes[1].startswith("lerobot-train flags at LeRobot's defaults: written, as the recipe alone")
    assert "--policy.push_to_hub=true (not given; the recipe alone gives false)" in notes[1]


def test_import_flags_under_the_policy_preset():
    """The preset ignores --optimizer.* and --scheduler.*: each is named and left out; lerobot-train
    v0.6.1 has no accumulation flag, so the recipe says what was asked; n_obs_steps is the history."""
    args = (
        "--policy.type=act --policy.push_to_hub=false --use_policy_training_preset=TRUE --optimizer.lr=0.1"
        " --scheduler.type=cosine --gradient_accumulation_steps=4 --policy.n_obs_steps=2"
    )
    part, recipe, notes = import_flags(args)
    assert part == "act"
    assert recipe == {
        "trainer": {"kind": "lerobot", "lerobot": {"api": "accelerate", "push_to_hub": False}},
        "train": {"gradient_accumulation_steps": 4},
        "policy": {"type": "act", "n_obs_steps": 2},
        "dataset": {"n_obs_history": 2},
    }
    assert notes == [
        "lerobot-train flags --optimizer.lr=0.1: ignored by LeRobot under its policy preset; not imported",
        "lerobot-train flags --scheduler.type=cosine: ignored by LeRobot under its policy preset; not imported",
        PRESET,
        "lerobot-train flags --gradient_accumulation_steps=4: lerobot-train v0.6.1 has no such flag",
    ]
    _, recipe, _ = import_flags("--policy.type=act --policy.push_to_hub=false --gradient_accumulation_steps=x")
    assert recipe["train"] == {"gradient_accumulation_steps": "x"}  # left for validation to refuse


def test_import_flags_without_the_preset_and_under_the_parallelism_api():
    args = (
        "--policy.type=diffusion --policy.push_to_hub=false --use_policy_training_preset=false"
        " --optimizer.lr=0.1 --parallelism.dp_shard=2 --gradient_accumulation_steps=x"
    )
    part, recipe, notes = import_flags(args)
    assert part == "diffusion"
    assert recipe == {
        "trainer": {
            "kind": "lerobot",
            "lerobot": {"api": "parallelism", "push_to_hub": False, "args": ["--gradient_accumulation_steps=x"]},
        },
        "policy": {"type": "diffusion"},
        "train": {"optimizer": {"lr": 0.1}},
    }
    # a value the import cannot check without the fields the other files set: said, with what it lacks
    assert notes == [
        "lerobot-train flags parallelism.dp_shard = 2: not checked, no file read sets backend.kind, hardware;"
        " resolve derives it from backend.kind and the world size"
    ]


def test_import_flags_of_a_policy_the_registry_has_no_part_for():
    part, recipe, notes = import_flags("--policy.type=nope --policy.push_to_hub=false")
    assert part is None and recipe["policy"] == {"type": "nope"} and notes == [PRESET]
    part, recipe, _ = import_flags("--policy.push_to_hub=false")
    assert part is None and recipe["policy"] == {}


def test_a_value_in_a_note_is_short():
    from registry.trainers.mapping import short

    assert [short(v) for v in (True, None, [1, 2], {"a": 1}, 5, "x")] == [
        "true",
        "null",
        "[1, 2]",
        '{"a": 1}',
        "5",
        "'x'",
    ]
    assert short("a" * 58) == "'" + "a" * 58 + "'"  # 60 characters: whole
    assert short("a" * 59) == "'" + "a" * 56 + "..."  # 61: cut to 57 and an ellipsis
    assert len(short(list(range(100)))) == 60


def test_import_flags_places_each_flag_where_lerobot_reads_it():
    """A field the table maps, a policy option the recipe holds under policy.options (decoded as
    draccus decodes a flag), and the rest passed through to lerobot-train in the order given."""
    args = (
        "--policy.type=act --policy.push_to_hub=false --wandb.enable=true --seed=3 --resume=true --bogus.x=1"
        " --policy.optimizer_lr=0.5 --policy.temporal_ensemble_coeff=null --policy.n_action_steps=10"
    )
    _, recipe, notes = import_flags(args)
    assert recipe == {
        "trainer": {
            "kind": "lerobot",
            "lerobot": {
                "api": "accelerate",
                "wandb": True,
                "push_to_hub": False,
                "args": ["--resume=true", "--bogus.x=1"],
            },
        },
        "policy": {
            "type": "act",
            "n_action_steps": 10,
            "options": {"optimizer_lr": 0.5, "temporal_ensemble_coeff": None},
        },
        "train": {"seed": 3},
    }
    assert notes == [PRESET]


# --- an OpenTau TrainPipelineConfig JSON into a recipe ---------------------------------------------
def opentau_import(tmp_path, cfg: dict | str, recipe: dict) -> tuple[str | None, dict, list[str]]:
    from registry.trainers import opentau
    from registry.trainers.mapping import Notes

    path = tmp_path / "train.json"
    path.write_text(cfg if isinstance(cfg, str) else json.dumps(cfg))
    notes = Notes()
    return opentau.import_config(path, recipe, notes), recipe, list(notes)


@pytest.mark.parametrize("kind", ["pi07_low_level", "pi07_high_level"])
def test_opentau_import_makes_pi07_float32_under_fsdp_only(tmp_path, kind):
    """OpenTau decides pi07's dtype from accelerate's distributed_type, which no file says: under
    FSDP the import writes float32 and says what it replaced."""
    cfg = {"policy": {"type": kind}, "steps": 10}
    part, recipe, notes = opentau_import(tmp_path, cfg, {"backend": {"kind": "fsdp"}, "policy": {"dtype": "bfloat16"}})
    assert part == {"pi07_low_level": "pi07", "pi07_high_level": None}[kind]  # a bundled part for the low level only
    assert recipe == {
        "backend": {"kind": "fsdp"},
        "policy": {"type": kind, "dtype": "float32"},
        "trainer": {"kind": "opentau"},
        "train": {"steps": 10},
    }
    assert notes == [f"policy.dtype: OpenTau's {kind} under FSDP = 'float32' replaces 'bfloat16' read before"]
    for backend in ("deepspeed", "ddp"):
        _, recipe, _ = opentau_import(tmp_path, cfg, {"backend": {"kind": backend}})
        assert "dtype" not in recipe["policy"] and recipe["trainer"] == {"kind": "opentau"}
    _, recipe, _ = opentau_import(tmp_path, {"policy": {"type": "pi05"}}, {"backend": {"kind": "fsdp"}})
    assert "dtype" not in recipe["policy"]


def test_opentau_import_of_a_broken_json_names_the_file_and_what_it_should_be(tmp_path):
    with pytest.raises(RecipeError) as e:
        opentau_import(tmp_path, "{bad", {})
    assert str(e.value).startswith(
        f"{tmp_path / 'train.json'}:1:2: error[json] not a OpenTau TrainPipelineConfig JSON:"
    )


def test_opentau_import_places_what_no_field_maps_and_says_where_each_value_was(tmp_path):
    """The keyed drop probabilities (`NAME_drop_prob`, not the bare suffix), the options of a
    section, TrainPipelineConfig fields kept whole or a level deep, and for each the line of the
    JSON it came from (what `recipe import` writes as the value's origin)."""
    cfg = {
        "policy": {"type": "pi05", "mystery_knob": [1, 2]},
        "dataset_mixture": {"wrist_drop_prob": 0.1, "_drop_prob": 0.5, "mystery": 3},
        "scheduler": {"decay_lr": 1e-6, "mystery": 1},
        "extra_block": {"a": {"b": 1}},
    }
    from registry.trainers import opentau
    from registry.trainers.mapping import Notes

    path = tmp_path / "train.json"
    path.write_text(json.dumps(cfg, indent=1))
    recipe, notes = {"dataset": {"drop_probs": {"wrist": 0.2}}}, Notes()
    assert opentau.import_config(path, recipe, notes) == "pi05"
    assert recipe == {
        "dataset": {"drop_probs": {"wrist": 0.1}, "options": {"_drop_prob": 0.5, "mystery": 3}},
        "policy": {"type": "pi05", "options": {"mystery_knob": [1, 2]}},
        "train": {"scheduler": {"decay_lr": 1e-6}},
        "trainer": {
            "kind": "opentau",
            "opentau": {"config": {"scheduler": {"mystery": 1}, "extra_block": {"a": {"b": 1}}}},
        },
    }
    assert list(notes) == [
        "dataset.drop_probs.wrist: train.json dataset_mixture.wrist_drop_prob = 0.1 replaces 0.2 read before"
    ]
    lines = {path: int(where.rsplit(":", 2)[1]) for path, where in notes.located.items()}
    text = path.read_text().splitlines()
    for field, key in [
        (("dataset", "drop_probs", "wrist"), '"wrist_drop_prob"'),
        (("dataset", "options", "_drop_prob"), '"_drop_prob"'),
        (("policy", "options", "mystery_knob"), '"mystery_knob"'),
        (("trainer", "opentau", "config", "scheduler", "mystery"), '"mystery": 1'),
        (("trainer", "opentau", "config", "extra_block"), '"extra_block"'),
    ]:
        assert key in text[lines[field] - 1], (field, text[lines[field] - 1])


@pytest.mark.parametrize(
    "overrides, extra", [([], "act"), (["policy.type=pi05"], "pi"), (["policy.type=pi0_fast"], "pi")]
)
def test_lerobot_runs_in_the_trainers_own_python_and_asks_for_its_policys_extra(overrides, extra):
    """Every rank in the Python that has LeRobot; the package extra its policy needs (pi0 and
    pi05 share lerobot[pi]) is what `recipe run` checks before launch."""
    from registry.trainers import lerobot

    doc = compose("act/ddp/2xH100", overrides).data
    inv = lerobot.invocation(doc, Context("accelerate", "a.yaml", 1, 2, python="/envs/lerobot/bin/python"))
    assert (inv.program, inv.python, inv.extra) == ("/envs/lerobot/bin/python", "/envs/lerobot/bin/python", extra)
    assert inv.argv[:5] == ["/envs/lerobot/bin/python", "-m", "accelerate.commands.launch", "--config_file", "a.yaml"]
    on_path = lerobot.invocation(doc, Context("accelerate", "a.yaml", 1, 2))
    assert (on_path.program, on_path.python, on_path.argv[0]) == ("accelerate", None, "accelerate")


def test_opentau_train_from_the_trainers_environment():
    from registry.trainers import opentau

    doc = compose("pi07/zero2/8xA100").data
    inv = opentau.invocation(doc, Context("accelerate", "a.yaml", 1, 8, python="/envs/opentau/bin/python"))
    assert inv.argv == ["/envs/opentau/bin/opentau-train", "--accelerate-config=a.yaml", "--config_path=opentau.json"]
    assert (inv.program, inv.python) == ("/envs/opentau/bin/opentau-train", "/envs/opentau/bin/python")
    assert [type(a) is Raw for a in inv.argv] == [False, False, False]
    # one accelerate file per node: the shell expands the name; a program given as a path stays
    doc = compose("pi07/zero2/8xA100", ["trainer.opentau.program=/opt/ot/opentau-train"]).data
    per_node = opentau.invocation(
        doc, Context("accelerate", Raw('"n${R}.yaml"'), 2, 8, python="/envs/opentau/bin/python")
    )
    assert per_node.argv == [
        "/opt/ot/opentau-train",
        Raw('--accelerate-config="n${R}.yaml"'),
        "--config_path=opentau.json",
    ]
    assert [type(a) is Raw for a in per_node.argv] == [False, True, False]
    assert opentau.invocation(doc, Context("accelerate", "a.yaml", 1, 8)).python is None
