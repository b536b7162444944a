"""Import and validate on configurations teams already ship (tests/data/corpus: 66 real accelerate
yamls, DeepSpeed JSONs and trainer configs from public projects, each with its repository, path and
commit), judged against the verdicts of accelerate's and DeepSpeed's own code
(tests/corpus_verdicts.py) and, where recorded, the trainer's own.

- the libraries' verdicts are recomputed here, on CPU, and must match the recorded ones;
- no false alarm where they (and the trainer) accept; every refusal caught before launch;
- no traceback; every key of every input mapped into the recipe or reported in a note;
- import then resolve: accelerate and DeepSpeed read the new files as they read the originals,
  apart from differences the import reported.
"""

from __future__ import annotations

import copy
import functools
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import yaml
from conftest import ROOT

from registry.compose import compose
from registry.doc import join, leaves, lookup
from registry.errors import RecipeError
from registry.resolve import importer, resolve
from registry.validate.report import validate_target

# not imported from tests/corpus_verdicts.py, which imports accelerate, DeepSpeed and transformers
# as it loads (each xdist worker collects this file); it runs in a process of its own here
CORPUS = ROOT / "tests" / "data" / "corpus"
ENTRIES = {e["id"]: e for e in yaml.safe_load((CORPUS / "manifest.yaml").read_text())["entries"]}
RECORDED = json.loads((CORPUS / "verdicts.json").read_text())


def setup_of(entry: dict) -> importer.Setup:
    folder = CORPUS / entry["id"]
    setup = importer.Setup(
        accelerate=folder / entry["files"][0], gpu="H100-SXM", launch_args=entry.get("launch_args", "")
    )
    if entry.get("trainer") == "opentau":
        setup.trainer, setup.trainer_config = "opentau", folder / entry["trainer_config"]
    elif entry.get("trainer") == "lerobot":
        setup.trainer, setup.trainer_args = "lerobot", entry.get("args", "")
    return setup


@functools.cache
def imported(entry_id: str):
    """(Imported, validation report, problems) or (None, RecipeError, problems) for an entry."""
    try:
        result = importer.read(setup_of(ENTRIES[entry_id]))
    except RecipeError as e:
        return None, e, [str(e)]
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "recipe.yaml"
        path.write_text(importer.render(result, f"corpus/{entry_id}", path))
        report = validate_target(str(path))
        files = resolve(compose(str(path))).files if report.exit_code == 0 else None
    errors = [p.render() for p in result.notes.conflicts] + [p.render() for p in report.problems if p.is_error]
    if report.failure:
        errors.append(str(report.failure))
    return result, files, errors


def accepted(entry_id: str) -> bool:
    """What accelerate and DeepSpeed say, and the trainer's own code where the manifest records it."""
    trainer = ENTRIES[entry_id].get("trainer_verdict", {"accepted": True})
    return RECORDED[entry_id]["accepted"] and trainer["accepted"]


def test_the_corpus_is_real_and_varied():
    assert len(ENTRIES) >= 30
    for entry in ENTRIES.values():
        assert entry["repo"] and entry["commit"] and entry["files"], entry["id"]
    assert sum(not v["accepted"] for v in RECORDED.values()) >= 8  # refusals to catch, not only green configs
    assert len({e["repo"] for e in ENTRIES.values()}) >= 8


def libraries(*args: str) -> dict | list:
    """corpus_verdicts.py in a process of its own: it sets accelerate's environment variables and
    changes directory while it judges, which other tests' launches must never inherit."""
    done = subprocess.run(
        [sys.executable, str(Path(__file__).parent / "corpus_verdicts.py"), *args],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return [json.loads(line) for line in done.stdout.splitlines()]


def test_recorded_verdicts_are_what_the_libraries_say_today():
    """Recomputed with accelerate's and DeepSpeed's own code, so no verdict is hard-coded."""
    now = {v.pop("id"): v for v in libraries()}
    changed = {i: (RECORDED[i]["accepted"], now[i]["accepted"], now[i]["error"]) for i in now if now[i] != RECORDED[i]}
    assert not changed, f"rerun `python tests/corpus_verdicts.py --write` and review: {changed}"


@pytest.mark.parametrize("entry_id", sorted(ENTRIES))
def test_no_false_alarm_and_every_refusal_caught(entry_id):
    _, _, errors = imported(entry_id)
    if accepted(entry_id):
        assert not errors, "false alarm on a config the libraries accept:\n" + "\n".join(errors)
    else:
        why = RECORDED[entry_id]["error"] or ENTRIES[entry_id]["trainer_verdict"]["error"]
        assert errors, f"the libraries refuse it ({why}) but the registry found nothing"


@pytest.mark.parametrize("entry_id", sorted(ENTRIES))
def test_every_key_is_mapped_or_reported(entry_id):
    """Each key of the yaml and the JSONs is read by a row of the tables, lands in the recipe (its
    file:line is where a recipe value came from), or is named in a note."""
    from registry.load import load_text

    result, _, _ = imported(entry_id)
    if result is None:
        return  # refused as a whole, with one message (test_no_false_alarm_and_every_refusal_caught)
    entry, notes = ENTRIES[entry_id], "\n".join(result.notes)
    landed = {where(origin) for origin in result.notes.located.values() if origin}
    lost = []
    for name in entry["files"]:
        path = CORPUS / entry_id / name
        if name == entry.get("trainer_config") or path.suffix not in (".yaml", ".yml", ".json"):
            continue
        loaded = load_text(path.read_text(), str(path))
        for key in leaves(loaded.data):
            if isinstance(lookup(loaded.data, key), (dict, list)) or any(isinstance(k, int) for k in key):
                continue
            read = any((name, key[:n]) in result.notes.accounted for n in range(1, len(key) + 1))
            carried = any(where(loaded.origins.get(key[:n], "")) in landed for n in range(1, len(key) + 1))
            if not read and not carried and join(key) not in notes:
                lost.append(f"{name}: {join(key)}")
    assert not lost, lost


def where(origin: str) -> tuple:
    """file name, line, column of an origin, however its folder is spelt."""
    file, *line_column = origin.rsplit(":", 2)
    return (Path(file).name, *line_column)


# a value read from several settings: a note on any of them reports the difference
DERIVED = {
    "train_batch_size": ("train_batch_size", "gradient_accumulation_steps", "micro_batch", "num_processes"),
    "distributed_type": ("distributed_type",),
}
NORMAL = {"none": None, None: None}


def reading(read: dict) -> dict:
    """What accelerate and DeepSpeed made of a config, in comparable form."""
    out = {k: read.get(k) for k in ("num_processes", "num_machines")}
    ignore = {"deepspeed.config_file"}  # the file's name: the resolved one is deepspeed.json
    config = read.get("config") or {}
    out["distributed_type"] = config.get("distributed_type")
    if config.get("distributed_type") != "DEEPSPEED":  # under DeepSpeed the JSON's bf16/fp16 decide
        out["mixed_precision"] = read.get("mixed_precision") or "no"
    for section in ("deepspeed", "deepspeed_engine", "fsdp"):
        for k, v in (read.get(section) or {}).items():
            if f"{section}.{k}" not in ignore:
                out[f"{section}.{k}"] = NORMAL.get(v, v) if isinstance(v, (str, type(None))) else v
    return out


RESOLVABLE = sorted(i for i in ENTRIES if accepted(i))


@pytest.fixture(scope="module")
def after(tmp_path_factory) -> dict:
    """What accelerate and DeepSpeed make of the files resolved from each accepted entry (one process)."""
    root, spec = tmp_path_factory.mktemp("resolved"), []
    for entry_id in RESOLVABLE:
        _, files, _ = imported(entry_id)
        folder = root / entry_id
        folder.mkdir()
        for name, text in files.items():
            (folder / name).write_text(text)
        again = copy.deepcopy(ENTRIES[entry_id])
        again["files"] = [n for n in ("accelerate.yaml", "deepspeed.json", "opentau.json") if n in files]
        again.pop("launch_args", None)  # the resolved yaml holds the process counts itself
        if again.get("trainer") == "opentau":
            again["trainer_config"] = "opentau.json"
        spec.append({"key": entry_id, "dir": str(folder), "entry": again})
    (root / "spec.json").write_text(json.dumps(spec))
    (found,) = libraries("--spec", str(root / "spec.json"))
    return found


@pytest.mark.parametrize("entry_id", RESOLVABLE)
def test_import_then_resolve_reads_the_same(entry_id, after):
    result, _, _ = imported(entry_id)
    after = after[entry_id]
    assert after["accepted"], after["error"]
    before, now = reading(RECORDED[entry_id]["read"]), reading(after["read"])
    notes = "\n".join(result.notes)
    unreported = {
        k: (before.get(k), now.get(k))
        for k in sorted(set(before) | set(now))
        if before.get(k) != now.get(k)
        and before.get(k) != "auto"  # filled in later; deepspeed_engine.* holds the value it becomes
        and not any(name in notes for name in DERIVED.get(k.split(".")[-1], (k.split(".")[-1],)))
    }
    assert not unreported, f"read differently after import and resolve, and not reported: {unreported}"


def test_validate_points_at_the_line_of_the_teams_own_yaml():
    from conftest import run_cli

    yaml_file = CORPUS / "acc-docs-scenario1" / "accelerate_config.yaml"
    r = run_cli("validate", "--accelerate-config", str(yaml_file), "-q")
    assert r.returncode == 1, r.stdout + r.stderr
    from registry.resolve.accelerate import REFUSED_BESIDE_FILE

    # the first of the keys accelerate refuses beside deepspeed_config_file, in the team's file
    line = next(
        i
        for i, text in enumerate(yaml_file.read_text().splitlines(), 1)
        if text.strip().split(":")[0] in REFUSED_BESIDE_FILE
    )
    assert f"accelerate_config.yaml:{line}:3: error[ds-config-file-conflict]" in r.stdout
    assert "accelerate says: 'When using `deepspeed_config_file`" in r.stdout and "Traceback" not in r.stderr


def test_import_writes_its_notes_into_the_recipe(tmp_path):
    from conftest import run_cli

    dest = tmp_path / "mine.yaml"
    folder = CORPUS / "trl-zero3"
    r = run_cli("import", "--accelerate-config", str(folder / ENTRIES["trl-zero3"]["files"][0]), "-o", str(dest))
    text = dest.read_text()
    assert "# what the import could not carry over or had to decide" in text
    assert "#   - policy: no trainer config names it; policy.type is unknown" in text
    assert "policy:\n  type: unknown" in text and r.returncode == 0, r.stdout + r.stderr
    assert "warning[memory-fit] policy.memory: not checked" in r.stdout


def test_the_figures_the_docs_quote_are_the_corpus_s():
    """docs/rules.md's count of configurations and of the projects they come from is this manifest's."""
    repos = {e["repo"] for e in ENTRIES.values()}
    repos |= {s["repo"] for e in ENTRIES.values() for s in (e.get("sources") or {}).values()}
    page = " ".join((Path(__file__).parent.parent / "docs" / "rules.md").read_text().split())
    assert f"on {len(ENTRIES)} configurations from {len(repos)} public projects" in page
