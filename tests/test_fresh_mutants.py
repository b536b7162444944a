"""Classes of behaviour a round of hand-made bugs found unpinned (issue 41; docs/mutation.md): each
test holds a whole class (a bound at both signs and both sides, a cap whatever the file's stat
says, which sighting is trusted, which #! lines name a Python), not the one line that was broken."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from registry import untrusted
from registry.run import environment
from registry.sharing import sources, trust

H1, H2 = "1" * 64, "2" * 64


# --- registry/untrusted.py: bounds hold at their edge, for either sign and whatever stat says --------
@pytest.mark.parametrize("sign", ["", "-"])
def test_an_integer_of_the_most_digits_allowed_is_read_at_either_sign(sign):
    widest = sign + "9" * untrusted.MAX_INT_DIGITS
    assert untrusted.loads(f"[{widest}, {sign}1]", "x") == [int(widest), int(sign + "1")]
    with pytest.raises(untrusted.Rejected, match="out of range"):
        untrusted.loads(f"[{sign}1{'0' * untrusted.MAX_INT_DIGITS}]", "x")


def test_a_file_whose_stat_says_nothing_of_its_size_is_still_capped(tmp_path):
    # /proc files are regular and report size 0, then read on: the cap must hold on what is read
    path = Path("/proc/self/status")
    whole = path.read_bytes()
    assert untrusted.is_regular(path) and path.stat().st_size == 0 and len(whole) > 200
    with pytest.raises(untrusted.Rejected, match="more than the 100 bytes"):
        untrusted.read_bytes(path, 100)
    assert len(untrusted.read_bytes(path, 1 << 20)) > 200  # under the cap: all of it, not a cut


# --- registry/sharing/trust.py: the first well-formed sighting is the one trusted -------------------
def test_of_two_sightings_of_one_version_the_first_is_trusted(tmp_path, monkeypatch):
    store = tmp_path / "known.jsonl"
    monkeypatch.setenv("RECIPE_KNOWN_VERSIONS", str(store))
    folder = tmp_path / "team"
    folder.mkdir()
    source = sources.Source("team-a", folder, "path", str(folder))
    where = trust.place(source)
    lines = [{"place": where, "version": "exp/x@1", "sha256": h} for h in (H1, H2)]
    store.write_text("".join(json.dumps(d) + "\n" for d in lines))
    store.chmod(0o600)
    assert trust.known() == {(where, "exp/x@1"): H1}
    # a line appended later (by anyone who could) never stands in for the first sighting
    assert trust.changed(source, {"exp/x@1": H2}) == [trust.Changed("team-a", "exp/x@1", H1, H2)]
    assert trust.changed(source, {"exp/x@1": H1}) == []


# --- registry/run/environment.py: only a Python is taken for the trainer's interpreter --------------
@pytest.mark.parametrize("program", ["bash", "sh", "node", "perl"])
def test_an_env_line_naming_another_program_names_no_interpreter(tmp_path, program):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in (program, "python3"):
        (bin_dir / name).write_text("#!/bin/sh\n")
        (bin_dir / name).chmod(0o755)
    script = tmp_path / "accelerate"
    script.write_text(f'#!/usr/bin/env {program}\nexec python3 -m accelerate "$@"\n')
    env = {"PATH": str(bin_dir)}
    assert environment.interpreter_of(str(script), env) is None
    script.write_text("#!/usr/bin/env python3\n")
    assert environment.interpreter_of(str(script), env) == str(bin_dir / "python3")


# --- registry/run/preflight/metadata.py: a hub ref names one snapshot folder, or nothing -----------
@pytest.mark.parametrize("ref", ["..", "../../etc", "a/b", "", "  \n"])
def test_a_hub_ref_that_names_no_snapshot_folder_is_not_followed(tmp_path, ref):
    from registry.run.preflight import metadata

    home = tmp_path / "lerobot"
    hub = home / "hub" / "datasets--org--ds"
    (hub / "refs").mkdir(parents=True)
    (hub / "refs" / "main").write_text(ref)
    (hub / "snapshots").mkdir()
    (hub / metadata.INFO).parent.mkdir(parents=True, exist_ok=True)
    (hub / metadata.INFO).write_text("{}")  # what `..` from snapshots/ would reach
    env = {"HF_LEROBOT_HOME": str(home)}
    if ref.strip() not in ("", ".."):
        (hub / "snapshots" / ref.strip()).mkdir(parents=True, exist_ok=True)
    found = metadata.candidates({"repo_id": "org/ds"}, tmp_path, env)
    assert found == [home / "org/ds" / metadata.INFO]
    (hub / "refs" / "main").write_text("0123abcd\n")  # a commit: its snapshot is looked in
    found = metadata.candidates({"repo_id": "org/ds"}, tmp_path, env)
    assert found == [home / "org/ds" / metadata.INFO, hub / "snapshots" / "0123abcd" / metadata.INFO]


# --- registry/run/preflight/data.py: each bound holds at its edge, on either axis ----------------
def _act(*overrides):
    from registry import view
    from registry.compose import compose

    return view.of(compose("act/ddp/8xA100", list(overrides)).data)


@pytest.mark.parametrize(
    ("crop", "refused"), [((480, 640), False), ((481, 100), True), ((100, 641), True), ((481, 641), True)]
)
def test_a_crop_past_the_image_on_either_side_is_an_error(crop, refused):
    from registry.run.preflight import data
    from registry.run.preflight.metadata import Camera, DatasetMeta

    meta = DatasetMeta(Path("info.json"), 30.0, 10, 1000, (Camera("top", 480, 640),))
    found = data.image_size(meta, data.Policy(_act(), {"crop_shape": list(crop)}))
    assert [f.path for f in found] == ([("policy", "options", "crop_shape")] if refused else [])


@pytest.mark.parametrize(("key", "limit_name"), [("observation.state", "max_state_dim"), ("action", "max_action_dim")])
def test_a_vector_as_wide_as_the_padding_fits_and_one_wider_does_not(key, limit_name):
    from registry.run.preflight import data
    from registry.run.preflight.metadata import DatasetMeta

    check = data.state_size if key == "observation.state" else data.action_size
    policy = data.Policy(_act(), {limit_name: 14})
    for size, refused in ((13, False), (14, False), (15, True)):
        meta = DatasetMeta(Path("info.json"), 30.0, 10, 1000, (), {key: size})
        assert [f.path for f in check(meta, policy)] == ([("policy", "options", limit_name)] if refused else [])


@pytest.mark.parametrize(("steps", "interval", "warned"), [(5, 1, False), (6, 1, True), (3, 2, False), (4, 2, True)])
def test_a_history_as_long_as_the_episodes_fits_and_one_frame_more_does_not(steps, interval, warned):
    from registry.run.preflight import data
    from registry.run.preflight.metadata import DatasetMeta

    meta = DatasetMeta(Path("info.json"), 30.0, 10, 50, ())  # 5 frames an episode
    recipe = _act(f"policy.n_obs_steps={steps}", f"policy.history_interval={interval}", "policy.chunk_size=4")
    found = data.episode_length(meta, data.Policy(recipe, {}))
    assert [f.path for f in found] == ([("policy", "n_obs_steps")] if warned else [])


# --- registry/trainers/lerobot_defaults.py: a default dropped leaves no empty mapping behind ---------
def test_dropping_a_value_removes_the_mappings_it_leaves_empty_and_no_other():
    from registry.trainers import lerobot_defaults

    doc = {"train": {"checkpoint": {"every": 5}}, "seed": 1}
    lerobot_defaults._drop(doc, ("train", "checkpoint", "every"))
    assert doc == {"seed": 1}
    doc = {"train": {"checkpoint": {"every": 5}, "steps": 3}}
    lerobot_defaults._drop(doc, ("train", "checkpoint", "every"))
    assert doc == {"train": {"steps": 3}}
    doc = {"train": {"checkpoint": {"every": 5, "keep": 2}}}
    assert lerobot_defaults._without(doc, ("train", "checkpoint", "every")) == {"train": {"checkpoint": {"keep": 2}}}
    assert doc == {"train": {"checkpoint": {"every": 5, "keep": 2}}}  # _without leaves its argument whole


# --- registry/validate/engines.py: sbatch reads directives past blank lines, up to the first command ---
@pytest.mark.parametrize("gap", ["\n", "   \n", "\t\n", "# a comment\n", "\n\n# two\n\n"])
def test_directives_are_read_past_blank_lines_and_comments_and_stop_at_a_command(gap):
    from registry.validate import engines

    text = (
        f"#!/bin/bash\n{gap}#SBATCH --nodes=2\n{gap}#SBATCH --gpus=8\n{gap}#SBATCH -t 10\nsrun x\n#SBATCH --nodes=9\n"
    )
    assert engines.sbatch_options(text) == [("--nodes", "2"), ("--gpus", "8"), ("--time", "10")]


# --- registry/resolve/launch.py: any character that ends a line ends the comment or #SBATCH line ---
@pytest.mark.parametrize("brk", ["\n", "\r", "\0", "\r\n"])
def test_a_name_with_any_line_break_is_refused_in_the_sbatch_file_and_the_launch_script(brk):
    import copy

    from registry.compose import compose
    from registry.errors import RecipeError
    from registry.resolve import launch

    doc = compose("pi07/zero2/2x8xH100", ["launch.launcher=slurm"]).data
    assert "#SBATCH --job-name=" in launch.sbatch(doc)
    bad = copy.deepcopy(doc)
    bad["recipe"]["name"] = f"exp{brk}srun evil"
    with pytest.raises(RecipeError, match=r"recipe\.name: .* has a line break"):
        launch.sbatch(bad)
    for text in (f"x{brk}", f"{brk}x", f"a{brk}b"):
        with pytest.raises(RecipeError, match="has a line break"):
            launch.one_line(text, "launch.slurm.extra")
    assert launch.one_line("a b\tc", "launch.slurm.extra") == "a b\tc"


# --- registry/run/resume.py: a value whose type changes is a difference, even where == says equal ---
@pytest.mark.parametrize(("before", "after"), [(1, 1.0), (True, 1), (0, False), (1.0, True), (2, "2")])
def test_a_resume_sees_a_change_of_type_where_python_calls_the_values_equal(before, after):
    from registry.run import resume

    old = {"train": {"lr": before, "steps": 5}, "seed": 1}
    new = {"train": {"lr": after, "steps": 5}, "seed": 1}
    assert list(resume._differences(old, new)) == ["train.lr"]
    assert list(resume._differences(old, old)) == []


# --- registry/compose/hardware.py: a generated name stands for hardware, on no other axis -------------
@pytest.mark.parametrize("name", ["2xH100", "2x8xB200"])
def test_a_generated_hardware_name_names_nothing_on_another_axis(name):
    from registry.compose import hardware
    from registry.names import Name

    assert hardware.exists("hardware", name)
    assert not hardware.exists("policy", name) and not hardware.exists("backend", name)
    assert hardware.is_cell(Name(("act", "ddp", name)))
    assert not hardware.is_cell(Name((name, "ddp", name))) and not hardware.is_cell(Name(("act", name, name)))


# --- round 2's survivors (issue 41): each class, at both sides of its edge ------------------------
@pytest.mark.parametrize("limit", [1, 100, 4096])
def test_a_program_may_print_exactly_its_cap_and_not_one_byte_more(limit):
    code = "import sys; sys.stdout.write('x' * int(sys.argv[1]))"
    assert untrusted.run_output([sys.executable, "-c", code, str(limit)], limit=limit, timeout=20) == (0, b"x" * limit)
    with pytest.raises(untrusted.Rejected, match="printed more than"):
        untrusted.run_output([sys.executable, "-c", code, str(limit + 1)], limit=limit, timeout=20)


def test_a_file_of_exactly_its_cap_is_read_whole(tmp_path):
    path = tmp_path / "f"
    path.write_bytes(b"y" * 100)
    assert untrusted.read_bytes(path, 100) == b"y" * 100
    path.write_bytes(b"y" * 101)
    with pytest.raises(untrusted.Rejected, match="101 bytes, more than the 100 bytes"):
        untrusted.read_bytes(path, 100)


def test_a_release_is_compared_to_its_patch_without_its_local_tag():
    assert environment._release("4.57.1") < environment._release("4.57.2") < environment._release("4.58.0")
    assert environment._release("2.9.1+cu128") == (2, 9, 1) == environment._release("2.9.1")
    assert environment._release("12.8") == (12, 8)


@pytest.mark.parametrize("fps", [0, -30, 0.0, True, "30"])
def test_a_frame_rate_that_is_not_a_positive_number_is_left_unread(tmp_path, fps):
    from registry.run.preflight import data, metadata

    info = tmp_path / "info.json"
    info.write_text(json.dumps({"fps": fps, "total_episodes": 2, "total_frames": 60, "features": {}}))
    meta = metadata.read(info)
    assert meta.fps is None and meta.frames == 60
    assert data.fps(meta, data.Policy(_act("dataset.action_freq=30"), {})) == []  # no division by a zero rate


@pytest.mark.parametrize(
    ("shape", "size"),
    [([480, 640, 3], (480, 640)), ([3, 480, 640], (480, 640)), ([4, 4, 3], (4, 4)), ([1, 64, 3], (1, 64)),
     ([3, 96, 1], (3, 96)), ([96, 96, 4], (96, 96)), ([1, 96, 96], (96, 96))],
)  # fmt: skip
def test_an_image_is_channels_last_unless_only_its_first_axis_looks_like_channels(shape, size):
    from registry.run.preflight import metadata

    assert metadata._height_width(shape, None) == size


def test_only_the_chosen_episodes_the_dataset_has_are_counted():
    from registry.run.preflight import data
    from registry.run.preflight.metadata import DatasetMeta

    meta = DatasetMeta(Path("info.json"), 30.0, 10, 1000, ())  # episodes 0..9 of 100 frames
    for chosen, count in (([9, 10, 11], "1 episode "), ([8, 9, 10], "2 episodes "), ([10], None)):
        recipe = _act(f"dataset.episodes={chosen}", "train.micro_batch_size=64")
        found = data.frames(meta, data.Policy(recipe, {}))
        if count is None:
            assert [f.severity for f in found] == ["error"]  # none of them: no frame to sample
        else:
            assert len(found) == 1 and count in found[0].message, found


@pytest.mark.parametrize(
    ("sizes", "refused"),
    [(((480, 640), (480, 640)), False), (((480, 640), (480, 320)), True), (((480, 640), (240, 640)), True)],
)
def test_a_diffusion_policy_refuses_cameras_that_differ_in_either_side(sizes, refused):
    from registry import view
    from registry.compose import compose
    from registry.run.preflight import data
    from registry.run.preflight.metadata import Camera, DatasetMeta

    cameras = tuple(Camera(f"observation.images.c{i}", h, w) for i, (h, w) in enumerate(sizes))
    meta = DatasetMeta(Path("info.json"), 10.0, 10, 1000, cameras)
    recipe = view.of(compose("diffusion/ddp/8xA100", ["dataset.num_cams=2"]).data)
    found = data.image_size(meta, data.Policy(recipe, {}))
    assert [f.path for f in found] == ([("dataset", "num_cams")] if refused else [])


LEROBOT_ACT = "--policy.type=act --dataset.repo_id=lerobot/aloha_sim_insertion_human --policy.push_to_hub=false"


@pytest.mark.parametrize("spelt", ["false", "False", "0", "no"])
def test_a_default_flag_is_known_whichever_way_it_is_spelt(tmp_path, spelt):
    from registry.resolve import importer

    (tmp_path / "a.yaml").write_text("distributed_type: NO\nnum_machines: 1\nnum_processes: 1\n")
    setup = importer.Setup(tmp_path / "a.yaml", trainer="lerobot", trainer_args=f"{LEROBOT_ACT} --wandb.enable={spelt}")
    result = importer.read(setup)
    assert "wandb" not in result.recipe["trainer"]["lerobot"]
    said = [n for n in result.notes if "LeRobot's defaults" in n]
    assert len(said) == 1 and "not written, as the recipe gives the same: --wandb.enable=false" in said[0], said


@pytest.mark.parametrize(("processes", "machines", "per_node"), [(8, 2, 4), (8, 1, 8), (2, 2, 1), (None, None, 1)])
def test_a_bare_launch_splits_its_processes_over_its_machines(processes, machines, per_node):
    from registry.resolve import importer

    launch = {k: v for k, v in (("num_processes", processes), ("num_machines", machines)) if v is not None}
    recipe, _ = importer.bare_launch("H100", launch)
    assert recipe["hardware"] == {"gpu": "H100", "gpus_per_node": per_node, "nodes": machines or 1}


@pytest.mark.parametrize("port", [True, False, "29500", 29500.0, None])
def test_a_port_that_is_not_a_whole_number_is_refused_never_written(port):
    from registry.errors import RecipeError
    from registry.resolve import launch

    assert launch._port(29500) == 29500
    with pytest.raises(RecipeError, match=r"launch\.main_process_port: .* is not a port number"):
        launch._port(port)


@pytest.mark.parametrize("comment", ["# two nodes", "#", "# --gpus=16 -N 9", "#--gpus=16"])
def test_an_unquoted_hash_ends_a_directive_line_and_no_more(comment):
    from registry.validate import engines

    text = f'#!/bin/bash\n#SBATCH --nodes=2 {comment}\n#SBATCH --gpus=8\n#SBATCH --job-name="a # b"\n'
    assert engines.sbatch_options(text) == [("--nodes", "2"), ("--gpus", "8"), ("--job-name", "a # b")]


@pytest.mark.parametrize("named", ["", "checkpoints/000010", "checkpoints/000200"])
def test_resume_from_a_checkpoint_folder_resumes_the_run_it_belongs_to(tmp_path, named):
    from registry.compose import compose
    from registry.errors import RecipeError
    from registry.run import resume

    run = tmp_path / "runs" / "tiny" / "20260101-000000"
    for step in ("000010", "000200"):
        (run / "checkpoints" / step).mkdir(parents=True)
    (run / "recipe.lock.yaml").write_text("resolved: {}\n")
    recipe = compose("tiny/ddp/cpu")
    assert resume.folder_of(recipe, str(run / named) if named else str(run)) == run
    with pytest.raises(RecipeError, match="not a run directory"):  # a folder below that is no checkpoint
        resume.folder_of(recipe, str(run / "checkpoints"))


@pytest.mark.parametrize(("given", "backends"), [("ddp,", ["ddp"]), (" ddp , ,zero2 ", ["ddp", "zero2"]), (",,", None)])
def test_tune_backends_drop_empty_items_and_refuse_a_list_of_none(monkeypatch, given, backends):
    from types import SimpleNamespace

    from registry.commands import tune
    from registry.errors import RecipeError
    from registry.run import tune as tuning

    seen = []
    monkeypatch.setattr(tuning, "main", lambda target, overrides, chosen, *rest: seen.append(chosen) or 0)
    fields = [
        "global_batch",
        "budget",
        "warmup",
        "steps",
        "output_dir",
        "record_to",
        "allow_hardware_mismatch",
        "tie_runs",
    ]
    args = SimpleNamespace(target="tiny/cpu", overrides=[], backends=given, **dict.fromkeys(fields))
    if backends is None:
        with pytest.raises(RecipeError, match="--backends names no backend"):
            tune.run(args)
        assert seen == []
    else:
        assert tune.run(args) == 0 and seen == [backends]
