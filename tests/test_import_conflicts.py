"""What `recipe import` reports as an import-conflict (a setup the owning library would refuse at
launch) and what it decides on the way, checked in-process, field by field: each branch of each
check beside a twin that differs only in that branch's condition (docs/failure-modes.md §55, §56,
§58). tests/test_import_faults.py runs the same checks through the command line."""

from __future__ import annotations

import pytest

from registry.errors import Problem
from registry.resolve import accelerate, deepspeed, importer
from registry.trainers.mapping import Notes

FILE = "team/ds.json"
ZERO = {"zero_optimization": {"stage": 2}}


def conflict(message: str, where: str, hint: str) -> Problem:
    return Problem("error", "import-conflict", "", message, where, hint)


def refused(ds: dict, origins: dict | None = None) -> list[Problem]:
    return deepspeed.refused(ds, origins or {}, FILE)


# --- DeepSpeed JSON ------------------------------------------------------------------------------
def test_no_zero_optimization_section():
    assert refused({}) == [
        conflict(
            f"{FILE} has no zero_optimization section",
            FILE,
            "accelerate refuses it: 'Please specify the ZeRO optimization config in the DeepSpeed config.'",
        )
    ]
    assert refused(ZERO) == []
    assert refused({"zero_optimization": {}}) == []  # the section, even empty, is what accelerate asks


@pytest.mark.parametrize("bf16", ["bf16", "bfloat16"])
def test_fp16_and_bf16_both_enabled(bf16):
    ds = {**ZERO, "fp16": {"enabled": True}, bf16: {"enabled": True}}
    origins = {(bf16, "enabled"): "ds.json:4:16", (bf16,): "ds.json:3:3"}
    hint = "DeepSpeed refuses it: 'bfloat16 and fp16 modes cannot be simultaneously enabled'; keep one"
    assert refused(ds, origins) == [conflict(f"{FILE} enables both fp16 and {bf16}", "ds.json:4:16", hint)]
    # where `enabled` has no line of its own: the section's, else the file
    assert refused(ds, {(bf16,): "ds.json:3:3"})[0].origin == "ds.json:3:3"
    assert refused(ds)[0].origin == FILE


@pytest.mark.parametrize(
    "twin",
    [
        {"fp16": {"enabled": False}, "bf16": {"enabled": True}},
        {"fp16": {"enabled": True}, "bf16": {"enabled": False}},
        {"fp16": {"enabled": "true"}, "bf16": {"enabled": True}},  # only True itself enables (as read here)
        {"fp16": {"enabled": True}, "bf16": {"enabled": 1}},
        {"fp16": {"enabled": True}, "bf16": True},  # not a section
        {"fp16": True, "bf16": {"enabled": True}},
        {"bf16": {"enabled": True}, "bfloat16": {"enabled": True}},
        {"fp16": {"enabled": True}},
    ],
)
def test_one_precision_is_no_conflict(twin):
    assert refused({**ZERO, **twin}) == []


def test_the_first_enabled_bf16_key_is_named():
    ds = {**ZERO, "fp16": {"enabled": True}, "bf16": {"enabled": False}, "bfloat16": {"enabled": True}}
    assert refused(ds)[0].message == f"{FILE} enables both fp16 and bfloat16"
    ds["bf16"]["enabled"] = True
    assert refused(ds)[0].message == f"{FILE} enables both fp16 and bf16"


def test_unknown_zero_keys():
    ds = {"zero_optimization": {"stage": 2, "stgae": 3, "bf16": {"enabled": True}}}
    origins = {("zero_optimization", "stgae"): "ds.json:2:5"}
    hint = "DeepSpeed refuses it: DeepSpeedZeroConfig 'Extra inputs are not permitted'"
    assert refused(ds, origins) == [
        conflict(f"{FILE} zero_optimization.stgae is not a ZeRO setting", "ds.json:2:5", hint),
        conflict(
            f"{FILE} zero_optimization.bf16 is not a ZeRO setting (it is a top-level DeepSpeed section)", FILE, hint
        ),
    ]
    for top in ("aio", "fp16", "optimizer"):
        said = refused({"zero_optimization": {top: {}}})
        assert said[0].message.endswith("(it is a top-level DeepSpeed section)")
    known = deepspeed.ZERO_KEYS - set(deepspeed.ZERO_REPLACED)  # every setting, none twice
    assert refused({"zero_optimization": {key: None for key in known}}) == []
    assert refused({"zero_optimization": "stage 2"}) == []  # not a section: the schema's to report
    assert refused({"zero_optimization": {3: 1}}) == []  # a key that is no name: never DeepSpeed's spelling


@pytest.mark.parametrize(("old", "new"), sorted(deepspeed.ZERO_REPLACED.items()))
def test_a_deprecated_zero_key_beside_its_replacement(old, new):
    ds = {"zero_optimization": {"stage": 3, old: True, new: {}}}
    origins = {("zero_optimization", old): "ds.json:5:7"}
    assert refused(ds, origins) == [
        conflict(
            f"{FILE} zero_optimization.{old} is the deprecated form of {new}, which is also set",
            "ds.json:5:7",
            f"DeepSpeed refuses it: 'Cannot provide deprecated parameter {old!r} and replacing parameter"
            f" {new!r} together'; keep {new}",
        )
    ]
    assert refused({"zero_optimization": {"stage": 3, old: True}}) == []  # alone, DeepSpeed maps it
    assert refused({"zero_optimization": {"stage": 3, new: {}}}) == []


def test_legacy_bfloat16_auto():
    ds = {**ZERO, "bfloat16": {"enabled": "auto"}}
    assert refused(ds, {("bfloat16",): "ds.json:9:3"}) == [
        conflict(
            f"{FILE} bfloat16.enabled is 'auto', which accelerate fills in only under the key bf16",
            "ds.json:9:3",
            "accelerate refuses it: '`bfloat16.enabled` not found in kwargs'; write bf16.enabled",
        )
    ]
    assert refused(ds)[0].origin == FILE
    assert refused({**ZERO, "bfloat16": {"enabled": True}}) == []
    assert refused({**ZERO, "bf16": {"enabled": "auto"}}) == []  # the key accelerate fills in
    assert refused({**ZERO, "bfloat16": "auto"}) == []


def test_every_finding_in_one_report():
    ds = {"fp16": {"enabled": True}, "bf16": {"enabled": True}, "bfloat16": {"enabled": "auto"}}
    assert [p.message.split(" ", 1)[1] for p in refused(ds)] == [
        "has no zero_optimization section",
        "enables both fp16 and bf16",
        "bfloat16.enabled is 'auto', which accelerate fills in only under the key bf16",
    ]


# --- accelerate yaml -----------------------------------------------------------------------------
def launch(data: dict, processes: int, machines: int = 1, cpu: bool = False) -> list[Problem]:
    origins = {(key,): f"acc.yaml:{i + 1}:1" for i, key in enumerate(data)}
    return accelerate._launch_conflicts(data, origins, "acc.yaml", processes, machines, cpu)


def test_processes_not_shared_evenly_by_the_machines():
    data = {"num_processes": 6, "num_machines": 4, "main_process_ip": "10.0.0.1"}
    assert launch(data, 6, 4) == [
        conflict(
            "num_processes 6 is not a multiple of num_machines 4",
            "acc.yaml:1:1",
            "num_processes is the total over all machines; accelerate launch starts num_processes //"
            " num_machines = 1 per machine",
        )
    ]
    assert launch(data, 8, 4) == []


@pytest.mark.parametrize(("rank", "bad"), [(0, False), (1, False), (2, True), (-1, True), ("1", False), (True, False)])
def test_machine_rank_within_the_job(rank, bad):
    data = {"num_machines": 2, "machine_rank": rank, "main_process_ip": "10.0.0.1"}
    said = launch(data, 4, 2)
    if not bad:
        assert said == []
        return
    assert said == [
        conflict(
            f"machine_rank {rank} is outside 0..1 (num_machines 2)",
            "acc.yaml:2:1",
            "torch.distributed waits for a rank that no machine has; number the machines from 0",
        )
    ]


def test_several_machines_need_the_main_address_unless_a_hostfile_reaches_them():
    said = launch({"num_machines": 2}, 4, 2)
    assert len(said) == 1 and said[0].message == "num_machines 2 and no main_process_ip"
    assert said[0].origin == "acc.yaml:1:1" and "set main_process_ip (or --main_process_ip)" in said[0].hint
    assert launch({"num_machines": 1}, 4, 1) == []
    assert launch({"num_machines": 2, "main_process_ip": "10.0.0.1"}, 4, 2) == []
    hostfile = {"deepspeed_config": {"deepspeed_multinode_launcher": "pdsh"}}
    assert launch({"num_machines": 2, **hostfile}, 4, 2) == []
    standard = {"deepspeed_config": {"deepspeed_multinode_launcher": "standard"}}
    assert len(launch({"num_machines": 2, **standard}, 4, 2)) == 1
    assert len(launch({"num_machines": 2, "deepspeed_config": "x.json"}, 4, 2)) == 1


@pytest.mark.parametrize(
    ("ids", "cpu", "bad"),
    [
        ("0,1", False, True),
        ("0,1,2,3", False, False),
        ("all", False, False),
        (" ALL ", False, False),
        (0, False, True),
        ("0,1", True, False),
        ("", False, False),
        (["0", "1"], False, False),
    ],
)
def test_more_processes_than_named_gpus(ids, cpu, bad):
    said = launch({"num_processes": 4, "gpu_ids": ids}, 4, 1, cpu)
    if not bad:
        assert said == []
        return
    named = len(str(ids).split(","))
    assert said == [
        conflict(
            f"4 processes per machine but gpu_ids names {named} GPUs ({ids})",
            "acc.yaml:2:1",
            "accelerate launch makes only gpu_ids visible, so processes share GPUs or fail on an"
            " invalid device ordinal; lower num_processes or name more GPUs",
        )
    ]


def test_processes_per_machine_count_against_the_named_gpus():
    data = {"num_machines": 2, "main_process_ip": "10.0.0.1", "gpu_ids": "0,1"}
    assert launch(data, 4, 2) == []  # 2 a machine, 2 named
    assert len(launch(data, 8, 2)) == 1


def test_sequence_parallelism_divides_the_processes():
    data = {"distributed_type": "DEEPSPEED", "parallelism_config": {"parallelism_config_sp_size": 3}}
    origins = {("parallelism_config", "parallelism_config_sp_size"): "acc.yaml:3:5"}
    said = accelerate._launch_conflicts(data, origins, "acc.yaml", 4, 1, False)
    assert said == [
        conflict(
            "DeepSpeed sequence parallelism of 3 does not divide num_processes 4",
            "acc.yaml:3:5",
            "DeepSpeed builds sequence-parallel groups of sp_size ranks from the world; use a divisor",
        )
    ]
    assert accelerate._launch_conflicts(data, origins, "acc.yaml", 6, 1, False) == []
    assert accelerate._launch_conflicts({**data, "distributed_type": "FSDP"}, origins, "acc.yaml", 4, 1, False) == []


@pytest.mark.parametrize(("flag", "other"), [("fp16", "bf16"), ("bf16", "fp16")])
def test_a_precision_flag_against_the_json(flag, other):
    ds = {other: {"enabled": True}}
    said = accelerate._flag_precision(flag, ds, {(other, "enabled"): "ds.json:2:3"}, "ds.json")
    assert said == [
        conflict(
            f"--mixed_precision {flag} beside ds.json, which enables {other}",
            "ds.json:2:3",
            f"accelerate refuses it: '`--mixed_precision` arg cannot be set to `{flag}` when `{other}` is set in"
            " the DeepSpeed config file'; drop the flag or make them agree",
        )
    ]
    assert accelerate._flag_precision(flag, {other: {"enabled": "TRUE"}}, {}, "ds.json")[0].origin == "ds.json"
    for twin in ({other: {"enabled": False}}, {other: {}}, {flag: {"enabled": True}}, {other: True}):
        assert accelerate._flag_precision(flag, twin, {}, "ds.json") == []
    assert accelerate._flag_precision("no", ds, {}, "ds.json") == []
    assert accelerate._flag_precision(None, ds, {}, "ds.json") == []
    assert accelerate._flag_precision(flag, "ds.json", {}, "ds.json") == []


# --- decisions the import writes into the recipe --------------------------------------------------
@pytest.mark.parametrize("kind", ["SHARDED_STATE_DICT", "LOCAL_STATE_DICT"])
def test_a_sharded_save_is_not_a_consolidated_checkpoint(kind):
    recipe, notes = {"backend": {"kind": "fsdp", "state_dict_type": kind}}, Notes()
    importer._sharded_save(recipe, notes)
    assert recipe["train"] == {"checkpoint": {"consolidated": False}}
    assert notes == [
        f"train.checkpoint.consolidated: false, as the script saves through fsdp_state_dict_type {kind}"
        " (per-rank shards, not one model file)"
    ]
    kept = {"backend": {"kind": "fsdp", "state_dict_type": kind}, "train": {"steps": 5, "checkpoint": {"every": 2}}}
    importer._sharded_save(kept, Notes())
    assert kept["train"] == {"steps": 5, "checkpoint": {"every": 2, "consolidated": False}}


@pytest.mark.parametrize(
    "backend",
    [
        {"kind": "fsdp", "state_dict_type": "FULL_STATE_DICT"},
        {"kind": "fsdp", "state_dict_type": None},
        {"kind": "fsdp"},
        {"kind": "deepspeed", "state_dict_type": "SHARDED_STATE_DICT"},
    ],
)
def test_a_full_or_absent_save_type_changes_nothing(backend):
    recipe, notes = {"backend": dict(backend)}, Notes()
    importer._sharded_save(recipe, notes)
    assert recipe == {"backend": backend} and notes == []


# --- values as the libraries read them -----------------------------------------------------------
def test_an_nvme_path_of_none_is_no_path():
    from registry.doc import MISSING

    assert accelerate._nvme(None) is MISSING and accelerate._nvme("none") is MISSING
    assert accelerate._nvme("/local_nvme") == "/local_nvme" and accelerate._nvme("None") == "None"


def test_whole_floats_read_as_deepspeeds_ints():
    assert deepspeed._whole(5e8) == 500000000 and type(deepspeed._whole(5e8)) is int
    assert deepspeed._whole(0.5) == 0.5 and deepspeed._whole(7) == 7 and deepspeed._whole("auto") == "auto"
    assert deepspeed._whole(True) is True  # a bool is no float
