"""Classes of behaviour round 3 of the fresh hand-made mutants found unpinned (issue 41;
docs/mutation.md): each test holds a whole class (a bound at both edges and both signs, every kind
of control character, every malformed version of a sighting), not the one line that was broken."""

from __future__ import annotations

import json
import shutil

import pytest
from conftest import ROOT, run_cli

from registry import untrusted
from registry.errors import RecipeError
from registry.load import INT_BOUND, load_json
from registry.sharing import sources, trust

H1 = "1" * 64
DATASETS = ROOT / "tests" / "data" / "datasets"


# --- registry/load.py: an imported JSON file holds 64-bit integers, exactly --------------------------
@pytest.mark.parametrize("value", [INT_BOUND, -INT_BOUND - 1, INT_BOUND + 1, 10**30])
def test_an_imported_json_integer_past_64_bits_is_refused_at_either_edge(tmp_path, value):
    path = tmp_path / "ds.json"
    path.write_text(json.dumps({"train_batch_size": value}))
    with pytest.raises(RecipeError, match="out of range"):
        load_json(path, "DeepSpeed config")


@pytest.mark.parametrize("value", [INT_BOUND - 1, -INT_BOUND, 0, -1])
def test_an_imported_json_integer_within_64_bits_is_read_as_written(tmp_path, value):
    path = tmp_path / "ds.json"
    path.write_text(json.dumps({"train_batch_size": value}))
    assert load_json(path, "DeepSpeed config").data == {"train_batch_size": value}


# --- registry/untrusted.py: no control character of any range is taken into a string -----------------
@pytest.mark.parametrize("char", ["\x00", "\x07", "\x1b", "\x1f", "\x7f", "\x80", "\x85", "\x9b", "\x9f"])
def test_a_string_with_any_control_character_is_rejected(char):
    # C0, DEL and C1 alike: \x9b is a one-byte CSI that a terminal obeys as an escape
    with pytest.raises(untrusted.Rejected, match="control character"):
        untrusted.expect(f"torch{char}2.5", str, "trainer", "torch's version")


@pytest.mark.parametrize("text", ["2.5.1+cu124", "caf\u00e9", "\u00a0\u00ff", "\u0100", "\u65e5\u672c"])
def test_a_string_of_printable_characters_is_kept_whatever_its_script(text):
    assert untrusted.expect(text, str, "trainer", "a name") == text


# --- registry/sharing/trust.py: a sighting names a version as versions.hashes writes it --------------
@pytest.mark.parametrize("version", ["exp/x@0", "exp/x@01", "exp/x@00", "exp/x@-1", "exp/x@1a", "exp/x", "@1"])
def test_a_sighting_of_a_malformed_version_is_no_sighting(tmp_path, monkeypatch, version):
    store = tmp_path / "known.jsonl"
    monkeypatch.setenv("RECIPE_KNOWN_VERSIONS", str(store))
    folder = tmp_path / "team"
    folder.mkdir()
    where = trust.place(sources.Source("team-a", folder, "path", str(folder)))
    lines = [{"place": where, "version": v, "sha256": H1} for v in (version, "exp/x@10")]
    store.write_text("".join(json.dumps(d) + "\n" for d in lines))
    store.chmod(0o600)
    assert trust.known() == {(where, "exp/x@10"): H1}


# --- registry/commands/doctor.py: a relative dataset.root is where the trainer runs ------------------
def test_doctor_reads_a_relative_dataset_root_in_the_output_dir(tmp_path):
    from test_run import make_trainer_env

    venv = make_trainer_env(tmp_path / "lerobot-env")
    out = tmp_path / "run"
    shutil.copytree(DATASETS / "toy", out / "data" / "toy")
    cell = ["act/ddp/cpu", "hardware.processes_per_node=1", "dataset.action_freq=10", "policy.chunk_size=20"]
    args = [*cell, "policy.n_action_steps=20", f"trainer.env={venv}", "dataset.root=data/toy"]
    r = run_cli("doctor", *args, "--output-dir", str(out), "--format", "json", timeout=120)
    doc = json.loads(r.stdout)
    assert [d["cameras"] for d in doc["datasets"]] == [[{"name": "observation.images.top", "height": 96, "width": 96}]]
    assert not [n for n in doc["notes"] if n.startswith("dataset")], doc["notes"]
    # without it, the run folder is one recipe run makes new: the dataset is said unchecked, not guessed at
    r = run_cli("doctor", *args, "--format", "json", cwd=out, timeout=120)
    doc = json.loads(r.stdout)
    assert doc["datasets"] == [] and [n for n in doc["notes"] if "relative to the run folder" in n], doc["notes"]


# --- registry/sharing/versions.py: versions go by number, as numbers order ---------------------------
def test_versions_past_nine_are_ordered_by_number_and_the_bare_name_is_the_newest(tmp_path, monkeypatch):
    from registry.doc import Recipe
    from registry.names import parse
    from registry.sharing import versions

    root = tmp_path / "team"
    root.mkdir()
    monkeypatch.setenv("RECIPE_PATH", f"team-a={root}")
    monkeypatch.setenv("RECIPE_KNOWN_VERSIONS", str(tmp_path / "known.jsonl"))
    team = sources.Source("team-a", root, "path", str(root))
    made = [
        versions.publish(Recipe("exp/x", {"recipe": {"name": "exp/x"}, "train": {"steps": n}}, {}), team)
        for n in range(1, 13)
    ]
    assert [v.number for v in made] == list(range(1, 13))
    assert [v.number for v in versions.versions(team, "exp/x")] == list(range(1, 13))  # 10 after 9, not after 1
    assert versions.lookup(parse("exp/x")) == made[-1]
    assert versions.lookup(parse("exp/x@2")) == made[1] and versions.lookup(parse("exp/x@10")) == made[9]


# --- registry/sharing/sources.py: an overlay is a cell all three of whose names are parts ------------
@pytest.mark.parametrize("unknown", [0, 1, 2])
def test_a_file_with_any_name_no_part_has_is_free_standing_not_an_overlay(tmp_path, monkeypatch, unknown):
    root = tmp_path / "team"
    monkeypatch.setenv("RECIPE_PATH", f"team-a={root}")
    monkeypatch.setenv("RECIPE_KNOWN_VERSIONS", str(tmp_path / "known.jsonl"))
    cell = ["act", "ddp", "cpu"]
    odd = list(cell)
    odd[unknown] = "nosuch-part"
    for names in (cell, odd):
        path = root.joinpath(*names[:2], names[2] + ".yaml")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("train:\n  steps: 3\n")
    team = sources.Source("team-a", root, "path", str(root))
    assert team.overlays() == [("act", "ddp", "cpu")]
    assert team.free_standing() == ["/".join(odd)]


# --- registry/run/supervise.py: launch.log is the run folder's own file, never a link's target ------
@pytest.mark.parametrize("target", ["a file", "a missing file", "a file in the folder"])
def test_a_launch_log_that_is_a_link_is_refused_and_its_target_left_alone(tmp_path, target):
    from registry.run.supervise import hold

    folder, elsewhere = tmp_path / "run", tmp_path / "elsewhere"
    folder.mkdir()
    elsewhere.mkdir()
    aim = {"a file": elsewhere / "log", "a missing file": elsewhere / "none", "a file in the folder": folder / "x"}
    aim = aim[target]
    if target != "a missing file":
        aim.write_bytes(b"kept\n")
    (folder / "launch.log").symlink_to(aim)
    with pytest.raises(RecipeError, match=r"launch\.log is a symbolic link; nothing is written through it"):
        hold(folder)
    if target == "a missing file":
        assert not aim.exists()  # O_CREAT through the link would have made it
    else:
        assert aim.read_bytes() == b"kept\n"
    (folder / "launch.log").unlink()
    log = hold(folder)  # a plain file it makes and holds
    try:
        assert (folder / "launch.log").is_file() and not (folder / "launch.log").is_symlink()
    finally:
        log.close()
