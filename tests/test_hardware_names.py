"""Generated hardware names (`2xH200`, `2x8xB200`), the catalog's aliases and device names, the
host's hardware name, and the T4 (a GPU without bf16)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import ROOT, heavy_imports, run_cli

from registry.compose import Plan, catalog, compose, hardware
from registry.errors import RecipeError
from registry.load import load_file
from registry.names import parse
from registry.run import machine
from registry.run.machine import GPU

PARTS = ROOT / "recipes" / "hardware"
DATA = Path(__file__).parent / "data"


@pytest.mark.parametrize(
    "name, gpu, per_node, nodes",
    [
        ("2xH200", "H200", 2, 1),
        ("4xL4", "L4", 4, 1),
        ("2x8xB200", "B200", 8, 2),
        ("1xT4", "T4", 1, 1),
        ("3xH100", "H100-SXM", 3, 1),  # an alias
        ("16xA100-40GB", "A100-40GB", 16, 1),
        ("2xRTX-4090", "RTX-4090", 2, 1),
    ],
)
def test_generated_names_compose(name, gpu, per_node, nodes):
    assert not (PARTS / f"{name}.yaml").exists()  # generated, not a part file
    r = compose(f"ref-1b/ddp/{name}")
    hw = r.data["hardware"]
    assert (hw["gpu"]["name"], hw["gpus_per_node"], hw["nodes"]) == (gpu, per_node, nodes)
    entry = load_file(ROOT / "recipes" / "catalog" / "gpus.yaml").data[gpu]
    assert hw["gpu"]["memory_gib"] == entry["memory_gib"]
    assert "aliases" not in hw["gpu"] and "device_names" not in hw["gpu"]  # about the catalog, not the run
    assert set(hw) == {"gpu", "gpus_per_node", "nodes"}  # nothing a part file would not write
    assert r.name == f"ref-1b/ddp/{name}"


def _reads_generated(stem: str) -> bool:
    return hardware.looks_generated(stem) and catalog.canonical(stem.rpartition("x")[2]) is not None


HAND_WRITTEN = sorted(p.stem for p in PARTS.glob("*.yaml") if _reads_generated(p.stem))


def test_every_part_named_like_a_generated_one_is_found():
    assert {"1xA100", "2xH100", "8xH200", "2x8xH100", "8xA100-40GB", "8xV100", "8xL40S"} <= set(HAND_WRITTEN)


@pytest.mark.parametrize("stem", HAND_WRITTEN)
def test_generated_part_equals_the_hand_written_one(stem):
    """The alias rule agrees with every part file: what the name generates is what the file says
    of the GPU and the counts (the file still wins, for what else it holds)."""
    written = load_file(PARTS / f"{stem}.yaml").data["hardware"]
    generated = hardware.part(stem).data["hardware"]
    assert generated == {k: written[k] for k in ("gpu", "gpus_per_node", "nodes")}


def test_a_generated_recipe_is_the_hand_written_one_with_its_counts():
    three = compose("ref-1b/zero2/3xH100")
    four = compose("ref-1b/zero2/4xH100", ["hardware.gpus_per_node=3"])
    assert three.data["hardware"] == four.data["hardware"]
    assert {k: v for k, v in three.data.items() if k != "recipe"} == {
        k: v for k, v in four.data.items() if k != "recipe"
    }


def test_a_part_file_wins():
    plan = Plan.of("pi07/zero2/2x1xH100")
    assert PARTS / "2x1xH100.yaml" in plan.inputs
    # the file's own launch default, which no generated part would give
    assert compose("pi07/zero2/2x1xH100").data["launch"]["main_process_ip"] == "127.0.0.1"
    assert "main_process_ip" not in compose("pi07/zero2/3x1xH100").data["launch"]
    assert (
        compose("pi07/zero2/2xH100").origins[("hardware", "gpus_per_node")].startswith("recipes/hardware/2xH100.yaml:")
    )


def test_generated_origins_and_inputs():
    r = compose("ref-1b/ddp/2xH200")
    assert r.origins[("hardware", "gpus_per_node")] == "hardware name 2xH200"
    assert r.origins[("hardware", "nodes")] == "hardware name 2xH200"
    assert r.origins[("hardware", "gpu", "name")].startswith("recipes/catalog/gpus.yaml:")
    assert r.origins[("hardware", "gpu", "memory_gib")].startswith("recipes/catalog/gpus.yaml:")
    # the catalog is the file the part came from: a lock lists it, a cache watches it
    assert ROOT / "recipes" / "catalog" / "gpus.yaml" in r.inputs
    assert not any(p.parent.name == "hardware" for p in r.inputs)


def test_show_origin_names_the_catalog(cli):
    r = cli("show", "ref-1b/ddp/2xH200", "--origin")
    assert r.returncode == 0, r.stderr
    assert "gpus_per_node: 2  # hardware name 2xH200" in r.stdout
    assert "name: H200  # recipes/catalog/gpus.yaml:" in r.stdout


def test_swap_and_extends_take_generated_names(tmp_path):
    swapped = compose("pi07/zero2/8xA100", ["hardware=2xH200"]).data["hardware"]
    assert (swapped["gpu"]["name"], swapped["gpus_per_node"]) == ("H200", 2)
    f = tmp_path / "mine.yaml"
    f.write_text("extends: [ref-1b/ddp/4xL4]\ntrain: {micro_batch_size: 2}\n")
    assert compose(str(f)).data["hardware"]["gpu"]["name"] == "L4"
    f.write_text("extends: [ref-1b/ddp/2xH100, hardware/2x8xB200]\n")
    assert compose(str(f)).data["hardware"]["nodes"] == 2


def test_validate_2xH200(cli):
    r = cli("validate", "ref-1b/ddp/2xH200")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "ref-1b/ddp/2xH200: valid" in r.stderr


@pytest.mark.parametrize(
    "name, says",
    [
        ("0xH100", "GPUs per node '0' must be a whole number from 1"),
        ("02xH100", "GPUs per node '02'"),
        ("0x8xH100", "nodes '0'"),
        ("2x0xH100", "GPUs per node '0'"),
        ("2xFOO", "'FOO' is not in the GPU catalog"),
        ("2xh100", "'h100' is not in the GPU catalog (hint: did you mean"),
        ("8xA10O", "did you mean"),
        ("tpu", "unknown hardware in ref-1b/ddp/tpu: 'tpu'"),
    ],
)
def test_bad_hardware_names_are_one_line(cli, name, says):
    for args in (
        ["validate", f"ref-1b/ddp/{name}"],
        ["show", f"ref-1b/ddp/{name}"],
        ["estimate", f"ref-1b/ddp/{name}"],
    ):
        r = cli(*args)
        out = r.stdout + r.stderr
        assert r.returncode == 2, (args, out)
        assert says in out and "Traceback" not in out
    r = cli("validate", "pi07/zero2/8xA100", f"hardware={name}")
    out = r.stdout + r.stderr
    assert r.returncode == 2 and "Traceback" not in out
    assert (says if name != "tpu" else "unknown hardware part 'tpu'") in out


def test_close_gpu_names_are_suggested():
    with pytest.raises(RecipeError) as info:
        compose("ref-1b/ddp/2xH20")
    suggested = str(info.value).split("did you mean", 1)[1].split("?")[0]
    assert "H200" in suggested and info.value.exit_code == 2


def test_listings_stay_those_of_the_part_files(cli):
    r = cli("list", "--parts", "--format", "json")
    assert r.returncode == 0, r.stderr
    listed = {row["part"] for row in json.loads(r.stdout) if row["axis"] == "hardware"}
    assert listed == {p.stem for p in PARTS.glob("*.yaml")}
    r = cli("list", "--hardware", "2xH200")
    assert r.returncode == 2 and "only parts with a file are listed" in r.stderr


def test_generated_names_import_nothing_heavy():
    argvs = [
        ["validate", "ref-1b/ddp/2xH200"],
        ["show", "tiny/ddp/1xT4"],
        ["validate", "pi07/zero2/8xA100", "hardware=2x8xB200"],
    ]
    r = heavy_imports(argvs, heavy=("torch", "accelerate", "deepspeed", "transformers", "omegaconf"))
    assert r.returncode == 0, r.stderr
    assert "HEAVY []" in r.stderr


# --- the T4: no bf16 -------------------------------------------------------------------------
def test_t4_catalog_entry():
    t4 = load_file(ROOT / "recipes" / "catalog" / "gpus.yaml").data["T4"]
    assert t4 == {"memory_gb": 16, "memory_gib": 14.75, "compute_capability": 7.5, "bf16_tflops": 0, "fp16_tflops": 65}


def test_t4_refuses_bf16_and_takes_fp16(cli):
    r = cli("validate", "tiny/ddp/1xT4", "backend.mixed_precision=bf16")
    assert r.returncode == 1
    assert "error[bf16-compute-capability]" in r.stdout and "T4 has 7.5" in r.stdout
    for cell in ("tiny/ddp/1xT4", "tiny/zero2/2xT4", "ref-100m/ddp/1xT4"):  # the cells compose fp16 (the rule's fix)
        r = cli("validate", cell)
        assert r.returncode == 0, r.stdout + r.stderr
        assert f"{cell}: valid" in r.stderr
    r = cli("validate", "tiny/ddp/1xT4", "backend.mixed_precision=fp8")
    assert r.returncode == 1 and "error[fp8-compute-capability]" in r.stdout


def test_every_entry_agrees_on_bf16():
    """The precision rules read the compute capability; bf16_tflops must say the same."""
    table = load_file(ROOT / "recipes" / "catalog" / "gpus.yaml").data
    for name, entry in table.items():
        assert (entry["bf16_tflops"] == 0) == (entry["compute_capability"] < 8.0), name


def test_a_gpu_below_8_with_bf16_figures_is_refused(tmp_path, cli):
    f = tmp_path / "odd.yaml"
    gpu = {"name": "odd", "memory_gib": 15, "compute_capability": 7.5, "bf16_tflops": 65}
    f.write_text(yaml.safe_dump({"extends": ["tiny/ddp/cpu"], "hardware": {"gpu": gpu, "gpus_per_node": 1}}))
    r = cli("validate", str(f), "backend.mixed_precision=fp16")
    assert r.returncode == 1 and "hardware.gpu.bf16_tflops" in r.stdout


# --- the catalog: aliases and device names ---------------------------------------------------
def test_aliases():
    assert catalog.canonical("H100") == "H100-SXM"
    assert catalog.canonical("A100") == "A100-80GB"
    assert catalog.canonical("V100") == "V100-32GB"
    assert catalog.canonical("H100-PCIe") == "H100-PCIe"
    assert catalog.canonical("h100") is None  # names are written as the catalog writes them


def test_an_alias_claimed_twice_is_an_error(tmp_path, monkeypatch):
    from registry.load import load_file as load

    twice = tmp_path / "gpus.yaml"
    twice.write_text(
        "X1: {memory_gib: 10, compute_capability: 8.0, bf16_tflops: 1, aliases: [X]}\n"
        "X2: {memory_gib: 10, compute_capability: 8.0, bf16_tflops: 1, aliases: [X]}\n"
    )
    monkeypatch.setattr(catalog, "entries", lambda: load(twice))
    with pytest.raises(RecipeError) as info:
        catalog.canonical("X1")
    assert "error[catalog-alias]" in str(info.value) and "alias 'X' of X2 is already 'X1'" in str(info.value)


@pytest.mark.parametrize(
    "device, entry",
    [
        ("NVIDIA H100 80GB HBM3", "H100-SXM"),
        ("NVIDIA H100 PCIe", "H100-PCIe"),
        ("NVIDIA H100 NVL", "H100-NVL"),
        ("NVIDIA H200", "H200"),
        ("NVIDIA A100-SXM4-40GB", "A100-40GB"),
        ("NVIDIA A100-PCIE-40GB", "A100-40GB"),
        ("NVIDIA A100-SXM4-80GB", "A100-80GB"),
        ("NVIDIA A100 80GB PCIe", "A100-80GB"),
        ("NVIDIA L4", "L4"),
        ("NVIDIA L40S", "L40S"),
        ("NVIDIA L40", "L40"),
        ("Tesla T4", "T4"),
        ("NVIDIA GeForce RTX 4090", "RTX-4090"),
        ("NVIDIA GeForce RTX 3090", "RTX-3090"),
        ("NVIDIA RTX A6000", "RTX-A6000"),
        ("NVIDIA RTX 6000 Ada Generation", "RTX-6000-Ada"),
        ("NVIDIA A10G", "A10G"),
        ("NVIDIA A10", "A10"),
        ("Tesla V100-SXM2-32GB", "V100-32GB"),
        ("Tesla V100-SXM2-16GB", "V100-16GB"),
        ("NVIDIA B200", "B200"),
        ("  nvidia   h100 80gb hbm3 ", "H100-SXM"),
        ("NVIDIA H200 NVL", None),  # not in the catalog: not taken for an H200
        ("NVIDIA GeForce RTX 3060", None),
        ("", None),
    ],
)
def test_device_names_map_to_the_catalog(device, entry):
    assert catalog.device_entry(device) == entry


def test_host_hardware_name():
    assert machine.hardware_name([GPU("NVIDIA H200", 143771)] * 2) == "2xH200"
    assert machine.hardware_name([GPU("NVIDIA H100 80GB HBM3", 81559)] * 4) == "4xH100-SXM"
    assert machine.hardware_name([GPU("Tesla T4", 15360)]) == "1xT4"
    assert machine.hardware_name([]) is None
    assert machine.hardware_name([GPU("NVIDIA H200", 143771), GPU("NVIDIA H100 80GB HBM3", 81559)]) is None
    assert machine.hardware_name([GPU("NVIDIA GeForce RTX 3060", 12288)]) is None


def test_hardware_check_uses_the_catalog():
    h200s = [GPU("NVIDIA H200", 143771)] * 2
    why = machine.mismatch(compose("ref-1b/ddp/2xH100").data, h200s)
    assert why == "the recipe is for H100-SXM and this host has NVIDIA H200 (H200)"
    assert machine.mismatch(compose("ref-1b/ddp/2xH200").data, h200s) is None
    pcie = [GPU("NVIDIA H100 PCIe", 81559)] * 2
    assert "this host has NVIDIA H100 PCIe (H100-PCIe)" in machine.mismatch(compose("ref-1b/ddp/2xH100").data, pcie)
    assert machine.mismatch(compose("ref-1b/ddp/2xH100-PCIe").data, pcie) is None
    t4 = compose("tiny/ddp/1xT4", ["backend.mixed_precision=fp16"]).data
    assert machine.mismatch(t4, [GPU("Tesla T4", 15360)]) is None
    # a card the catalog lacks is judged by the family in its name, as before
    assert machine.mismatch(compose("ref-1b/ddp/2xH100").data, [GPU("NVIDIA H100 SXM5 94GB", 95830)] * 2) is None


def test_tune_takes_a_generated_hardware_name():
    from registry.run.tune import parse_target

    target = parse_target("ref-1b/2xH200")
    assert (target.policy, target.hardware, target.backend) == ("ref-1b", "2xH200", None)
    assert parse_target("ref-1b/zero2/2xL4").hardware == "2xL4"
    with pytest.raises(RecipeError, match="'FOO' is not in the GPU catalog"):
        parse_target("ref-1b/2xFOO")


def test_cp_of_a_generated_cell(tmp_path):
    r = run_cli("cp", "ref-1b/ddp/2xH200", "mine.yaml", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "extends: [ref-1b/ddp/2xH200]" in (tmp_path / "mine.yaml").read_text()
    assert compose(str(tmp_path / "mine.yaml")).data["hardware"]["gpu"]["name"] == "H200"


def test_parse_of_generated_names():
    assert parse("ref-1b/ddp/2x8xRTX-6000-Ada").segments[2] == "2x8xRTX-6000-Ada"
    s = hardware.spec("2x8xRTX-6000-Ada")
    assert (s.gpu, s.gpus_per_node, s.nodes) == ("RTX-6000-Ada", 8, 2)
    assert not hardware.looks_generated("cpu") and not hardware.looks_generated("x8xH100")


# --- the importer's --gpu --------------------------------------------------------------------
def test_import_gpu_t4(tmp_path, cli):
    dest = tmp_path / "mine.yaml"
    r = cli("import", "--accelerate-config", str(DATA / "accelerate_zero2.yaml"), "--gpu", "T4", "-o", str(dest))
    assert r.returncode == 0, r.stderr
    assert yaml.safe_load(dest.read_text())["hardware"]["gpu"] == "T4"
    r = cli("validate", "--accelerate-config", str(DATA / "accelerate_zero2.yaml"), "--gpu", "T4")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "not in the GPU catalog" not in r.stdout + r.stderr


def test_import_gpu_alias_and_unknown(tmp_path, cli):
    dest = tmp_path / "mine.yaml"
    r = cli("import", "--accelerate-config", str(DATA / "accelerate_zero2.yaml"), "--gpu", "H100", "-o", str(dest))
    assert r.returncode == 0, r.stderr
    assert yaml.safe_load(dest.read_text())["hardware"]["gpu"] == "H100-SXM"
    r = cli("validate", "--accelerate-config", str(DATA / "accelerate_zero2.yaml"), "--gpu", "T-4")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "--gpu: 'T-4' is not in the GPU catalog (hint: did you mean" in r.stderr and "T4" in r.stderr


# --- benchmarks/tune_acceptance.sh on an H200 host -------------------------------------------
@pytest.mark.skipif(shutil.which("bash") is None, reason="no bash")
def test_tune_acceptance_names_the_hosts_hardware(tmp_path):
    """With a stand-in nvidia-smi for 2 x H200, the script tunes and measures 2xH200 (SECONDS 0:
    it starts nothing, and says which hardware)."""
    tree = tmp_path / "tree"
    (tree / "benchmarks").mkdir(parents=True)
    shutil.copy(ROOT / "benchmarks" / "tune_acceptance.sh", tree / "benchmarks")
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    (bin_ / "nvidia-smi").write_text(
        "#!/bin/sh\n"
        'case "$1" in\n'
        '  -L) printf "GPU 0: NVIDIA H200 (UUID: GPU-a)\\nGPU 1: NVIDIA H200 (UUID: GPU-b)\\n";;\n'
        '  *) printf "0, GPU-a, NVIDIA H200, 143771\\n1, GPU-b, NVIDIA H200, 143771\\n";;\n'
        "esac\n"
    )
    (bin_ / "nvidia-smi").chmod(0o755)
    (bin_ / "python3").write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    (bin_ / "python3").chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_}{os.pathsep}{os.environ['PATH']}"}
    env.pop("CUDA_VISIBLE_DEVICES", None)
    r = subprocess.run(
        ["bash", str(tree / "benchmarks" / "tune_acceptance.sh"), "ref-1b", "0"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "tune_acceptance.sh: 2xH200:" in r.stderr + r.stdout
    # a card the catalog lacks: one line, exit 2, nothing started
    (bin_ / "nvidia-smi").write_text(
        '#!/bin/sh\ncase "$1" in\n  -L) printf "GPU 0: X\\nGPU 1: X\\n";;\n'
        '  *) printf "0, GPU-a, NVIDIA GeForce RTX 3060, 12288\\n1, GPU-b, NVIDIA GeForce RTX 3060, 12288\\n";;\nesac\n'
    )
    shutil.rmtree(tree / "runs")
    r = subprocess.run(
        ["bash", str(tree / "benchmarks" / "tune_acceptance.sh"), "ref-1b", "0"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 2 and "NVIDIA GeForce RTX 3060: not one catalog entry" in r.stderr
    assert not (tree / "runs").exists()


def test_patterns_take_generated_names():
    from registry.compose.patterns import expand

    assert expand("ref-1b/{zero2,fsdp}/2xH200") == ["ref-1b/fsdp/2xH200", "ref-1b/zero2/2xH200"]
    assert "tiny/ddp/2xH200" not in expand("tiny/ddp/*")  # a glob matches part files only
    with pytest.raises(RecipeError, match="no hardware part matches"):
        expand("tiny/ddp/2xFOO")


# --- in-process: the generated part and the refusals, word for word ------------------------------
def test_the_generated_part_as_a_hand_written_file_would_hold_it():
    from registry.compose import catalog, hardware

    loaded = hardware.part("2x8xB200")
    said = "hardware name 2x8xB200"
    table = catalog.entries()
    assert loaded.file == said
    assert loaded.data == {
        "recipe": {"summary": "2 nodes of 8x B200 (generated from the GPU catalog)"},
        "hardware": {"gpu": "B200", "gpus_per_node": 8, "nodes": 2},
    }
    assert loaded.origins == {
        ("recipe",): said,
        ("recipe", "summary"): said,
        ("hardware",): said,
        ("hardware", "gpu"): table.origins[("B200",)],  # the catalog entry's line
        ("hardware", "gpus_per_node"): said,
        ("hardware", "nodes"): said,
    }
    one = hardware.part("3xH100")
    assert one.data["recipe"]["summary"] == "3x H100-SXM, one node (generated from the GPU catalog)"
    assert one.data["hardware"] == {"gpu": "H100-SXM", "gpus_per_node": 3, "nodes": 1}


@pytest.mark.parametrize(
    ("segment", "said"),
    [
        (
            "02xH100",
            "hardware '02xH100': GPUs per node '02' must be a whole number from 1, written without leading zeros",
        ),
        ("0x2xH100", "hardware '0x2xH100': nodes '0' must be a whole number from 1, written without leading zeros"),
        (
            "2x0xH100",
            "hardware '2x0xH100': GPUs per node '0' must be a whole number from 1, written without leading zeros",
        ),
        ("H100x2", "hardware 'H100x2' is neither a part nor a generated name"),
    ],
)
def test_a_name_that_says_nothing_is_refused_with_the_form(segment, said):
    from registry.compose import hardware
    from registry.errors import RecipeError

    with pytest.raises(RecipeError) as e:
        hardware.spec(segment)
    assert str(e.value) == f"{said} ({hardware.FORM})"
    # problem() speaks only of names shaped like generated ones
    shaped = hardware.looks_generated(segment)
    assert hardware.problem(segment) == (f"{said} ({hardware.FORM})" if shaped else None)
    assert not hardware.generable(segment) and shaped is (segment != "H100x2")


def test_what_is_generable():
    from registry.compose import hardware

    assert hardware.spec("2x8xB200") == hardware.Spec("2x8xB200", "B200", 8, 2)
    assert hardware.generable("2xH200") and hardware.problem("2xH200") is None
    assert not hardware.generable("8xA100")  # a part file of that name wins
    assert hardware.problem("8xA100") is None
    assert not hardware.generable("cpu") and hardware.problem("cpu") is None  # not a generated name's shape
    assert not hardware.generable("2xNOPE") and hardware.problem("2xNOPE").startswith(
        "hardware '2xNOPE': 'NOPE' is not in"
    )


# --- the GPU catalog's errors and expansion, whole (registry/compose/catalog.py) ----------------
KNOWN_GPUS = (
    "V100-16GB, V100-32GB, T4, A10G, A10, A30, L4, L40, L40S, RTX-3090, RTX-4090, RTX-A6000, "
    "RTX-6000-Ada, A100-40GB, A100-80GB, H100-SXM, H100-PCIe, H100-NVL, H200, B200, A100, H100, V100"
)


def test_an_alias_two_entries_claim_is_one_error_at_the_second_claim():
    from registry.compose import catalog
    from registry.load import load_text

    table = load_text(
        "A100:\n  aliases: [A]\n  memory_gib: 80\nB100:\n  memory_gib: 80\n  aliases: [X, A]\n", "cat.yaml"
    )
    with pytest.raises(RecipeError) as e:
        catalog._index(table)
    assert str(e.value) == (
        "cat.yaml:6:16: error[catalog-alias] alias 'A' of B100 is already 'A100' "
        "(hint: an alias names one entry; remove it from one of them)"
    )


def test_an_unknown_gpu_names_the_closest_three_and_every_known_name():
    from registry.compose import catalog

    assert catalog.known() == KNOWN_GPUS.split(", ")
    # the A100 entries first, then the closest spellings: four at most (tests/test_rough_edges.py)
    assert str(catalog.unknown("A100-")) == (
        f"'A100-' is not in the GPU catalog (hint: did you mean A100-40GB, A100-80GB, A100, A10?; known: {KNOWN_GPUS})"
    )
    assert str(catalog.unknown("ZZZ", "x.yaml:3:5")) == (
        "x.yaml:3:5: error[unknown-gpu] hardware.gpu: 'ZZZ' is not in the GPU catalog "
        f"(hint: add it to catalog/gpus.yaml; known: {KNOWN_GPUS})"
    )


def test_an_unknown_gpu_without_an_origin_is_reported_at_its_path():
    from registry.compose import catalog

    with pytest.raises(RecipeError) as e:
        catalog.expand_gpu({"hardware": {"gpu": "ZZZ"}}, {})
    assert str(e.value).startswith("hardware.gpu: error[unknown-gpu] hardware.gpu: 'ZZZ' is not in the GPU catalog")


def test_an_expanded_gpu_takes_the_entrys_fields_and_their_origins_only():
    from registry.compose import catalog

    table = catalog.entries()
    data = {"hardware": {"gpu": "A100"}}  # an alias of A100-80GB
    origins: dict = {}
    catalog.expand_gpu(data, origins)
    entry = table.data["A100-80GB"]
    kept = {k: v for k, v in entry.items() if k not in catalog.CATALOG_ONLY}
    assert data["hardware"]["gpu"] == {"name": "A100-80GB", **kept}
    assert origins[("hardware", "gpu", "name")] == table.file  # no origin of its own: the catalog's
    assert set(origins) == {("hardware", "gpu", "name")} | {
        ("hardware", "gpu") + path[1:]
        for path in table.origins
        if path[0] == "A100-80GB" and len(path) > 1 and path[1] not in catalog.CATALOG_ONLY
    }
    assert not any(path[2] in catalog.CATALOG_ONLY for path in origins if len(path) > 2)
    assert {path[2] for path in origins} == {"name", *kept}
    # a hardware section that is no mapping is the schema's to report
    for odd in ("8xA100", None, ["gpu"]):
        doc = {"hardware": odd}
        catalog.expand_gpu(doc, {})
        assert doc == {"hardware": odd}
