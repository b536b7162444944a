"""Every field the resolvers and trainer adapters write, by value: for one cell per backend and
trainer (and per launcher), the files `recipe resolve` writes and the launch line are compared
whole with tests/data/resolved.json. A renamed LeRobot flag, an accelerate key dropped or a value
written from the wrong field changes a line here, whether or not the trainer is installed.

The record holds what the code wrote when it was last refreshed; a change of output that is meant
is refreshed, and the diff reviewed, with:

    python tests/test_resolved_values.py --record

Before refreshing a trainer's command line, run that trainer's own check on it
(tests/test_lerobot_upstream.py, tests/test_opentau_upstream.py: docs/mutation.md)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml

if __name__ == "__main__":  # run as a script: this checkout's registry, sealed off as the tests are
    sys.path[:0] = [str(Path(__file__).resolve().parent.parent), str(Path(__file__).resolve().parent)]
    import conftest  # noqa: F401  (its import seals the environment: no user config or sources)

from registry.compose import compose
from registry.resolve import resolve

RECORD = Path(__file__).parent / "data" / "resolved.json"
K8S = ["launch.launcher=kubernetes", "launch.image=ghcr.io/team/train:1"]
# (cell, overrides): every backend and trainer, LeRobot's policies, every launcher
CELLS = [
    ("pi07/zero2/8xA100", []),  # OpenTau under DeepSpeed ZeRO-2
    ("pi07/fsdp/8xA100", []),  # OpenTau under FSDP1
    ("pi05/ddp/8xH200", []),  # OpenTau under DDP
    ("act/ddp/8xA100", []),  # LeRobot ACT under DDP
    ("act/fsdp/2xH100", []),  # LeRobot under FSDP1, CPU-efficient loading
    ("diffusion/ddp/8xH100", []),
    ("smolvla/ddp/8xA100", []),
    ("act/fsdp/2xH100", ["trainer.lerobot.api=parallelism", "launch.launcher=torchrun", "train.checkpoint.resumable=false"]),
    ("ref-100m/fsdp2/2xH100", []),  # built-in trainer under FSDP2
    ("ref-100m/fsdp-grad-op/2xH100", []),
    ("tiny/zero1/cpu", []),
    ("tiny/zero3/cpu", []),
    ("tiny/zero3-offload/cpu", []),
    ("tiny/ddp/cpu", []),
    ("pi07/zero2/2x8xH100", []),  # two nodes
    ("pi07/zero2/2x8xH100", ["launch.launcher=slurm"]),
    ("pi07/zero2/2x8xH100", ["launch.launcher=skypilot"]),
    ("pi07/zero2/2x8xH100", K8S),
    ("tiny/ddp/cpu", ["hardware.processes_per_node=1", "trainer.kind=command", "trainer.command.program=/opt/team/train.sh",
                      "trainer.command.args=['--steps={train.steps}', '--out={output_dir}']"]),
]  # fmt: skip
WRITTEN_ELSEWHERE = ("recipe.lock.yaml",)  # hashes of the inputs: tests/test_resolve.py checks the lock


def key(cell: str, overrides: list[str]) -> str:
    return " ".join([cell, *overrides])


def written(cell: str, overrides: list[str]) -> dict:
    bundle = resolve(compose(cell, overrides))
    return {
        "files": {name: text for name, text in bundle.files.items() if name not in WRITTEN_ELSEWHERE},
        "command": bundle.command,
        "program": bundle.program,
        "package": bundle.package,
        "proven": list(bundle.proven) if bundle.proven else None,
        "resume_args": list(bundle.resume_args) if bundle.resume_args is not None else None,
    }


@pytest.fixture(scope="module")
def record() -> dict:
    return json.loads(RECORD.read_text(encoding="utf-8"))


@pytest.mark.parametrize("cell, overrides", CELLS, ids=[key(c, o) for c, o in CELLS])
def test_every_written_value_is_the_recorded_one(record, cell, overrides):
    expected = record[key(cell, overrides)]
    actual = written(cell, overrides)
    assert sorted(actual["files"]) == sorted(expected["files"])
    for name, text in expected["files"].items():
        assert actual["files"][name].splitlines() == text.splitlines(), name  # a line-by-line diff on failure
    assert {k: v for k, v in actual.items() if k != "files"} == {k: v for k, v in expected.items() if k != "files"}


def test_the_record_has_no_stale_cell(record):
    assert set(record) == {key(c, o) for c, o in CELLS}


def fsdp_config(overrides: list[str]) -> dict:
    files = resolve(compose("act/fsdp/2xH100", overrides)).files
    return yaml.safe_load(files["accelerate.yaml"])["fsdp_config"]


@pytest.mark.parametrize(
    "sync, ram_efficient, written_sync",
    [(False, True, True), (False, False, False), (True, False, True), (True, True, True)],
)
def test_cpu_efficient_loading_forces_sync_module_states(sync, ram_efficient, written_sync):
    """accelerate refuses fsdp_cpu_ram_efficient_loading without fsdp_sync_module_states: the
    ranks that loaded no weights would train from uninitialised ones (docs/failure-modes.md §61)."""
    config = fsdp_config(
        [
            f"backend.sync_module_states={str(sync).lower()}",
            f"backend.cpu_ram_efficient_loading={str(ram_efficient).lower()}",
        ]
    )
    assert config["fsdp_cpu_ram_efficient_loading"] is ram_efficient
    assert config["fsdp_sync_module_states"] is written_sync


def main() -> None:
    if sys.argv[1:] != ["--record"]:
        raise SystemExit(__doc__)
    RECORD.write_text(json.dumps({key(c, o): written(c, o) for c, o in CELLS}, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {RECORD} ({len(CELLS)} cells)")


if __name__ == "__main__":
    main()


# --- what recipe import reads back from a team's accelerate yaml (registry/resolve/fsdp.py) ---------
@pytest.mark.parametrize(
    "given, read",
    [(w, True) for w in ("y", "Yes", "t", "TRUE", "on", "1")]
    + [(w, False) for w in ("n", "NO", "f", "False", "off", "0")]
    + [(True, True), (False, False), ("maybe", "maybe"), (1, 1), (None, None)],
)
def test_an_fsdp_flag_is_read_as_accelerates_str_to_bool_reads_it(given, read):
    from registry.resolve.fsdp import truth

    assert truth(given) == read and type(truth(given)) is type(read)


@pytest.mark.parametrize(
    "given, read",
    [(1, "FULL_SHARD"), (2, "SHARD_GRAD_OP"), (3, "NO_SHARD"), (4, "HYBRID_SHARD"), (5, "HYBRID_SHARD_ZERO2"),
     ("1", "FULL_SHARD"), ("5", "HYBRID_SHARD_ZERO2"), ("full_shard", "FULL_SHARD"), (0, 0), (6, 6), ("6", "6"),
     ("0", "0"), (True, True), (None, None)],
)  # fmt: skip
def test_an_fsdp1_strategy_is_read_by_name_or_number(given, read):
    from registry.resolve.fsdp import strategy, upper

    assert strategy(given) == read
    assert upper("sharded_state_dict") == "SHARDED_STATE_DICT" and upper(2) == 2
