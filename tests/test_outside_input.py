"""A second held-out round against what comes from outside (issue 41), each case as it was found:
the probe asked from an empty folder, the record of versions appended after a line without its
newline, nvidia-smi read as any program, names and places that no terminal or path can hold,
numbers as a person types them, the file system's refusals in one line, and the legitimate
launchers and sbatch spellings that were refused (docs/failure-modes.md §68)."""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path

import pytest
from conftest import run_cli

from registry.errors import RecipeError
from registry.load import load_file
from registry.run import environment, machine
from registry.sharing import sources, trust

H1, H2 = "1" * 64, "2" * 64


def test_the_trainers_python_is_asked_from_an_empty_folder(tmp_path, monkeypatch):
    """`python -c` imports from its working folder first: a json.py planted where the user stands
    (a run folder copied from elsewhere) ran inside `recipe verify`."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "json.py").write_text(f"open({str(tmp_path / 'PLANTED')!r}, 'w').close()\n")
    (tmp_path / "importlib").mkdir()
    (tmp_path / "importlib" / "__init__.py").write_text(f"open({str(tmp_path / 'PLANTED2')!r}, 'w').close()\n")
    found = environment.ask(sys.executable, "no-such-package-asked-from-here")
    assert found["packages"]["no-such-package-asked-from-here"] is None
    assert not (tmp_path / "PLANTED").exists() and not (tmp_path / "PLANTED2").exists()


def test_a_sighting_appended_after_a_line_without_its_newline_stays_its_own(tmp_path, monkeypatch):
    store = tmp_path / "known.jsonl"
    monkeypatch.setenv("RECIPE_KNOWN_VERSIONS", str(store))
    source = sources.Source("team", tmp_path / "team", "path", str(tmp_path / "team"))
    (tmp_path / "team").mkdir()
    where = trust.place(source)
    store.write_text(json.dumps({"place": where, "version": "exp/x@1", "sha256": H1}))  # no newline
    store.chmod(0o600)
    trust.remember(source, {"exp/y@1": H2})
    assert trust.known() == {(where, "exp/x@1"): H1, (where, "exp/y@1"): H2}  # the first was fused away
    store.write_text(store.read_text() + '{"place": "' + where + '", "vers')  # a crash mid-append
    trust.remember(source, {"exp/z@1": H1})
    assert trust.known()[(where, "exp/z@1")] == H1 and len(trust.known()) == 3


@pytest.mark.parametrize("place", ["/tmp/a\x00b", "file:///tmp/a%00b", "/tmp/\ud800"])
def test_a_sighting_whose_place_no_path_can_be_is_skipped(tmp_path, monkeypatch, place):
    store = tmp_path / "known.jsonl"
    monkeypatch.setenv("RECIPE_KNOWN_VERSIONS", str(store))
    line = json.dumps({"place": place, "version": "exp/x@1", "sha256": H1})  # \ud800 as JSON writes it
    good = json.dumps({"place": "/elsewhere", "version": "exp/x@1", "sha256": H2})
    store.write_text(line + "\n" + good + "\n")
    store.chmod(0o600)
    assert trust.known() == {("/elsewhere", "exp/x@1"): H2}  # it was a ValueError on every command


def test_a_store_in_a_folder_anyone_can_write_is_refused_and_a_sticky_one_is_not(tmp_path, monkeypatch):
    folder = tmp_path / "open"
    folder.mkdir()
    store = folder / "known.jsonl"
    store.write_text("")
    store.chmod(0o600)
    monkeypatch.setenv("RECIPE_KNOWN_VERSIONS", str(store))
    folder.chmod(0o777)
    with pytest.raises(RecipeError, match=r"writable by everyone .*they can replace it"):
        trust.known()
    folder.chmod(0o777 | stat.S_ISVTX)  # as /tmp: only the owner may replace the file
    assert trust.known() == {}


@pytest.mark.parametrize("where", ["folder", "grandparent"])
def test_a_store_below_a_folder_others_can_write_is_refused(tmp_path, monkeypatch, where):
    """Whoever may rename any folder on the way to the store may put a store of their own there."""
    import grp
    import pwd

    top = tmp_path / "top"
    (top / "mid" / "own").mkdir(parents=True)
    store = top / "mid" / "own" / "known.jsonl"
    store.write_text("")
    store.chmod(0o600)
    monkeypatch.setenv("RECIPE_KNOWN_VERSIONS", str(store))
    assert trust.known() == {}
    if where == "grandparent":
        top.chmod(0o777)  # anyone may rename mid/ and put a folder of their own there
        with pytest.raises(RecipeError, match=rf"the folder above it {top} is writable by everyone"):
            trust.known()
        return
    # a group that is not this user's own: its members may write where the user's store lies
    if os.geteuid() != 0:
        pytest.skip("giving a folder to another group needs root (CI runs as root)")
    shared = next(g for g in grp.getgrall() if g.gr_name not in ("root", pwd.getpwuid(0).pw_name))
    os.chown(store.parent, -1, shared.gr_gid)
    store.parent.chmod(0o770)
    with pytest.raises(RecipeError, match=rf"its folder {store.parent} is writable by its group"):
        trust.known()
    store.parent.chmod(0o750)
    assert trust.known() == {}


def nvidia_smi(tmp_path: Path, body: str) -> dict[str, str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "nvidia-smi").write_text(f"#!/bin/sh\n{body}\n")
    (bin_dir / "nvidia-smi").chmod(0o755)
    return {"PATH": f"{bin_dir}:{os.environ['PATH']}"}


@pytest.mark.parametrize("memory", ["nan", "inf", "1e400", "-5", "", " "])  # blank: no 0 MiB GPU
def test_an_nvidia_smi_memory_that_is_no_size_drops_that_gpu(tmp_path, monkeypatch, memory):
    env = nvidia_smi(
        tmp_path, f"echo '0, GPU-1, NVIDIA H100, {memory}, 550.54'; echo '1, GPU-2, NVIDIA H100, 81559, 550.54'"
    )
    monkeypatch.setenv("PATH", env["PATH"])
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert machine.gpus() == [machine.GPU("NVIDIA H100", 81559, "550.54")]  # was a ValueError or OverflowError


def test_a_stuck_nvidia_smi_is_waited_for_once_and_said(tmp_path, monkeypatch, capsys):
    """Every command asks for the host's GPUs in several places (run --dry-run: twice): a stuck
    nvidia-smi cost its whole wait at each."""
    import time

    monkeypatch.setenv("PATH", nvidia_smi(tmp_path, "sleep 30")["PATH"])
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setattr(machine, "NVIDIA_SMI_WAIT_S", 1)
    start = time.monotonic()
    assert [machine.gpus() for _ in range(3)] == [[], [], []]
    assert time.monotonic() - start < 2.5
    said = capsys.readouterr().err
    assert said.count("no answer within 1 s: this host is taken to have no GPU") == 1, said
    (tmp_path / "bin" / "nvidia-smi").write_text("#!/bin/sh\necho '0, GPU-1, NVIDIA H100, 81559, 550'\n")
    assert machine.gpus() == [machine.GPU("NVIDIA H100", 81559, "550")]  # a changed program is asked again


def test_an_nvidia_smi_that_floods_or_prints_escapes_is_read_bounded_and_escaped(tmp_path, monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setenv("PATH", nvidia_smi(tmp_path, "yes '0, GPU-1, NVIDIA H100, 81559, 550'")["PATH"])
    assert machine.gpus() == []  # past the cap: no answer, never gigabytes held
    (tmp_path / "bin" / "nvidia-smi").write_text(
        "#!/bin/sh\nprintf '0, GPU-1, NVIDIA \\033]0;x\\007H100, 81559, 550\\033[31m\\n'\n"
    )
    (found,) = machine.gpus()
    assert "\x1b" not in found.name + found.driver and "\x07" not in found.name, found


def test_a_package_name_the_interpreter_reports_holds_no_control_character(tmp_path):
    report = {
        "python": "3.12.1",
        "packages": {"torch": "2.5.1", "evil\x1b]0;x\x07": "1"},
        "torch_cuda": None,
        "nccl": None,
    }
    (tmp_path / "r.json").write_text(json.dumps(report))
    python = tmp_path / "python"
    python.write_text(f"#!/bin/sh\ncat {tmp_path / 'r.json'}\n")
    python.chmod(0o755)
    with pytest.raises(RecipeError, match="a package's name holds a control character"):
        environment.ask(str(python), "lerobot")


@pytest.mark.parametrize("text", ["１０", "1_0", "٤", "१०", "0_0", "1_0.5", "０.５"])
def test_a_number_option_takes_ascii_digits_only(text):
    for argv in (["tune", "tiny/ddp/cpu", "--global-batch", text], ["tune", "tiny/ddp/cpu", "--budget", text]):
        r = run_cli(*argv, timeout=30)
        assert r.returncode == 2 and "is not a" in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr


@pytest.mark.parametrize("value", ["!!int 1_0", "!!int １０", "!!float 1_0.5", "!!float ０.５"])
def test_an_explicit_tag_takes_yaml_1_2s_decimal_numbers_only(tmp_path, value):
    (tmp_path / "r.yaml").write_text(f"train:\n  seed: {value}\n")
    with pytest.raises(RecipeError, match=r"is not an? (integer|number)"):
        load_file(tmp_path / "r.yaml")
    (tmp_path / "r.yaml").write_text("train:\n  seed: !!int 10\n  lr: !!float 1.5e-3\n")
    assert load_file(tmp_path / "r.yaml").data == {"train": {"seed": 10, "lr": 1.5e-3}}


def test_the_file_system_refusing_a_write_is_one_line(tmp_path):
    config = tmp_path / "sources.yaml"
    config.mkdir()  # a folder where the config goes
    env = {"RECIPE_CONFIG": str(config), "RECIPE_CACHE": str(tmp_path / "cache")}
    (tmp_path / "team").mkdir()
    r = run_cli("source", "add", "team", str(tmp_path / "team"), env=env)
    assert r.returncode != 0 and "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    r = run_cli("source", "list", env=env)  # it read as no sources, silently
    assert r.returncode == 2 and f"{config}: a directory, not a file" in r.stderr, r.stderr
    config.rmdir()
    config.symlink_to(config)
    r = run_cli("source", "list", env=env)
    assert r.returncode != 0 and "Symlink loop" in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_relocatable_and_env_dash_s_launchers_name_their_python(tmp_path):
    venv = tmp_path / "venv" / "bin"
    venv.mkdir(parents=True)
    launcher = venv / "accelerate"
    launcher.write_text(
        "#!/bin/sh\n'''exec' \"$(dirname -- \"$(realpath -- \"$0\")\")\"/'python' \"$0\" \"$@\"\n' '''\nimport sys\n"
    )
    link = tmp_path / "accelerate"
    link.symlink_to(launcher)
    assert environment.interpreter_of(str(link), {}) == str(venv / "python")  # was `$(dirname --`
    launcher.write_text("#!/usr/bin/env -S /opt/py/bin/python3 -u\nimport sys\n")
    assert environment.interpreter_of(str(launcher), {}) == "/opt/py/bin/python3"  # was "not Python"


@pytest.mark.parametrize(
    ("line", "refused"),
    [
        ("--nodes=2-2", False),
        ("--nodes=2-4", True),
        ("--tres-per-task=gres/gpu=4", True),
        ("--tres-per-task=gres/gpu=8", False),
    ],
)
def test_sbatch_ranges_and_tres_spellings_are_counted(line, refused):
    from registry.compose import compose
    from registry.validate import validate

    recipe = compose("act/ddp/2x8xH100", ["launch.launcher=slurm", f"launch.slurm.extra={[line]!r}"])
    rules = [p.rule for p in validate(recipe.data, recipe.origins) if p.is_error]
    assert rules == (["engine-counts"] if refused else []), (line, rules)


# --- a third held-out round ------------------------------------------------------------------
def test_a_repository_is_one_place_however_git_finds_it(tmp_path):
    bare = tmp_path / "team-b.git"
    bare.mkdir()
    worktree = tmp_path / "work"
    worktree.mkdir()
    (worktree / ".git").write_text(f"gitdir: {bare}\n")
    one = trust.canonical_place(str(bare))
    assert trust.canonical_place(f"file://{tmp_path}/team-b") == one  # git tries DIR.git for DIR
    assert trust.canonical_place(str(worktree)) == one  # a .git file names the repository
    (tmp_path / "team-b").mkdir()  # a folder of that name is a place of its own
    assert trust.canonical_place(str(tmp_path / "team-b")) != one


def test_a_hub_snapshot_whose_name_is_no_commit_is_not_read(tmp_path):
    from registry.run.preflight import metadata

    hub = tmp_path / "hub" / "datasets--org--toy" / "snapshots"
    for name in ("ab\x1b]0;x\x07", "cd\nrecipe: error: injected"):
        (hub / name / "meta").mkdir(parents=True)
    found = metadata.candidates({"repo_id": "org/toy"}, None, {"HF_LEROBOT_HOME": str(tmp_path)})
    assert found == [tmp_path / "org" / "toy" / "meta" / "info.json"]  # the local copy only


def test_estimate_reads_a_relative_dataset_root_where_the_trainer_does(tmp_path):
    from test_preflight_hostile import ACT, TOY, dataset_with

    dataset_with(tmp_path / "data", json.dumps(TOY))
    r = run_cli("estimate", *ACT, "dataset.root=data", cwd=tmp_path, timeout=60)
    assert r.returncode == 0 and str(tmp_path / "data") not in r.stdout + r.stderr, r.stdout + r.stderr


def test_the_first_sighting_never_creates_a_store_in_a_folder_anyone_can_write(tmp_path, monkeypatch):
    folder = tmp_path / "open"
    folder.mkdir()
    folder.chmod(0o777)
    monkeypatch.setenv("RECIPE_KNOWN_VERSIONS", str(folder / "known.jsonl"))
    source = sources.Source("team", tmp_path, "path", str(tmp_path))
    with pytest.raises(RecipeError, match="writable by everyone"):
        trust.remember(source, {"exp/x@1": H1})
    assert not (folder / "known.jsonl").exists()


@pytest.mark.parametrize("override", ["hardware.nodes=9223372036854775807", "hardware.gpus_per_node=2000"])
def test_a_world_size_past_any_cluster_is_refused(override):
    from registry.compose import compose
    from registry.validate import validate

    recipe = compose("pi07/zero2/2x8xH100", [override])
    assert [p.rule for p in validate(recipe.data, recipe.origins) if p.is_error][:1] == ["range"]


@pytest.mark.parametrize("text", ["\u00a010", "\u300010", "10\u2003", "0.5\u2029"])
def test_a_number_option_with_any_space_around_it_is_refused(text):
    from registry import commands

    with pytest.raises(Exception, match="is not a"):
        commands.number(float if "." in text else int, 0)(text)


@pytest.mark.parametrize("line", ["--nodes=02", "--gpus-per-node=08", "-N 002"])
def test_a_count_with_leading_zeros_is_the_count_slurm_reads(line):
    from registry.compose import compose
    from registry.validate import validate

    recipe = compose("act/ddp/2x8xH100", ["launch.launcher=slurm", f"launch.slurm.extra={[line]!r}"])
    assert [p.rule for p in validate(recipe.data, recipe.origins) if p.is_error] == [], line


def test_a_store_linked_into_a_folder_anyone_can_write_is_refused(tmp_path, monkeypatch):
    """The file read is the link's target: its folder is the one others could swap it in."""
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / "k.jsonl").write_text("")
    (shared / "k.jsonl").chmod(0o600)
    shared.chmod(0o777)
    own = tmp_path / "own"
    own.mkdir()
    (own / "known.jsonl").symlink_to(shared / "k.jsonl")
    monkeypatch.setenv("RECIPE_KNOWN_VERSIONS", str(own / "known.jsonl"))
    with pytest.raises(RecipeError, match=rf"its folder {shared} is writable by everyone"):
        trust.known()


@pytest.mark.parametrize(
    "visible, indices",
    [
        ("0,1,2,3", [0, 1, 2, 3]),
        ("0,1,-1,2", [0, 1]),  # CUDA stops at the first entry naming no GPU
        ("3,1", [3, 1]),  # in the list's order
        ("0,9,1", [0]),
        ("GPU-aaaa2,GPU-aaaa0", [2, 0]),  # a unique prefix of a UUID
        ("GPU-aaaa", []),  # a prefix of every UUID names none
        ("1,1", [1]),  # twice: the list ends there
        ("", []),
    ],
)
def test_cuda_visible_devices_is_read_as_cuda_reads_it(tmp_path, monkeypatch, visible, indices):
    lines = "; ".join(f"echo '{i}, GPU-aaaa{i}-0000, NVIDIA H100 80GB HBM3 {i}, 81559, 550'" for i in range(4))
    monkeypatch.setenv("PATH", nvidia_smi(tmp_path, lines)["PATH"])
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    assert [int(g.name.rsplit(" ", 1)[1]) for g in machine.gpus()] == indices
