"""The pre-flight, `recipe doctor`, `recipe run`, `recipe estimate` and `recipe verify` against
hostile or damaged files from outside the registry (docs/failure-modes.md §68, §70): a dataset's
meta/info.json, a checkpoint's config.json, the launcher on PATH, what the trainer's interpreter
prints, a lock from another machine. Each is a clean finding or one error line, never a traceback,
a hang, or memory without end."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from conftest import ROOT, run_cli

from registry.compose import compose
from registry.errors import RecipeError
from registry.run import environment, preflight

DATASETS = ROOT / "tests" / "data" / "datasets"
TOY = json.loads((DATASETS / "toy" / "meta" / "info.json").read_text())
ACT = ["act/ddp/cpu", "hardware.processes_per_node=1", "dataset.action_freq=10", "policy.chunk_size=20"]
ACT += ["policy.n_action_steps=20"]


def dataset_with(folder: Path, text: str | None = None, *, kind: str = "text") -> Path:
    """A dataset root whose meta/info.json is `text`, or a FIFO, a link to /dev/zero, a sparse file."""
    (folder / "meta").mkdir(parents=True)
    planted(folder / "meta" / "info.json", text, kind)
    return folder


def planted(path: Path, text: str | None, kind: str) -> None:
    """`text` at `path`, or in its place a FIFO, a link to /dev/zero or a 32 GiB sparse file."""
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "zero":
        path.symlink_to("/dev/zero")
    elif kind == "sparse":
        with open(path, "wb") as f:
            f.truncate(32 << 30)
    else:
        path.write_text(text)


def toy_with(**changes) -> str:
    info = json.loads(json.dumps(TOY))
    for key, value in changes.items():
        info[key] = value
    return json.dumps(info)


def checked(overrides: list[str], env=None) -> preflight.Report:
    recipe = compose(ACT[0], [*ACT[1:], *overrides])
    report = preflight.Report()
    preflight.check_dataset(recipe.data, recipe.origins, ROOT, env if env is not None else {}, report)
    return report


def one_line_or_findings(r) -> None:
    assert "Traceback" not in r.stderr + r.stdout, r.stderr[-3000:]
    assert r.returncode in (0, 1), r.stdout + r.stderr


# --- 1. a dataset's meta/info.json --------------------------------------------------------------------
HOSTILE_INFO = {
    "deep": ('{"features": ' + "[" * 100_000 + "]" * 100_000 + "}", "nested deeper than 64 levels"),
    "frames-10^400": (toy_with(total_frames=int("1" + "0" * 400)), "an integer of 401 digits"),
    "fps-1e400": (toy_with(fps=10).replace('"fps": 10', '"fps": 1e400'), "1e400 overflows a float"),
    "nan": (toy_with(fps=10).replace('"fps": 10', '"fps": NaN'), "NaN is not a number"),
    "features-a-list": (toy_with(features=[1, 2]), "no `features` mapping"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE_INFO))
def test_a_hostile_info_json_is_one_note_naming_it(tmp_path, case):
    text, why = HOSTILE_INFO[case]
    root = dataset_with(tmp_path / "data", text)
    report = checked([f"dataset.root={root}"])
    assert report.problems == [] and len(report.notes) == 1, report.notes
    assert str(root / "meta" / "info.json") in report.notes[0] and why in report.notes[0]


@pytest.mark.parametrize(("kind", "why"), [("fifo", "a FIFO"), ("zero", "a device"), ("sparse", "34359738368 bytes")])
def test_an_info_json_that_is_no_regular_file_is_one_note(tmp_path, kind, why):
    root = dataset_with(tmp_path / "data", kind=kind)
    report = checked([f"dataset.root={root}"])
    assert report.problems == [] and len(report.notes) == 1 and why in report.notes[0], report.notes


WRONG_TYPES = {
    "shape-of-strings": {"dtype": "video", "shape": ["480", "640", "3"], "names": ["height", "width", "channels"]},
    "names-not-a-list": {"dtype": "video", "shape": [96, 96, 3], "names": "height"},
    "names-of-mappings": {"dtype": "video", "shape": [96, 96, 3], "names": [{}, [], None]},
    "shape-a-mapping": {"dtype": "video", "shape": {"h": 96}},
    "dtype-a-list": {"dtype": ["video"], "shape": [96, 96, 3]},
    "shape-of-bools": {"dtype": "video", "shape": [True, True, True]},
    "feature-a-string": "video",
}


@pytest.mark.parametrize("case", sorted(WRONG_TYPES))
def test_wrong_types_in_a_feature_are_findings_never_a_traceback(tmp_path, case):
    info = json.loads(toy_with())
    info["features"]["observation.images.top"] = WRONG_TYPES[case]
    root = dataset_with(tmp_path / "data", json.dumps(info))
    report = checked([f"dataset.root={root}"])
    cameras = [(c.height, c.width) for c in report.datasets[0].cameras]
    assert cameras in ([], [(96, 96)]), cameras  # a camera read as it says, or none: never a guess
    if not cameras:
        assert [p.rule for p in report.problems] == ["dataset-cameras"]


def test_wrong_types_at_the_top_are_left_unread(tmp_path):
    text = toy_with(fps="10", total_episodes=[4], total_frames={"n": 200}, codebase_version=3)
    meta = checked([f"dataset.root={dataset_with(tmp_path / 'data', text)}"]).datasets[0]
    assert (meta.fps, meta.episodes, meta.frames, meta.version) == (None, None, None, None)


def test_doctor_reports_a_hostile_info_json_as_a_note(tmp_path):
    deep = dataset_with(tmp_path / "deep", HOSTILE_INFO["deep"][0])
    r = run_cli("doctor", *ACT, f"dataset.root={deep}", "--format", "json", timeout=30)
    one_line_or_findings(r)
    notes = json.loads(r.stdout)["notes"]
    assert any(str(deep / "meta" / "info.json") in n and "nested deeper" in n for n in notes), notes
    fifo = dataset_with(tmp_path / "fifo", kind="fifo")
    r = run_cli("doctor", *ACT, f"dataset.root={fifo}", timeout=30)
    one_line_or_findings(r)
    assert "a FIFO, not a regular file" in r.stdout


def test_run_records_a_fifo_info_json_without_hanging(tmp_path):
    """recipe run hashes a local dataset's info.json into the lock (registry/run/envlock.py): a FIFO
    there is recorded as unreadable, not opened for ever."""
    from registry.run import envlock

    fifo = dataset_with(tmp_path / "data", kind="fifo")
    doc = compose(ACT[0], [*ACT[1:], f"dataset.root={fifo}"]).data
    said = environment_call(envlock.dataset, doc, tmp_path)
    assert said["info_sha256"].startswith("unknown (") and "a FIFO" in said["info_sha256"]
    zero = dataset_with(tmp_path / "zero", kind="zero")
    said = environment_call(envlock.dataset, compose(ACT[0], [*ACT[1:], f"dataset.root={zero}"]).data, tmp_path)
    assert "a device" in said["info_sha256"]


def environment_call(fn, *args, limit: float = 10.0):
    from test_untrusted import _quick

    return _quick(fn, *args, limit=limit)


# --- 2. a pretrained checkpoint's config.json ----------------------------------------------------------
def checkpoint(folder: Path, config: object = None, *, kind: str = "text") -> Path:
    folder.mkdir(parents=True)
    planted(folder / "config.json", config if isinstance(config, str) else json.dumps(config), kind)
    return folder


@pytest.mark.parametrize(("kind", "why"), [("fifo", "a FIFO"), ("zero", "a device"), ("sparse", "34359738368 bytes")])
def test_a_checkpoint_config_that_is_no_regular_file_is_one_note(tmp_path, kind, why):
    ckpt = checkpoint(tmp_path / "ckpt", kind=kind)
    report = environment_call(checked, [f"dataset.root={DATASETS / 'toy'}", f"policy.pretrained_path={ckpt}"], limit=15)
    assert report.problems == [], [p.render() for p in report.problems]
    assert len(report.notes) == 1 and str(ckpt / "config.json") in report.notes[0] and why in report.notes[0]


@pytest.mark.parametrize("value", [[1, 2], "VISUAL", None, 3])
def test_a_checkpoint_whose_features_are_no_mapping_is_not_a_traceback(tmp_path, value):
    config = {"type": "act", "input_features": value, "output_features": value}
    ckpt = checkpoint(tmp_path / "ckpt", config)
    report = checked([f"dataset.root={DATASETS / 'toy'}", f"policy.pretrained_path={ckpt}"])
    assert report.problems == [], [p.render() for p in report.problems]
    if value is not None:  # absent features say nothing; features of the wrong kind say so
        assert len(report.notes) == 1 and "input_features" in report.notes[0] and str(ckpt) in report.notes[0]


def test_a_non_mapping_feature_or_shape_is_skipped_and_the_rest_checked(tmp_path):
    config = {
        "input_features": {
            "observation.images.front": "VISUAL",
            "observation.images.side": {"type": "VISUAL", "shape": "3x96x96"},
            "observation.state": {"type": "STATE", "shape": ["6"]},
            "observation.env": {"type": "ENV", "shape": []},
        },
        "output_features": {"action": {"type": "ACTION", "shape": [6]}},
    }
    ckpt = checkpoint(tmp_path / "ckpt", config)
    report = checked([f"dataset.root={DATASETS / 'toy'}", f"policy.pretrained_path={ckpt}"])
    said = [p.message for p in report.problems]
    assert [p.rule for p in report.problems] == ["dataset-action-size"], said
    assert "action of 6 values" in said[0] and "has 14" in said[0]


def test_doctor_with_a_fifo_checkpoint_config_does_not_hang(tmp_path):
    ckpt = checkpoint(tmp_path / "ckpt", kind="fifo")
    r = run_cli("doctor", *ACT, f"dataset.root={DATASETS / 'toy'}", f"policy.pretrained_path={ckpt}", timeout=30)
    one_line_or_findings(r)
    assert f"{ckpt / 'config.json'}: a FIFO, not a regular file" in r.stdout


# --- 3. what the trainer's interpreter prints ----------------------------------------------------------
def interpreter(folder: Path, body: str) -> str:
    """A stand-in interpreter: a shell script that prints `body` whatever it is asked."""
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "python"
    script.write_text(f"#!/bin/sh\n{body}\n")
    script.chmod(0o755)
    return str(script)


def printing(folder: Path, report: object) -> str:
    (folder / "report.json").parent.mkdir(parents=True, exist_ok=True)
    (folder / "report.json").write_text(report if isinstance(report, str) else json.dumps(report))
    return interpreter(folder, f'cat "{folder / "report.json"}"')


GOOD = {"python": "3.12.1", "packages": {"torch": "2.5.1", "lerobot": "0.6.1"}, "torch_cuda": None, "nccl": None}
WRONG_REPORTS = {
    "not-a-mapping": ([GOOD], "the report is list, not a mapping"),
    "packages-a-list": ({**GOOD, "packages": ["torch"]}, "packages is list, not a mapping"),
    "version-an-int": ({**GOOD, "packages": {"torch": 2, "lerobot": "0.6.1"}}, "packages.torch is int, not a string"),
    "python-a-dict": ({**GOOD, "python": {"v": 3}}, "python is dict, not a string"),
    "python-missing": ({k: v for k, v in GOOD.items() if k != "python"}, "python is NoneType, not a string"),
    "cuda-a-list": ({**GOOD, "torch_cuda": ["12.4"]}, "torch_cuda is list, not a string"),
    "extras-a-list": ({**GOOD, "extras": []}, "extras is list, not a mapping"),
    "extra-a-string": ({**GOOD, "extras": {"lerobot[diffusion]": "diffusers"}}, "is str, not a list"),
    "need-no-name": ({**GOOD, "extras": {"lerobot[diffusion]": [{"spec": ">=1"}]}}, "[0].name is NoneType"),
    "need-ok-a-string": (
        {**GOOD, "extras": {"lerobot[diffusion]": [{"name": "d", "spec": "", "version": "1", "ok": "yes"}]}},
        "[0].ok is str, not bool",
    ),
    "deep": ("[" * 100_000 + "]" * 100_000, "nested deeper than 64 levels"),
    "huge-int": ('{"python": 1' + "0" * 400 + "}", "an integer of 401 digits"),
    "not-json": ("<html>", "not JSON"),
    # printed in doctor's summary: a terminal escape in a version reached the terminal raw
    "escape-in-a-version": ({**GOOD, "packages": {"torch": "2.5\x1b[2J", "lerobot": "0.6.1"}}, "control character"),
    "newline-in-python": ({**GOOD, "python": "3.12\nfake line"}, "python holds a control character"),
}


@pytest.mark.parametrize("case", sorted(WRONG_REPORTS))
def test_a_report_of_the_wrong_shape_is_one_error_line(tmp_path, case):
    report, why = WRONG_REPORTS[case]
    python = printing(tmp_path / case, report)
    with pytest.raises(RecipeError) as caught:
        environment.ask(python, "lerobot", "diffusion")
    said = str(caught.value)
    assert said.startswith(f"{python}: cannot ask it for its packages (") and why in said, said
    assert "\n" not in said and len(said) < 400


def test_a_well_formed_report_passes_the_check(tmp_path):
    need = {"name": "diffusers", "spec": ">=0.27", "version": None, "ok": None}
    python = printing(tmp_path, {**GOOD, "extras": {"lerobot[diffusion]": [need]}})
    assert environment.ask(python, "lerobot", "diffusion") == {**GOOD, "extras": {"lerobot[diffusion]": [need]}}


def test_a_flood_of_output_is_cut_off_and_refused(tmp_path):
    python = interpreter(tmp_path, "exec cat /dev/zero")  # without end: gigabytes held before the cap
    with pytest.raises(RecipeError, match="printed more than 1 MiB"):
        environment_call(environment.ask, python, "lerobot", limit=15)


def test_an_interpreter_that_prints_nothing_says_its_exit_code(tmp_path):
    python = interpreter(tmp_path, "exit 7")
    with pytest.raises(RecipeError, match="exited with code 7 and printed no report"):
        environment.ask(python)


def test_doctor_and_run_say_a_hostile_report_in_one_line(tmp_path):
    python = printing(tmp_path / "env" / "bin", {**GOOD, "packages": {"torch": 2, "lerobot": "0.6.1"}})
    args = [*ACT, f"trainer.env={python}", f"dataset.root={DATASETS / 'toy'}"]
    r = run_cli("doctor", *args, timeout=30)
    one_line_or_findings(r)
    assert "error[host-trainer-env]" in r.stdout and "packages.torch is int, not a string" in r.stdout
    r = run_cli("run", *args, "--output-dir", str(tmp_path / "run"), timeout=30)
    assert r.returncode == 127 and "Traceback" not in r.stderr, r.stderr
    assert r.stderr.strip().splitlines()[-1].endswith("packages.torch is int, not a string)"), r.stderr
    assert not (tmp_path / "run").exists()


# --- 4. the launcher found on PATH -------------------------------------------------------------------------
def test_a_fifo_named_like_the_launcher_on_path_does_not_hang(tmp_path):
    fifo = tmp_path / "bin" / "accelerate"
    fifo.parent.mkdir()
    os.mkfifo(fifo)
    fifo.chmod(0o755)
    assert environment_call(environment.interpreter_of, "accelerate", {"PATH": str(fifo.parent)}) is None
    assert environment_call(environment.interpreter_of, str(fifo), {}) is None


def test_a_huge_sparse_launcher_is_read_for_its_head_only(tmp_path):
    script = tmp_path / "bin" / "accelerate"
    script.parent.mkdir()
    with open(script, "wb") as f:
        f.write(f"#!{sys.executable}\n".encode())
        f.truncate(64 << 30)  # 64 GiB: read whole, it would take all memory
    script.chmod(0o755)
    found = environment_call(environment.interpreter_of, "accelerate", {"PATH": str(script.parent)})
    assert found == sys.executable


# --- 5. recipe verify of a lock from another machine ---------------------------------------------------
def foreign_lock(tmp_path: Path, trainer_env: str | None, **resolved_changes) -> Path:
    """A LeRobot run's lock as another machine would hand it over: resolve's lock, its trainer.env
    set to `trainer_env`, and an environment section."""
    import yaml

    from registry.resolve import LOCK, resolve

    lock = tmp_path / "resolved" / LOCK
    lock.parent.mkdir()
    content = yaml.safe_load(resolve(compose(ACT[0], ACT[1:])).files[LOCK])
    content["resolved"]["trainer"]["env"] = trainer_env
    content["resolved"].update(resolved_changes)
    content["environment"] = {"python": "3.12.1", "packages": {"torch": "2.5.1"}, "interpreter": trainer_env}
    lock.write_text(yaml.safe_dump(content, sort_keys=False))
    return lock


def test_verify_runs_no_interpreter_the_lock_names(tmp_path):
    marker = tmp_path / "ran"
    evil = interpreter(tmp_path / "evil" / "bin", f'touch "{marker}"\necho "{{}}"')
    lock = foreign_lock(tmp_path, evil)
    r = run_cli("verify", str(lock), env={"PATH": f"{tmp_path / 'empty'}:/usr/bin:/bin"})
    assert not marker.exists(), "recipe verify ran the interpreter the lock names"
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stdout + r.stderr
    assert f"the lock's trainer.env {evil} was not asked" in r.stderr and "--trainer-env ENV" in r.stderr
    # this host's environment, named by the user, is asked
    mine = printing(tmp_path / "mine" / "bin", {**GOOD, "packages": {"torch": "2.5.1", "lerobot": "0.6.1"}})
    r = run_cli("verify", str(lock), "--trainer-env", mine)
    assert not marker.exists() and "was not asked" not in r.stderr, r.stderr
    assert "environment.python: recorded" not in r.stdout and "environment.packages.torch" not in r.stdout, r.stdout


def test_verify_asks_no_program_the_lock_names_by_path(tmp_path):
    marker = tmp_path / "ran"
    evil = interpreter(tmp_path / "evil", f'touch "{marker}"\necho "{{}}"')
    script = tmp_path / "train.sh"
    script.write_text(f"#!{evil}\n")
    script.chmod(0o755)
    lock = foreign_lock(tmp_path, None)
    import yaml

    content = yaml.safe_load(lock.read_text())
    resolved = compose("tiny/ddp/cpu", ["trainer.kind=command", f"trainer.command.program={script}"]).data
    content["resolved"] = resolved
    lock.write_text(yaml.safe_dump(content, sort_keys=False))
    r = run_cli("verify", str(lock))
    assert not marker.exists(), "recipe verify ran the interpreter a program the lock names runs under"
    assert "Traceback" not in r.stderr and r.returncode in (1, 2), r.stdout + r.stderr


def hostile_lock(tmp_path: Path, case: str) -> Path:
    lock = tmp_path / "recipe.lock.yaml"
    if case == "fifo":
        os.mkfifo(lock)
    elif case == "zero":
        lock.symlink_to("/dev/zero")
    elif case == "sparse":
        with open(lock, "wb") as f:
            f.truncate(8 << 30)
    elif case == "deep-flow":
        lock.write_text("lock_version: 1\nresolved: " + "[" * 100_000 + "]" * 100_000 + "\n")
    elif case == "deep-block":
        lock.write_text("lock_version: 1\nresolved:\n" + "".join("  " * i + f"k{i}:\n" for i in range(1, 300)))
    elif case == "a-list":
        lock.write_text("- lock_version\n- resolved\n")
    elif case == "a-string":
        lock.write_text("lock_version resolved environment\n")
    elif case == "not-utf8":
        lock.write_bytes(b"lock_version: 1\nresolved: {}\n\xff\n")
    return lock


@pytest.mark.parametrize(
    ("case", "why"),
    [
        ("fifo", "a FIFO, not a regular file"),
        ("zero", "a device, not a regular file"),
        ("sparse", "8589934592 bytes, more than the"),
        ("deep-flow", "error[yaml]"),
        ("deep-block", "nested deeper than 64 levels"),
        ("a-list", "must be a mapping, not a list"),
        ("a-string", "must be a mapping, not a scalar"),
        ("not-utf8", "not UTF-8"),
    ],
)
def test_verify_of_a_hostile_lock_is_one_line_and_exit_2(tmp_path, case, why):
    lock = hostile_lock(tmp_path, case)
    r = run_cli("verify", str(lock), timeout=20)
    assert r.returncode == 2, r.stdout + r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and why in r.stderr and not r.stdout, r.stderr


ENVIRONMENTS = {
    "packages-a-list": {"python": "3.12.1", "packages": ["torch"]},
    "python-a-mapping": {"python": {"v": 3}, "packages": {"torch": 2}},
    "interpreter-a-list": {"python": "3", "interpreter": ["/bin/sh", "-c"], "gpu_count": "two"},
}


@pytest.mark.parametrize("case", sorted(ENVIRONMENTS))
def test_verify_of_an_environment_of_wrong_types_compares_without_a_traceback(tmp_path, case):
    import yaml

    lock = foreign_lock(tmp_path, None)
    content = yaml.safe_load(lock.read_text())
    content["environment"] = ENVIRONMENTS[case]
    lock.write_text(yaml.safe_dump(content, sort_keys=False))
    r = run_cli("verify", str(lock))
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stdout + r.stderr
    assert r.stdout.strip().splitlines()[-1].startswith("recipe: this host differs from the environment")


@pytest.mark.parametrize(
    ("change", "why"),
    [({"trainer": ["lerobot"]}, "its resolved recipe is not a valid recipe"), ({"train": 5}, "not a valid recipe")],
)
def test_verify_of_a_resolved_recipe_of_wrong_types_is_one_line_and_exit_2(tmp_path, change, why):
    lock = foreign_lock(tmp_path, None, **change)
    r = run_cli("verify", str(lock))
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and why in r.stderr, r.stdout + r.stderr


# --- 6. the cameras recipe estimate reads, and non-square images ------------------------------------------
def cameras_info(folder: Path, cameras: dict[str, dict]) -> Path:
    info = json.loads(toy_with())
    del info["features"]["observation.images.top"]
    for name, feature in cameras.items():
        info["features"][name] = {"dtype": "video", "info": {}, **feature}
    return dataset_with(folder, json.dumps(info))


HWC = ["height", "width", "channels"]
NON_SQUARE = {
    "hwc-named": {"shape": [480, 640, 3], "names": HWC},
    "chw-named": {"shape": [3, 480, 640], "names": ["channels", "height", "width"]},
    "chw-unnamed": {"shape": [3, 480, 640], "names": None},
    "hwc-unnamed": {"shape": [480, 640, 3]},
}


@pytest.mark.parametrize("case", sorted(NON_SQUARE))
def test_a_non_square_camera_is_read_as_height_480_and_width_640(tmp_path, case):
    root = cameras_info(tmp_path / "data", {"observation.images.top": NON_SQUARE[case]})
    diffusion = ["diffusion/ddp/2xH100", f"dataset.root={root}"]
    report = preflight.Report()
    recipe = compose(diffusion[0], [*diffusion[1:], "policy.options.crop_shape=[470,630]"])
    preflight.check_dataset(recipe.data, recipe.origins, ROOT, {}, report)
    assert [(c.height, c.width) for c in report.datasets[0].cameras] == [(480, 640)]
    assert "dataset-image-size" not in {p.rule for p in report.problems}  # 470 x 630 fits in 480 x 640
    recipe = compose(diffusion[0], [*diffusion[1:], "policy.options.crop_shape=[500,600]"])
    report = preflight.Report()
    preflight.check_dataset(recipe.data, recipe.origins, ROOT, {}, report)
    [said] = [p.message for p in report.problems if p.rule == "dataset-image-size"]
    assert "observation.images.top is 480 x 640 and the policy crops 500 x 600" in said


def test_estimate_says_how_many_cameras_and_which_sizes_it_used(tmp_path):
    root = cameras_info(
        tmp_path / "data",
        {
            "observation.images.top": {"shape": [480, 640, 3], "names": HWC},
            "observation.images.wrist": {"shape": [3, 240, 320], "names": ["channels", "height", "width"]},
        },
    )
    r = run_cli("estimate", "act/ddp/2xH100", f"dataset.root={root}", "dataset.num_cams=2")
    assert r.returncode == 0, r.stderr
    [line] = [x for x in r.stdout.splitlines() if x.startswith("activations per frame:")]
    info = root / "meta" / "info.json"
    assert line.startswith(
        f"activations per frame: at the mean image of {info}'s 2 cameras (observation.images.top 480 x 640,"
        " observation.images.wrist 240 x 320), 0.625 x the part's 480 x 640"
    ), line
    r = run_cli("estimate", "act/ddp/2xH100", f"dataset.root={root}", "dataset.num_cams=2", "--format", "json")
    frames = json.loads(r.stdout)["frames"]
    assert frames["pixels"] == (480 * 640 + 240 * 320) / 2
    assert frames["cameras"] == [
        {"name": "observation.images.top", "height": 480, "width": 640},
        {"name": "observation.images.wrist", "height": 240, "width": 320},
    ]


# --- 7. a relative dataset.root in the lock, run from another folder ----------------------------------------
def test_a_relative_dataset_root_is_recorded_as_given_and_hashed_where_the_trainer_reads_it(tmp_path, monkeypatch):
    """The trainer runs in the run folder (launch.sh changes into it) and gets dataset.root as the
    recipe gives it: the lock records that value, and hashes the info.json under the run folder,
    whatever folder `recipe run` started in and wherever the recipe file lies."""
    import hashlib

    from registry.resolve import LOCK, resolve
    from registry.run import envlock

    recipes, elsewhere, run_folder = tmp_path / "recipes", tmp_path / "cwd", tmp_path / "runs" / "one"
    recipes.mkdir()
    (recipes / "mine.yaml").write_text(
        run_cli("show", *ACT, "dataset.root=data/mine", cwd=tmp_path).stdout  # a recipe file with a relative root
    )
    cameras_info(elsewhere / "data" / "mine", {"observation.images.top": {"shape": [1, 2, 3], "names": HWC}})
    cameras_info(run_folder / "data" / "mine", {"observation.images.top": {"shape": [480, 640, 3], "names": HWC}})
    monkeypatch.chdir(elsewhere)
    recipe = compose(str(recipes / "mine.yaml"))
    assert recipe.data["dataset"]["root"] == "data/mine"
    assert "--dataset.root=data/mine" in resolve(recipe).files["launch.sh"]
    said = envlock.dataset(recipe.data, run_folder)
    want = hashlib.sha256((run_folder / "data" / "mine" / "meta" / "info.json").read_bytes()).hexdigest()
    assert said["root"] == "data/mine" and said["info_sha256"] == want
    assert envlock.section({"dataset": said}) in envlock.recorded(resolve(recipe), {"dataset": said}).files[LOCK]
    report = preflight.Report()  # the pre-flight reads the same file when given the run folder
    preflight.check_dataset(recipe.data, recipe.origins, run_folder, {}, report)
    assert [(c.height, c.width) for c in report.datasets[0].cameras] == [(480, 640)]


def test_a_relative_dataset_root_is_read_where_the_trainer_reads_it(tmp_path):
    """The trainer runs in the run folder (docs/preflight.md): a relative dataset.root is read from
    --output-dir when given, and is said to point nowhere when the run makes its folder new; the
    working folder, which the trainer never sees, is not read (it was, so a dataset there passed)."""
    dataset_with(tmp_path / "data" / "mine", json.dumps(TOY))
    r = run_cli("doctor", *ACT, "dataset.root=data/mine", "--format", "json", cwd=tmp_path, timeout=60)
    one_line_or_findings(r)
    notes = json.loads(r.stdout)["notes"]
    assert any("dataset.root data/mine is relative to the run folder, which this run makes new" in n for n in notes)
    assert json.loads(r.stdout)["datasets"] == [], r.stdout
    out = tmp_path / "out"
    dataset_with(out / "data" / "mine", json.dumps(TOY))
    r = run_cli("doctor", *ACT, "dataset.root=data/mine", "--output-dir", str(out), "--format", "json", cwd=tmp_path)
    one_line_or_findings(r)
    assert [d["path"] for d in json.loads(r.stdout)["datasets"]] == [str(out / "data/mine/meta/info.json")]


def test_what_a_note_quotes_is_one_printable_line(tmp_path):
    """A hub ref holding an escape sequence, a dataset.root holding a newline: each note names what
    it read, and was printed raw (the ref) or over two lines (the root)."""
    home = tmp_path / "lerobot"
    hub = home / "hub" / "datasets--org--data"
    (hub / "refs").mkdir(parents=True)
    (hub / "refs" / "main").write_text("\x1b]0;owned\x07abc")
    (hub / "snapshots").mkdir()
    report = checked(["dataset.repo_id=org/data"], env={"HF_LEROBOT_HOME": str(home)})
    assert report.notes and "\x1b" not in "".join(report.notes), report.notes  # the ref is not followed
    report = checked(["dataset.root='/no/such\n\nrecipe - error - fake'"])
    _, lines = preflight.verdict(report, {})
    printed = "\n".join(lines).splitlines()  # as the terminal shows them
    assert len([x for x in printed if "dataset not checked" in x]) == 1
    assert not any(x.startswith("recipe - error - fake") for x in printed), printed


def test_a_checkpoint_config_with_nan_in_a_field_not_read_is_still_checked(tmp_path):
    """Python's json.dump writes NaN for a float nan: a policy's config.json may hold one anywhere."""
    folder = checkpoint(tmp_path / "ckpt", '{"dropout": NaN, "input_features": {}, "output_features": {}}')
    from registry.run.preflight import metadata

    place, features = metadata.pretrained_features(str(folder), tmp_path, {})
    assert place == folder / "config.json" and features == {}


def test_a_launcher_whose_python_path_has_a_space_names_it_whole(tmp_path):
    python = tmp_path / "my envs" / "bin" / "python3"
    launcher = tmp_path / "bin" / "accelerate"
    launcher.parent.mkdir()
    launcher.write_text(f"#!/bin/sh\n'''exec' \"{python}\" \"$0\" \"$@\"\n' '''\nimport sys\n")
    assert environment.interpreter_of(str(launcher), {}) == str(python)  # it was cut at the space


@pytest.mark.parametrize("shape", [[0, 0, 3], [10**18, 10**18, 3], [480, 0, 3]])
def test_a_camera_of_no_pixels_or_past_any_sensor_is_not_judged(tmp_path, shape):
    info = json.loads(json.dumps(TOY))
    camera = next(k for k, f in info["features"].items() if f.get("dtype") in ("video", "image"))
    info["features"][camera]["shape"] = shape
    info["features"][camera].pop("names", None)
    from registry.run.preflight import metadata

    meta = metadata.read(dataset_with(tmp_path / "d", json.dumps(info)) / "meta" / "info.json")
    assert camera not in [c.name for c in meta.cameras]  # a 0 x 0 camera was used, and 10**36 pixels
