"""Sources, immutable versions, locks, diff, cp and import, with real git repositories over
file:// remotes and one config per team."""

import json
import os
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import yaml
from conftest import run_cli

from registry.errors import RecipeError

DATA = Path(__file__).parent / "data"
GIT_ENV = {
    "GIT_AUTHOR_NAME": "A",
    "GIT_AUTHOR_EMAIL": "a@example.com",
    "GIT_COMMITTER_NAME": "A",
    "GIT_COMMITTER_EMAIL": "a@example.com",
    "HOME": "/tmp",
}


def git(*args, cwd):
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, env={**os.environ, **GIT_ENV})


def team(tmp_path, name):
    return {"RECIPE_CONFIG": str(tmp_path / f"{name}-sources.yaml"), "RECIPE_CACHE": str(tmp_path / f"{name}-cache")}


def lock_of(output: str) -> str:
    return output.split("==> recipe.lock.yaml <==", 1)[1].split("==> command <==", 1)[0]


@pytest.fixture
def team_a(tmp_path):
    """Team A: a bare remote, a working copy added as a directory source, one commit."""
    remote, work = tmp_path / "a.git", tmp_path / "a-work"
    git("init", "-q", "--bare", str(remote), cwd=tmp_path)
    git("clone", "-q", str(remote), str(work), cwd=tmp_path)
    (work / "recipes").mkdir()
    (work / "recipes" / ".gitignore").write_text(".publish.lock\n")
    git("add", ".", cwd=work)
    git("commit", "-qm", "start", cwd=work)
    git("push", "-q", "origin", "HEAD", cwd=work)
    env = team(tmp_path, "a")
    assert run_cli("source", "add", "team-a", str(work), env=env).returncode == 0
    return remote, work, env


def publish_and_push(work, env, *args):
    r = run_cli("publish", "pi07/zero2/8xA100", *args, "--replace", "--to", "team-a", env=env)
    assert r.returncode == 0, r.stderr
    git("add", ".", cwd=work)
    git("commit", "-qm", "publish", cwd=work)
    git("push", "-q", "origin", "HEAD", cwd=work)
    return r.stdout


def test_two_teams_share_an_immutable_version(tmp_path, team_a):
    remote, work, a = team_a
    assert "published team-a:pi07/zero2/8xA100@1" in publish_and_push(work, a)
    b = team(tmp_path, "b")
    added = run_cli("source", "add", "team-a", f"file://{remote}", env=b)
    assert added.returncode == 0, added.stderr
    dry_a = run_cli("run", "team-a:pi07/zero2/8xA100@1", "--dry-run", env=a)
    dry_b = run_cli("run", "team-a:pi07/zero2/8xA100@1", "--dry-run", env=b)
    assert dry_a.returncode == dry_b.returncode == 0
    assert lock_of(dry_a.stdout) == lock_of(dry_b.stdout)
    lock = yaml.safe_load(lock_of(dry_b.stdout))
    assert lock["recipe"] == {"name": "pi07/zero2/8xA100", "version": 1, "tuned": False}
    assert len(lock["sources"]["team-a"]["commit"]) == 40
    assert lock["inputs"][0]["file"] == "published/pi07/zero2/8xA100/1.yaml"

    publish_and_push(work, a, "train.micro_batch_size=16")
    assert run_cli("source", "update", env=b).returncode == 0
    pinned = yaml.safe_load(run_cli("show", "team-a:pi07/zero2/8xA100@1", env=b).stdout)
    newest = yaml.safe_load(run_cli("show", "team-a:pi07/zero2/8xA100", env=b).stdout)
    assert pinned["train"]["micro_batch_size"] == 20 and pinned["recipe"]["version"] == 1
    assert newest["train"]["micro_batch_size"] == 16 and newest["recipe"]["version"] == 2
    assert "results" not in newest  # measured at micro batch 20, so not carried into @2
    assert (
        lock_of(run_cli("run", "team-a:pi07/zero2/8xA100@1", "--dry-run", env=b).stdout)
        .split("sources:")[1]
        .split("inputs:")[1]
        == lock_of(dry_a.stdout).split("sources:")[1].split("inputs:")[1]
    )  # @1 resolves to the same files after @2 exists
    history = run_cli("history", "pi07/zero2/8xA100", env=b).stdout
    assert "team-a:pi07/zero2/8xA100@1" in history and "team-a:pi07/zero2/8xA100@2" in history
    listing = run_cli("list", "--sources", env=b).stdout
    assert "pi07/zero2/8xA100  team-a  bundled" in listing


def test_edited_version_fails_validation(tmp_path, team_a):
    _, work, a = team_a
    publish_and_push(work, a)
    version = work / "recipes" / "published" / "pi07" / "zero2" / "8xA100" / "1.yaml"
    version.chmod(0o644)
    version.write_text(version.read_text().replace("micro_batch_size: 20", "micro_batch_size: 24"))
    r = run_cli("validate", "--all", env=a)
    assert r.returncode == 1
    assert (
        f"{version}: error[hash-mismatch] published version team-a:pi07/zero2/8xA100@1 was changed after publishing"
        in r.stdout
    )
    assert run_cli("show", "team-a:pi07/zero2/8xA100@1", env=a).returncode == 1


def test_validate_all_reports_every_published_version_after_a_changed_one(tmp_path, team_a, monkeypatch):
    """In-process: `recipe validate --all` reports each version of a published name by its full
    name, a changed one as its failure, and goes on to the versions after it (its published part,
    without the bundled cells)."""
    from registry.sharing import sources
    from registry.validate.report import _published

    _, work, a = team_a
    publish_and_push(work, a)
    publish_and_push(work, a, "train.micro_batch_size=16")
    first = work / "recipes" / "published" / "pi07" / "zero2" / "8xA100" / "1.yaml"
    first.chmod(0o644)
    first.write_text(first.read_text().replace("micro_batch_size: 20", "micro_batch_size: 24"))
    for name, value in a.items():
        monkeypatch.setenv(name, value)
    (source,) = [s for s in sources.all_sources() if s.name == "team-a"]
    reports = {r.target: r for r in _published(source)}
    assert list(reports) == ["team-a:pi07/zero2/8xA100@1", "team-a:pi07/zero2/8xA100@2"]
    changed, second = reports.values()
    assert "was changed after publishing" in str(changed.failure) and changed.exit_code == 1
    assert second.failure is None and second.exit_code == 0 and not second.problems


def test_what_a_missing_version_changed_file_and_lost_index_say(tmp_path, team_a):
    """Each refusal of a published name word for word: the versions there are, no source at all,
    a changed file's two hashes (12 digits each) and the index to restore."""
    import re

    _, work, a = team_a
    for steps in (10, 11):
        r = run_cli("publish", "tiny/ddp/cpu", "recipe.name=exp/only", f"train.steps={steps}", "--to", "team-a", env=a)
        assert r.returncode == 0, r.stderr
    index = yaml.safe_load((work / "recipes" / "index.yaml").read_text())["versions"]["exp/only"]
    assert [list(entry) for entry in index] == [
        ["version", "file", "sha256", "date", "summary", "parts"]
    ] * 2  # in order
    assert index[1]["parts"] == {"policy": "tiny", "backend": "ddp", "hardware": "cpu"}
    assert index[0]["summary"] == "the built-in tiny policy under DDP on CPU (2 processes, gloo)"
    r = run_cli("show", "exp/only@7", env=a)
    assert r.returncode == 2 and "team-a:exp/only has no version 7 (published: 1, 2)" in r.stderr, r.stderr
    r = run_cli("show", "nothing/here@1", env=a)
    assert r.returncode == 2 and "no source has published nothing/here@1" in r.stderr, r.stderr
    first = work / "recipes" / "published" / "exp" / "only" / "1.yaml"
    first.chmod(0o644)
    first.write_text(first.read_text().replace("steps: 10", "steps: 12"))
    r = run_cli("show", "team-a:exp/only@1", env=a)
    said = re.search(r"was changed after publishing \(sha256 ([0-9a-f]+), index says ([0-9a-f]+)\)", r.stderr)
    assert r.returncode != 0 and said and len(said[1]) == len(said[2]) == 12, r.stderr
    second = work / "recipes" / "published" / "exp" / "only" / "2.yaml"
    second.chmod(0o644)
    second.unlink()
    r = run_cli("show", "team-a:exp/only@2", env=a)
    assert f"{second}: error[hash-mismatch] published version team-a:exp/only@2 is missing" in r.stderr, r.stderr
    (work / "recipes" / "index.yaml").write_text("versions: [1, 2]\n")
    r = run_cli("show", "team-a:exp/only@2", env=a)
    assert r.returncode != 0 and "error[index] malformed index.yaml: " in r.stderr, r.stderr
    (work / "recipes" / "index.yaml").unlink()
    r = run_cli("show", "team-a:exp/only@2", env=a)
    assert "error[index-missing] source 'team-a' has published exp/only@1 but its index.yaml is missing" in r.stderr
    assert (
        r.returncode != 0
        and "restore index.yaml (e.g. git checkout -- index.yaml in the source); versions are never guessed" in r.stderr
    ), r.stderr


def test_concurrent_publishes_lose_nothing(tmp_path, team_a):
    _, work, a = team_a
    with ThreadPoolExecutor(4) as pool:
        results = list(
            pool.map(
                lambda i: run_cli(
                    "publish", "tiny/ddp/cpu", f"train.steps={100 + i}", "--replace", "--to", "team-a", env=a
                ),
                range(4),
            )
        )
    assert all(r.returncode == 0 for r in results), [r.stderr for r in results]
    index = yaml.safe_load((work / "recipes" / "index.yaml").read_text())["versions"]["tiny/ddp/cpu"]
    assert sorted(e["version"] for e in index) == [1, 2, 3, 4]
    steps = sorted(yaml.safe_load((work / "recipes" / e["file"]).read_text())["train"]["steps"] for e in index)
    assert steps == [100, 101, 102, 103]


def test_publish_never_overwrites(tmp_path, team_a):
    _, work, a = team_a
    target = work / "recipes" / "published" / "tiny" / "ddp" / "cpu" / "1.yaml"
    target.parent.mkdir(parents=True)
    target.write_text("someone else's file\n")
    r = run_cli("publish", "tiny/ddp/cpu", "--replace", "--to", "team-a", env=a)  # a version the index does not list
    assert r.returncode == 1 and "index.yaml is missing" in r.stderr and target.read_text() == "someone else's file\n"
    target.unlink()
    assert run_cli("publish", "tiny/ddp/cpu", "--replace", "--to", "team-a", env=a).returncode == 0
    target.with_name("2.yaml").write_text("someone else's file\n")
    r = run_cli("publish", "tiny/ddp/cpu", "--replace", "--to", "team-a", env=a)
    assert r.returncode == 2 and "never overwritten" in r.stderr
    assert target.with_name("2.yaml").read_text() == "someone else's file\n"
    assert run_cli("publish", "act/zero2/8xA100", "--to", "team-a", env=a).returncode == 1  # invalid: not published
    assert run_cli("publish", "tiny/ddp/cpu", "--to", "bundled", env=a).returncode == 2
    assert run_cli("publish", "tiny/ddp/cpu", "--to", "nowhere", env=a).returncode == 2


def test_bad_sources(tmp_path):
    env = team(tmp_path, "x")
    r = run_cli("source", "add", "team-x", f"file://{tmp_path}/missing.git", env=env)
    assert r.returncode == 2 and "unreachable" in r.stderr and not Path(env["RECIPE_CONFIG"]).exists()
    assert run_cli("source", "add", "bad name", str(tmp_path), env=env).returncode == 2
    assert run_cli("source", "add", "bundled", str(tmp_path), env=env).returncode == 2
    assert run_cli("source", "add", "team-x", str(tmp_path), env=env).returncode == 0
    assert "exists" in run_cli("source", "add", "team-x", str(tmp_path), env=env).stderr
    clash = run_cli("list", env={**env, "RECIPE_PATH": f"team-x={tmp_path}"})
    assert clash.returncode == 2 and "two sources are named 'team-x'" in clash.stderr
    Path(env["RECIPE_CONFIG"]).write_text("sources: {oops: 1}\n")
    assert "malformed" in run_cli("list", env=env).stderr
    Path(env["RECIPE_CONFIG"]).write_text("sources: [\n")
    assert run_cli("list", env=env).returncode != 0
    assert "unknown source 'team-q'" in run_cli("show", "team-q:tiny/ddp/cpu").stderr
    for r in (run_cli("list", env=env), run_cli("show", "team-q:tiny/ddp/cpu")):
        assert "Traceback" not in r.stderr


def test_diff_names_both_origins():
    r = run_cli("diff", "pi07/zero2/8xA100", "pi07/fsdp/8xA100")
    assert r.returncode == 1
    lines = r.stdout.splitlines()
    kind = next(s for s in lines if s.startswith("backend.kind:"))
    assert kind == "backend.kind: deepspeed (recipes/backend/zero2.yaml:5:3) -> fsdp (recipes/backend/fsdp.yaml:5:3)"
    assert any(
        s.startswith(
            "train.micro_batch_size: 20 (recipes/pi07/zero2/8xA100.yaml:18:3) -> 8 (recipes/pi07/fsdp/8xA100.yaml:"
        )
        for s in lines
    )
    assert run_cli("diff", "tiny/ddp/cpu", "tiny/ddp/cpu").returncode == 0


def test_cp_extends_the_original(tmp_path):
    dest = tmp_path / "mine.yaml"
    r = run_cli("cp", "pi07/zero2/8xA100", str(dest))
    assert r.returncode == 0, r.stderr
    text = dest.read_text()
    assert "extends: [pi07/zero2/8xA100]" in text.splitlines()
    schema = text.splitlines()[0].split("$schema=")[1]
    assert schema == "recipe.schema.json" and (dest.parent / schema).is_file()  # beside it, not in the package
    original = yaml.safe_load(run_cli("show", "pi07/zero2/8xA100").stdout)
    copied = yaml.safe_load(run_cli("show", str(dest)).stdout)
    # its own name; the original's version, tuned tag, summary and results stay with the original
    assert copied.pop("recipe") == {"name": "mine", "tags": ["full-unfreeze", "opentau"]}
    assert "results" not in copied
    assert copied == {k: v for k, v in original.items() if k not in ("recipe", "results")}
    assert run_cli("cp", "pi07/zero2/8xA100", str(dest)).returncode == 2  # no silent overwrite


def resolved_accelerate(tmp_path, recipe_file):
    from accelerate.commands.config.config_args import load_config_from_file

    out = tmp_path / "resolved"
    r = run_cli("resolve", str(recipe_file), "-o", str(out))
    assert r.returncode == 0, r.stderr
    return load_config_from_file(str(out / "accelerate.yaml")), out


def test_import_reports_checkpointing_under_zero3(tmp_path):
    r = run_cli(
        "import",
        "--accelerate-config",
        str(DATA / "accelerate_zero3.yaml"),
        "--trainer",
        "opentau",
        "--trainer-config",
        str(DATA / "opentau_pi07.json"),
        "-o",
        str(tmp_path / "bad.yaml"),
    )
    assert r.returncode == 1 and "error[zero3-torch-checkpointing] policy.gradient_checkpointing" in r.stdout


def test_import_consistent_pair_round_trips(tmp_path):
    from accelerate.commands.config.config_args import load_config_from_file

    dest = tmp_path / "good.yaml"
    r = run_cli(
        "import",
        "--accelerate-config",
        str(DATA / "accelerate_zero2.yaml"),
        "--trainer",
        "opentau",
        "--trainer-config",
        str(DATA / "opentau_pi07.json"),
        "-o",
        str(dest),
    )
    assert r.returncode == 0, r.stdout + r.stderr
    original = load_config_from_file(str(DATA / "accelerate_zero2.yaml"))
    config, out = resolved_accelerate(tmp_path, dest)
    ds = json.loads((out / "deepspeed.json").read_text())
    assert (config.distributed_type, config.num_processes, config.num_machines) == (original.distributed_type, 8, 1)
    assert ds["zero_optimization"]["stage"] == original.deepspeed_config["zero_stage"] == 2
    assert ds["gradient_clipping"] == original.deepspeed_config["gradient_clipping"]
    assert ds["bf16"]["enabled"] is False and original.mixed_precision == "no"
    assert "offload_optimizer" not in ds["zero_optimization"]
    trainer = json.loads((out / "opentau.json").read_text())
    source = json.loads((DATA / "opentau_pi07.json").read_text())
    for key in ("batch_size", "dataloader_batch_size", "steps", "num_cams", "resolution"):
        assert trainer[key] == source[key], key
    assert trainer["policy"]["n_obs_steps"] == trainer["dataset_mixture"]["n_obs_history"] == 6


def test_import_lerobot_fsdp_round_trips(tmp_path):
    from accelerate.commands.config.config_args import load_config_from_file

    dest = tmp_path / "act.yaml"
    r = run_cli(
        "import",
        "--accelerate-config",
        str(DATA / "accelerate_fsdp.yaml"),
        "--trainer",
        "lerobot",
        "--gpu",
        "H100-SXM",
        "--trainer-args",
        "--policy.type=act --dataset.repo_id=lerobot/aloha_sim_insertion_human --batch_size=8 --steps=1000"
        " --env_eval_freq=0 --optimizer.lr=5e-5 --policy.push_to_hub=false",  # LeRobot refuses its default without a repo id
        "-o",
        str(dest),
    )
    assert r.returncode == 0, r.stdout + r.stderr
    original = load_config_from_file(str(DATA / "accelerate_fsdp.yaml"))
    config, out = resolved_accelerate(tmp_path, dest)
    assert (config.distributed_type, config.num_processes, config.mixed_precision) == (
        original.distributed_type,
        2,
        "bf16",
    )
    for key in (
        "fsdp_version",
        "fsdp_transformer_layer_cls_to_wrap",
        "fsdp_use_orig_params",
        "fsdp_state_dict_type",
    ):
        assert config.fsdp_config[key] == original.fsdp_config[key], key
    # FSDP1: accelerate runs fsdp_sharding_strategy (FULL_SHARD when absent), never reshard_after_forward
    assert config.fsdp_config["fsdp_sharding_strategy"] == "FULL_SHARD"
    assert "fsdp_reshard_after_forward" not in config.fsdp_config
    assert "fsdp_reshard_after_forward: not read by accelerate under FSDP1" in r.stderr
    script = (out / "launch.sh").read_text()
    assert (
        "--batch_size=8" in script
        and "--env_eval_freq=0" in script
        and "--dataset.repo_id=lerobot/aloha_sim_insertion_human" in script
    )
    # without --use_policy_training_preset=false LeRobot ignored --optimizer.lr: so does the import,
    # and says so; the recipe keeps the ACT part's preset values
    assert "--optimizer.lr=5e-5: ignored by LeRobot under its policy preset" in r.stdout + r.stderr
    assert "--use_policy_training_preset=false" in script and "--optimizer.lr=1e-05" in script


def test_a_lock_names_a_commit_only_for_committed_clean_files(tmp_path):
    from registry.sharing.git import committed

    repo = tmp_path / "repo"
    (repo / "policy").mkdir(parents=True)
    git("init", "-q", str(repo), cwd=tmp_path)
    a, b = repo / "base.yaml", repo / "policy" / "x.yaml"
    a.write_text("a: 1\n")
    b.write_text("b: 1\n")
    (repo / ".gitignore").write_text("ignored.yaml\n")
    git("add", ".", cwd=repo)
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "start", cwd=repo)
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True).stdout.strip()
    assert committed([a, b]) == head and committed([b]) == head
    b.write_text("b: 2\n")
    assert committed([a]) == head and committed([a, b]) is None  # modified
    git("checkout", "-q", "--", str(b), cwd=repo)
    new, ignored = repo / "policy" / "new.yaml", repo / "ignored.yaml"
    new.write_text("n: 1\n")
    ignored.write_text("i: 1\n")
    assert committed([a, new]) is None and committed([ignored]) is None  # untracked, ignored
    nested = repo / "vendored"
    nested.mkdir()
    git("init", "-q", str(nested), cwd=tmp_path)
    (nested / "c.yaml").write_text("c: 1\n")
    git("add", ".", cwd=nested)
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "c", cwd=nested)
    assert committed([a, nested / "c.yaml"]) is None  # two work trees: no one commit holds both
    (repo / ".git" / "index.lock").write_text("")  # the user's own git at work: asked, not blocked
    assert committed([a]) == head
    assert committed([tmp_path / "elsewhere.yaml"]) is None and committed([]) is None


def test_a_url_that_reads_as_an_option_is_no_url(tmp_path):
    from registry.sharing.git import clone

    with pytest.raises(RecipeError) as e:
        clone("--upload-pack=touch owned", tmp_path / "clone")
    assert str(e.value) == "'--upload-pack=touch owned' is not a git URL (it reads as an option)"
    assert not (tmp_path / "clone").exists() and not (tmp_path / "owned").exists()


def test_a_clone_makes_the_folders_above_it(tmp_path):
    from registry.sharing.git import clone

    repo = tmp_path / "repo"
    git("init", "-q", str(repo), cwd=tmp_path)
    (repo / "a.yaml").write_text("a: 1\n")
    git("add", ".", cwd=repo)
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "start", cwd=repo)
    clone(str(repo), tmp_path / "cache" / "git" / "team")
    assert (tmp_path / "cache" / "git" / "team" / "a.yaml").read_text() == "a: 1\n"


def test_adding_a_source_records_its_scope_and_the_versions_it_offers_in_process(tmp_path, monkeypatch):
    """`recipe source add`: the config's entry (rules are the source's own unless said so, and
    the default is left unwritten), and every version the source offers remembered at first sight."""
    from registry.sharing import config, manage, trust

    folder = tmp_path / "team"
    folder.mkdir()
    r = run_cli("publish", "tiny/ddp/cpu", "recipe.name=exp/x", "--to", "team", env={"RECIPE_PATH": f"team={folder}"})
    assert r.returncode == 0, r.stderr
    monkeypatch.setenv("RECIPE_CONFIG", str(tmp_path / "sources.yaml"))
    manage.add("own", str(folder))
    manage.add("wide", str(folder), True)
    assert config.entries() == [
        {"name": "own", "path": str(folder), "place": str(folder)},
        {"name": "wide", "path": str(folder), "place": str(folder), "rules": "everywhere"},
    ]
    assert [version for _, version in trust.known()] == ["exp/x@1"]  # one place, remembered once


@pytest.mark.parametrize(
    "entry, where, said",
    [
        (
            "  - file: f\n    version: 0\n    sha256: {sha}\n    date: d\n",
            "5:5",
            "exp/x: version 0 is not a number >= 1",
        ),
        (
            "  - version: 1\n    file: f\n    sha256: abc\n    date: d\n",
            "6:5",
            "exp/x@1: sha256 'abc' is not 64 hex digits",
        ),
        ("  - version: 1\n    file: f\n    sha256: {sha}\n    date: 5\n", "7:5", "exp/x@1: date 5 is not text"),
    ],
)
def test_a_malformed_index_entry_is_reported_at_its_field(tmp_path, monkeypatch, entry, where, said):
    """In-process: the line of the field at fault, not of its entry (which starts on line 4)."""
    from registry.sharing import sources, versions

    index = tmp_path / "team" / "index.yaml"
    index.parent.mkdir()
    index.write_text("# an index\nversions:\n  exp/x:\n" + entry.replace("{sha}", "a" * 64))
    monkeypatch.setenv("RECIPE_PATH", f"team={index.parent}")
    (source,) = [s for s in sources.all_sources() if s.name == "team"]
    with pytest.raises(RecipeError) as e:
        versions.index(source)
    assert e.value.render().startswith(f"{index}:{where}: error[index] malformed index.yaml: {said} (hint: ")
