"""`recipe import` on malformed input: one clear line and a non-zero exit, never a traceback
(issue 13). Each case is a kind of input that crashed the import before."""

import json

import pytest
from conftest import run_cli

ACCELERATE_DS = "distributed_type: DEEPSPEED\nnum_processes: 8\ndeepspeed_config:\n  deepspeed_config_file: ds.json\n"
DS = {"train_micro_batch_size_per_gpu": 4, "zero_optimization": {"stage": 2}, "bf16": {"enabled": True}}
OPENTAU = {"policy": {"type": "pi07_low_level", "n_obs_steps": 1}, "dataset_mixture": {"n_obs_history": 1}}


def ds(**changes) -> str:
    return json.dumps({**DS, **changes})


# (id, accelerate yaml, DeepSpeed JSON, OpenTau JSON, extra arguments, what the one line says)
CASES = [
    # accelerate's distributed_type as a list or a mapping: "unhashable type"
    ("distributed-type-list", "distributed_type: [FSDP]\nnum_processes: 2\n", None, None, [], "a.yaml:1:1"),
    ("distributed-type-map", "distributed_type: {a: 1}\nnum_processes: 2\n", None, None, [], "distributed_type"),
    # a deepspeed_config_file name longer than the file system takes: OSError from is_file()
    (
        "ds-file-name-too-long",
        f"distributed_type: DEEPSPEED\nnum_processes: 8\ndeepspeed_config:\n  deepspeed_config_file: {'a' * 5000}\n",
        None,
        None,
        [],
        "cannot look it up",
    ),
    # a DeepSpeed JSON nested past Python's recursion limit: RecursionError in json
    ("ds-nested-deep", ACCELERATE_DS, "[" * 100_000 + "]" * 100_000, None, [], "nested too deeply"),
    # the same in the OpenTau config
    ("opentau-nested-deep", None, None, '{"a":' * 100_000 + "1" + "}" * 100_000, [], "nested too deeply"),
    # OpenTau's policy.type as a list or a mapping: "unhashable type"
    (
        "opentau-policy-type-list",
        None,
        None,
        json.dumps({**OPENTAU, "policy": {"type": ["pi07"]}}),
        [],
        "error[import-value] policy.type",
    ),
    # an unbalanced quote in --trainer-args or --launch-args: ValueError from shlex
    ("trainer-args-quote", None, None, None, ["--trainer", "lerobot", "--trainer-args=--policy.type='act"], "quot"),
    ("launch-args-quote", None, None, None, ["--launch-args=--num_processes '8"], "quot"),
    # an integer of more than 4300 digits in the yaml: ValueError from int()
    (
        "yaml-int-5000-digits",
        "distributed_type: MULTI_GPU\nnum_processes: 1" + "0" * 5000 + "\n",
        None,
        None,
        [],
        "a.yaml:2:16",
    ),
    # the same digits quoted, as num_processes: ValueError from int()
    (
        "num-processes-5000-digits",
        "distributed_type: MULTI_GPU\nnum_processes: '1" + "0" * 5000 + "'\n",
        None,
        None,
        [],
        "error[import-value] num_processes",
    ),
    # a text micro batch times a huge accumulation in the batch check: MemoryError and OverflowError
    (
        "ds-batch-memory",
        ACCELERATE_DS,
        ds(train_micro_batch_size_per_gpu="4", gradient_accumulation_steps=2**60, train_batch_size=8),
        None,
        [],
        "wrote",
    ),
    (
        "ds-batch-overflow",
        ACCELERATE_DS,
        ds(train_micro_batch_size_per_gpu="4", gradient_accumulation_steps=10**30, train_batch_size=8),
        None,
        [],
        "gradient_accumulation_steps: an integer of 31 digits is out of range",  # refused where it is read
    ),
    # an output that cannot be written (its folder is a file): OSError from write_atomic
    ("output-not-writable", None, None, None, ["-o", "a.yaml/recipe.yaml"], "cannot write"),
    # NaN, Infinity and overflowing numbers in the DeepSpeed JSON, which Python's json reads
    ("ds-nan", ACCELERATE_DS, ds(gradient_clipping=float("nan")), None, [], "ds.json:1:"),
    (
        "ds-infinity",
        ACCELERATE_DS,
        '{"zero_optimization": {"stage": 2}, "gradient_clipping": 1e999}',
        None,
        [],
        "finite",
    ),
    # terminal control characters in a JSON value
    ("ds-control-char", ACCELERATE_DS, ds(gradient_clipping="\x1b[2J1.0"), None, [], "error[control-char]"),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_malformed_import_input_is_one_clear_line(tmp_path, case):
    _, accelerate, deepspeed, opentau, extra, expected = case
    (tmp_path / "a.yaml").write_text(accelerate or "distributed_type: MULTI_GPU\nnum_processes: 2\n")
    args = ["import", "--accelerate-config", "a.yaml"]
    if deepspeed is not None:
        (tmp_path / "ds.json").write_text(deepspeed)
    if opentau is not None:
        (tmp_path / "c.json").write_text(opentau)
        args += ["--trainer", "opentau", "--trainer-config", "c.json"]
    if "-o" not in extra:
        args += ["-o", "out.yaml"]
    r = run_cli(*args, *extra, cwd=tmp_path)
    out = r.stdout + r.stderr
    assert r.returncode != 0, out
    assert "Traceback" not in out, out
    errors = [line for line in out.splitlines() if "error" in line and not line.startswith("note:")]
    if expected == "wrote":  # the import goes through; validation reports the wrong type at its line
        assert "error[type] train.micro_batch_size" in out, out
    else:
        assert len(out.strip().splitlines()) == 1, out
        assert expected in errors[0], out


def test_a_double_dash_given_as_the_flags_is_no_flags_not_a_traceback():
    """argparse reads `--trainer-args=--` (and `--launch-args=--`) as an empty list: the import
    reads it as no flags (found by tests/fuzz.py)."""
    from pathlib import Path

    accelerate = str(Path(__file__).parent / "data" / "accelerate_zero2.yaml")
    r = run_cli(
        "validate", "--accelerate-config", accelerate, "--trainer", "lerobot", "--trainer-args=--", "--policy", "act"
    )
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    assert "error[lerobot-no-deepspeed]" in r.stdout
    r = run_cli("validate", "--accelerate-config", accelerate, "--launch-args=--")
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
