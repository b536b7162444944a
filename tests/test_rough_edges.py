"""Rough edges a newcomer meets first: numbers options take, sbatch lines that change the GPUs
per node, what a dry run keeps quiet, the catalog's silence, GPU name suggestions and what
`recipe diff` calls a change."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from registry import commands

# --- 1. numbers an option takes ---------------------------------------------------------------
REFUSED = [
    ("tune", "--budget", "nan"),
    ("tune", "--budget", "NaN"),
    ("tune", "--budget", "inf"),
    ("tune", "--budget", "-inf"),
    ("tune", "--budget", "-1"),
    ("tune", "--budget", "0"),
    ("tune", "--budget", "ten"),
    ("tune", "--global-batch", "0"),
    ("tune", "--global-batch", "8.5"),
    ("tune", "--steps", "0"),
    ("tune", "--warmup", "-1"),
    ("tune", "--tie-runs", "-1"),
    ("bench", "--steps", "0"),
    ("bench", "--warmup", "-1"),
    ("bench", "--repeats", "0"),
    ("bench", "--repeats", "nan"),
]
ACCEPTED = [
    ("tune", "--budget", "0.5", 0.5),
    ("tune", "--budget", "30", 30.0),
    ("tune", "--global-batch", "8", 8),
    ("tune", "--warmup", "0", 0),
    ("tune", "--tie-runs", "0", 0),
    ("bench", "--steps", "1", 1),
    ("bench", "--repeats", "3", 3),
]


def _parse(verb: str, option: str, value: str):
    target = "tiny/cpu" if verb == "tune" else "tiny/ddp/cpu"
    # OPTION=VALUE: argparse takes a separate '-inf' for an option of its own
    return commands._parser(verb).parse_args([verb, target, f"{option}={value}"])


@pytest.mark.parametrize(("verb", "option", "value"), REFUSED)
def test_a_number_no_option_means_is_refused_at_parsing_in_one_line(verb, option, value, capsys):
    with pytest.raises(SystemExit) as stopped:
        _parse(verb, option, value)
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "usage:" not in err, err
    assert err.startswith(f"recipe {verb}: error: argument {option}: {value!r}"), err
    assert "at least" in err or "more than" in err  # says what is allowed


@pytest.mark.parametrize(("verb", "option", "value", "parsed"), ACCEPTED)
def test_a_number_an_option_means_is_parsed(verb, option, value, parsed):
    got = getattr(_parse(verb, option, value), option[2:].replace("-", "_"))
    assert got == parsed and type(got) is type(parsed)


def test_every_number_option_of_tune_bench_and_estimate_refuses_nan():
    """No int or float option is left on a bare int() or float(): each refuses 'nan'."""
    for verb in ("tune", "bench", "estimate"):
        sub = commands._parser(verb)._subparsers._group_actions[0].choices[verb]
        for action in sub._actions:
            if action.type in (int, float):
                pytest.fail(f"recipe {verb} {action.option_strings}: a bare {action.type.__name__}")
            if action.type is not None and action.option_strings:
                with pytest.raises(argparse.ArgumentTypeError):
                    action.type("nan")


# --- 2. sbatch options as sbatch's getopt_long reads them -------------------------------------
# pi07/zero2/2x8xH100: 2 nodes of 8 GPUs. Each extra line below changes a count as sbatch reads it.
CHANGES_A_COUNT = [
    ("--gpus-per-n=4", "asks for 4 GPUs per node"),  # a unique prefix of --gpus-per-node
    ("--gpus-per-no 4", "asks for 4 GPUs per node"),
    ("--gpus-per-node=4", "asks for 4 GPUs per node"),
    ("--gres gpu:h100:4", "asks for 4 GPUs per node"),
    ("--gpus=8", "asks for 8 GPUs in all"),  # --gpus is an option of its own, not ambiguous
    ("--gpus 8", "asks for 8 GPUs in all"),
    ("-G8", "asks for 8 GPUs in all"),
    ("--gpus-per-t=4", "asks for 4 GPUs per task"),
    ("--tres-per-task=gres/gpu:4", "asks for 4 GPUs per task"),
    ("--nodes=3", "asks for 3 nodes"),
    ("--nodes 3", "asks for 3 nodes"),
    ("-N3", "asks for 3 nodes"),
    ("-vN 3", "asks for 3 nodes"),  # grouped letters: -v, then -N with the next word
    ("--exclusive --gpus-per-n=4", "asks for 4 GPUs per node"),
    ("--exclusive=user --nodes 3", "asks for 3 nodes"),
]
LEAVES_THE_COUNTS = [
    "--gpus-per-node=8",
    "--gpus-per-n=8",  # the hardware part's own count, abbreviated
    "--gpus 16",
    "--gpus-p=4",  # ambiguous (gpus-per-node, -socket, -task): sbatch refuses it, no count changes
    "--nod=3",  # ambiguous (nodefile, nodelist, nodes)
    "--gre=gpu:4",  # ambiguous (gres, gres-flags)
    "--gres-flags=enforce-binding",
    "--gpu-bind=closest",
    "--exclusive # --nodes=3",  # sbatch reads the rest of the line as a comment
    "--job-name='--nodes=3'",  # a value, not an option
    "--comment --nodes=3",  # --comment takes the next word as its value
]


def _engine_errors(extra: str) -> list:
    from registry.compose import compose
    from registry.validate import validate

    recipe = compose("pi07/zero2/2x8xH100", ["launch.launcher=slurm", f"launch.slurm.extra={[extra]!r}"])
    return [p for p in validate(recipe.data, recipe.origins) if p.is_error]


@pytest.mark.parametrize(("extra", "said"), CHANGES_A_COUNT)
def test_an_abbreviated_or_grouped_sbatch_option_that_changes_a_count_is_refused(extra, said):
    errors = _engine_errors(extra)
    assert [p.rule for p in errors] == ["engine-counts"] and said in errors[0].message, (extra, errors)


@pytest.mark.parametrize("extra", LEAVES_THE_COUNTS)
def test_an_sbatch_line_that_leaves_the_counts_passes(extra):
    assert [p.render() for p in _engine_errors(extra)] == []


def test_long_options_are_matched_as_getopt_long_matches_them():
    from registry.validate import engines

    assert engines.long_option("--gpus-per-n") == ("gpus-per-node", "required")
    assert engines.long_option("--gpus") == ("gpus", "required")  # exact beats the longer names
    assert engines.long_option("--gpus-p") is None  # ambiguous
    assert engines.long_option("--ta=8") == ("ntasks-per-node", "required")  # --tasks-per-node, its alias
    assert engines.long_option("--no-such-option") is None


# --- 3. a dry run says what the pre-flight of a real run would stop on --------------------------
DATASETS = Path(__file__).resolve().parent / "data" / "datasets"
CPU_ACT = ["act/ddp/cpu", "hardware.processes_per_node=1", "dataset.action_freq=10", "policy.chunk_size=20"]
CPU_ACT += ["policy.n_action_steps=20"]


def test_a_dry_run_says_the_pre_flight_errors_and_exits_1(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code = commands.main(["run", *CPU_ACT, f"dataset.root={DATASETS / 'two-cameras'}", "--dry-run"])
    out, err = capsys.readouterr()
    assert "==> launch.sh <==" in out and "==> command <==" in out  # the plan is still printed
    lines = err.strip().splitlines()
    assert code == 1 and "error[dataset-cameras]" in lines[-2], err
    assert lines[-1].startswith("recipe: dry run: a real run would stop here, on 1 pre-flight error (hint:")
    assert "--waive dataset-cameras=" in lines[-1]
    assert not list(tmp_path.iterdir())  # nothing written, nothing launched


def test_a_dry_run_with_the_error_waived_says_it_waived_and_exits_0(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    argv = [
        "run",
        *CPU_ACT,
        f"dataset.root={DATASETS / 'two-cameras'}",
        "--dry-run",
        "--waive",
        "dataset-cameras=top only",
    ]
    assert commands.main(argv) == 0
    err = capsys.readouterr().err
    assert "error[dataset-cameras]" in err and "[waived: top only]" in err and "would stop" not in err


def test_a_dry_run_of_a_dataset_not_on_this_disk_says_so(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert commands.main(["run", *CPU_ACT, f"dataset.root={tmp_path / 'none'}", "--dry-run"]) == 0
    err = capsys.readouterr().err
    assert "recipe: note: dataset not checked: lerobot/aloha_sim_transfer_cube_human: no local meta/info.json" in err
    assert str(tmp_path / "none" / "meta" / "info.json") in err


# --- 5. a GPU name the catalog lacks: the same model first ---------------------------------------
@pytest.mark.parametrize(
    ("gpu", "first"),
    [
        ("H100-80GB", ["H100-SXM", "H100-PCIe", "H100-NVL"]),  # H100s first (80 GB before 94), then by memory
        ("H100 80GB", ["H100-SXM", "H100-PCIe", "H100-NVL"]),
        ("h100", ["H100"]),  # the alias, in other case
        ("A100-80G", ["A100-80GB", "A100-40GB"]),
        ("H200-141GB", ["H200"]),
        ("B200-192GB", ["B200"]),
        ("v100-32gb", ["V100-32GB", "V100-16GB"]),
        ("rtx4090", ["RTX-4090"]),
    ],
)
def test_a_gpu_name_is_answered_with_its_model_first(gpu, first):
    from registry.compose import catalog

    said = str(catalog.unknown(gpu))
    suggested = said.split("did you mean ", 1)[1].split("?", 1)[0].split(", ")
    assert suggested[: len(first)] == first, said
    assert all(catalog.model(s) == catalog.model(first[0]) for s in suggested[: len(first)])


def test_an_h100_by_memory_is_suggested_h100s_then_the_other_80gb_card():
    from registry.compose import catalog

    assert catalog.suggestions("H100-80GB") == ["H100-SXM", "H100-PCIe", "H100-NVL", "A100-80GB"]


def test_a_hardware_name_with_an_unknown_gpu_suggests_its_model(capsys):
    assert commands.main(["validate", "pi07/zero2/8xH100-80GB"]) == 2
    said = "".join(capsys.readouterr())
    assert "did you mean H100-SXM, H100-PCIe, H100-NVL" in said, said


# --- 4. the catalog says how far it is, on stderr -----------------------------------------------
def test_the_catalog_says_how_far_it_is_on_stderr_and_keeps_stdout(tmp_path, capsys):
    assert commands.main(["catalog", "-o", str(tmp_path / "site")]) == 0
    out, err = capsys.readouterr()
    assert out.count("\n") == 1 and out.startswith(f"wrote {tmp_path / 'site' / 'index.html'}: ")
    lines = err.splitlines()
    assert all(line.startswith("recipe catalog: ") for line in lines) and "\r" not in err, err
    assert lines[0] == "recipe catalog: listing every recipe, published version and cell of every source"
    checked = [line for line in lines if " checked " in line]
    assert 2 <= len(checked) <= 5, lines  # a few lines, not one per recipe
    total = checked[-1].split(" of ")[1].split()[0]
    assert checked[-1] == f"recipe catalog: checked {total} of {total} (composed, validated, estimated)"
    pages = len(list((tmp_path / "site").rglob("*.html")))
    assert lines[-1] == f"recipe catalog: writing {pages} pages into {tmp_path / 'site'}"


# --- 6. recipe diff answers "what would train differently" --------------------------------------
def test_diff_of_an_import_against_its_cell_lists_what_would_train_differently(tmp_path, capsys, monkeypatch):
    """pi07/zero2/8xA100 resolved, then its accelerate yaml and OpenTau config imported back: the
    import loses the recipe's metadata, results, the estimate's sizes and its env line, writes
    `env: {}` and a few values of its own. Four of those change the training."""
    monkeypatch.chdir(tmp_path)
    cell = "pi07/zero2/8xA100"
    assert commands.main(["resolve", cell, "-o", "resolved"]) == 0
    argv = ["import", "--accelerate-config", "resolved/accelerate.yaml", "--trainer", "opentau"]
    assert commands.main([*argv, "--trainer-config", "resolved/opentau.json", "-o", "mine.yaml"]) == 0
    capsys.readouterr()
    assert commands.main(["diff", cell, "mine.yaml"]) == 1
    out, err = capsys.readouterr()
    assert [line.split(":", 1)[0] for line in out.splitlines()] == [
        "env.PYTORCH_CUDA_ALLOC_CONF",  # the cell's env line, which the import cannot see
        "train.checkpoint.every",
        "trainer.opentau.config.max_action_dim",
        "trainer.opentau.config.max_state_dim",
    ], out
    assert "results" not in out and "recipe." not in out and "(absent) -> {}" not in out
    hidden = err.split("recipe diff: ", 1)[1].split(" more", 1)[0]
    assert int(hidden) >= 8 and "--all shows them" in err
    assert commands.main(["diff", cell, "mine.yaml", "--all"]) == 1
    everything = capsys.readouterr().out.splitlines()
    assert len(everything) == 4 + int(hidden)
    assert any(line.startswith("results: ") for line in everything)
    assert any(line.startswith("env: (absent) -> {}") for line in everything)


def test_diff_of_recipes_that_differ_in_metadata_only_is_the_same(tmp_path, capsys):
    """A copy of a cell with another summary and no results trains the same: exit 0 and nothing on stdout."""
    import yaml

    from registry.compose import compose

    data = compose("tiny/ddp/cpu").data
    data["recipe"] = {**data["recipe"], "summary": "mine", "owners": ["me"]}
    data["results"] = []
    data["env"] = {}
    (tmp_path / "mine.yaml").write_text(yaml.safe_dump(data))
    assert commands.main(["diff", "tiny/ddp/cpu", str(tmp_path / "mine.yaml")]) == 0
    out, err = capsys.readouterr()
    assert out == "" and "--all shows" in err
    assert commands.main(["diff", "tiny/ddp/cpu", str(tmp_path / "mine.yaml"), "--all"]) == 1


def test_a_dry_run_away_from_its_hardware_judges_the_dataset_not_this_host(tmp_path, capsys, monkeypatch):
    """Reading an 8-GPU plan on a host without them is what a dry run is for: the host rules (this
    host's /dev/shm, disk) are left out with a note, the dataset rules still stop it."""
    from registry.run import machine

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(machine, "gpus", lambda: [])  # this host: no GPU, as on CI
    heavy = ["pi07/zero2/8xA100", "train.num_workers=64"]  # /dev/shm would be too small on any host
    assert commands.main(["run", *heavy, "--dry-run"]) == 0
    err = capsys.readouterr().err
    assert "host-shm" not in err and "the host checks were left out: the recipe needs 8 x A100" in err, err
    two = f"dataset.root={DATASETS / 'two-cameras'}"
    code = commands.main(["run", "act/ddp/8xA100", two, "--dry-run"])
    err = capsys.readouterr().err
    assert code == 1 and "error[dataset-cameras]" in err and "the host checks were left out" in err, err


@pytest.mark.parametrize(
    ("line", "refused"),
    [
        ("--ntasks-per-node=8", True),
        ("--ntasks-per-n=8", True),  # getopt_long's unique prefix: the old pattern let it through
        ("--ta=8", True),  # --tasks-per-node, --ntasks-per-node's alias
        ("-n8", True),
        ("-n 8", True),
        ("-vn3", True),  # grouped letters: -v, then -n 3
        ("--ntasks 4", True),
        ("--exclusive --ntasks=3", True),  # not the first option of its line
        ("--ntasks-per-gpu=1", True),
        ("--ntasks-per-tres=1", True),  # tasks per generic resource: a spelling the list lacked
        ("--ntasks-per-t=1", True),
        ("--exclusive", False),
        ("--nodelist=a,b", False),
        ("--comment='--ntasks=3'", False),  # a value, not an option
    ],
)
def test_an_extra_sbatch_line_that_sets_tasks_is_refused_however_spelt(line, refused):
    from registry.compose import compose
    from registry.validate import validate

    recipe = compose("act/ddp/2x8xH100", ["launch.launcher=slurm", f"launch.slurm.extra={[line]!r}"])
    rules = [p.rule for p in validate(recipe.data, recipe.origins) if p.is_error]
    assert rules == (["slurm-one-task-per-node"] if refused else []), (line, rules)


@pytest.mark.parametrize(
    ("line", "refused"),
    [
        ("--gpus-per-socket=2 --sockets-per-node=2", True),  # 4 per node on an 8-GPU part: was let through
        ("--gpus-per-so=2 --sockets-per-n=2", True),
        ("--gpus-per-socket=4", True),  # per node: the node's socket count decides
        ("--gpus-per-socket=4 --sockets-per-node=2", False),  # 8, as the part says
        ("--sockets-per-node=2", False),
    ],
)
def test_gpus_per_socket_are_counted_per_node_or_refused(line, refused):
    from registry.compose import compose
    from registry.validate import validate

    recipe = compose("act/ddp/2x8xH100", ["launch.launcher=slurm", f"launch.slurm.extra={[line]!r}"])
    rules = [p.rule for p in validate(recipe.data, recipe.origins) if p.is_error]
    assert rules == (["engine-counts"] if refused else []), (line, rules)
