"""The pre-commit hook of .pre-commit-hooks.yaml on a scratch team repository: a valid recipe
commits, an invalid one is refused with the problem shown. The hook runs as a `repo: local` hook
with this checkout's `recipe`, so nothing is fetched."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import ROOT, run_cli

RECIPE = Path(sys.executable).parent / "recipe"
PRE_COMMIT = shutil.which("pre-commit", path=str(Path(sys.executable).parent)) or shutil.which("pre-commit")
GIT = {
    "GIT_AUTHOR_NAME": "A",
    "GIT_AUTHOR_EMAIL": "a@example.com",
    "GIT_COMMITTER_NAME": "A",
    "GIT_COMMITTER_EMAIL": "a@example.com",
}


def hooks() -> dict[str, dict]:
    return {h["id"]: h for h in yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())}


# A source is laid out under recipes/ or at its root (registry/sharing/sources.py, _root): the
# hook hands recipe validate every YAML file and rules/*.json outside hidden folders, and
# `validate --hook` validates those that are a source tree's recipe files, skipping the rest.
RECIPES_LAYOUT = ["recipes/pi07/zero2/8xA100.yaml", "team/recipes/exp/a.yml", "recipes/rules/cluster.json"]
ROOT_LAYOUT = [
    "policy/pi07.yaml",
    "backend/zero2.yaml",
    "hardware/8xB200.yaml",
    "catalog/gpus.yaml",
    "base.yaml",
    "index.yaml",
    "published/exp/fast/1.yaml",
    "tuned/pi07/zero2/8xA100.yaml",
    "pi07/zero2/8xA100.yaml",
    "exp/fast.yaml",
    "rules/cluster.json",
]
NEVER = [
    ".github/workflows/ci.yaml",
    ".pre-commit-config.yaml",
    "recipes/.hidden/a.yaml",
    "recipes/README.md",
    "rules/sub/x.json",
    "package.json",
]


def test_hooks_file_names_recipe_files_of_both_layouts():
    import re

    for hook in hooks().values():
        assert hook["entry"].split()[:2] == ["recipe", "validate"] and hook["pass_filenames"] is True
        files = re.compile(hook["files"])
        for path in RECIPES_LAYOUT + ROOT_LAYOUT:
            assert files.search(path), (hook["id"], path)
        for path in NEVER:
            assert not files.search(path), (hook["id"], path)


@pytest.mark.skipif(PRE_COMMIT is None, reason="pre-commit is not installed (pip install -e '.[test]')")
def test_commit_runs_recipe_validate(tmp_path):
    repo = tmp_path / "team"
    env = {**os.environ, **GIT, "PRE_COMMIT_HOME": str(tmp_path / "pre-commit-cache")}

    def sh(*args, check=True):
        r = subprocess.run(args, cwd=repo, env=env, capture_output=True, text=True, timeout=120)
        assert not check or r.returncode == 0, r.stdout + r.stderr
        return r

    repo.mkdir()
    sh("git", "init", "-q")
    hook = dict(hooks()["recipe-validate-system"])
    hook["entry"] = hook["entry"].replace("recipe", str(RECIPE), 1)
    (repo / ".pre-commit-config.yaml").write_text(yaml.safe_dump({"repos": [{"repo": "local", "hooks": [hook]}]}))
    sh(PRE_COMMIT, "install")
    recipes = repo / "recipes"
    (recipes / "exp").mkdir(parents=True)
    (recipes / "tiny" / "ddp").mkdir(parents=True)
    # a free-standing recipe, and a tuned overlay of a bundled cell (valid only composed as its cell)
    (recipes / "exp" / "good.yaml").write_text("extends: [tiny/ddp/cpu]\ntrain: {micro_batch_size: 4}\n")
    (recipes / "tiny" / "ddp" / "cpu.yaml").write_text("train: {micro_batch_size: 2}\n")
    (repo / "notes.yaml").write_text("not: [a recipe\n")  # outside recipes/: not the hook's business
    sh("git", "add", ".")
    done = sh("git", "commit", "-qm", "good recipes", check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "recipe validate" in done.stdout + done.stderr and "Passed" in done.stdout + done.stderr

    (recipes / "exp" / "bad.yaml").write_text(
        "extends: [tiny/ddp/cpu]\npolicy:\n  n_obs_steps: 8\n"  # the history does not match
    )
    sh("git", "add", ".")
    refused = sh("git", "commit", "-qm", "bad recipe", check=False)
    out = refused.stdout + refused.stderr
    assert refused.returncode != 0, out
    assert "Failed" in out and "recipes/exp/bad.yaml:3:3: error[obs-history] policy.n_obs_steps" in out
    assert "Traceback" not in out
    assert "bad recipe" not in sh("git", "log", "--format=%s").stdout


def root_layout_repo(repo: Path) -> None:
    """A team repository laid out at its root (no recipes/ folder): a part, a tuned overlay of a
    bundled cell, a free-standing recipe, and YAML that is no recipe."""
    (repo / "hardware").mkdir(parents=True)
    part = (ROOT / "recipes" / "hardware" / "cpu.yaml").read_text().replace("2 processes", "4 processes")
    (repo / "hardware" / "cpu4.yaml").write_text(part.replace("processes_per_node: 2", "processes_per_node: 4"))
    (repo / "tiny" / "ddp").mkdir(parents=True)
    (repo / "tiny" / "ddp" / "cpu.yaml").write_text("train: {micro_batch_size: 2}\n")  # valid only as its cell
    (repo / "exp").mkdir()
    (repo / "exp" / "good.yaml").write_text("extends: [tiny/ddp/cpu4]\ntrain: {micro_batch_size: 4}\n")
    (repo / ".github" / "workflows").mkdir(parents=True)
    (repo / ".github" / "workflows" / "ci.yaml").write_text("on: [push]\njobs: {test: {runs-on: x}}\n")
    (repo / "mkdocs.yml").write_text("site_name: team recipes\n")  # a source reads .yaml files only


@pytest.mark.skipif(PRE_COMMIT is None, reason="pre-commit is not installed (pip install -e '.[test]')")
def test_commit_runs_recipe_validate_in_a_root_layout_source(tmp_path):
    repo = tmp_path / "team"
    env = {**os.environ, **GIT, "PRE_COMMIT_HOME": str(tmp_path / "pre-commit-cache")}

    def sh(*args, check=True):
        r = subprocess.run(args, cwd=repo, env=env, capture_output=True, text=True, timeout=120)
        assert not check or r.returncode == 0, r.stdout + r.stderr
        return r

    repo.mkdir()
    sh("git", "init", "-q")
    hook = dict(hooks()["recipe-validate-system"])
    hook["entry"] = hook["entry"].replace("recipe", str(RECIPE), 1)
    (repo / ".pre-commit-config.yaml").write_text(yaml.safe_dump({"repos": [{"repo": "local", "hooks": [hook]}]}))
    sh(PRE_COMMIT, "install")
    root_layout_repo(repo)
    sh("git", "add", ".")
    done = sh("git", "commit", "-qm", "good recipes", check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Passed" in done.stdout + done.stderr

    (repo / "exp" / "bad.yaml").write_text("extends: [tiny/ddp/cpu]\npolicy:\n  n_obs_steps: 8\n")
    (repo / "hardware" / "broken.yaml").write_text("hardware:\n  gpus_per_node: -1\n")
    sh("git", "add", ".")
    refused = sh("git", "commit", "-qm", "bad recipes", check=False)
    out = refused.stdout + refused.stderr
    assert refused.returncode != 0, out
    assert "Failed" in out and "exp/bad.yaml:3:3: error[obs-history] policy.n_obs_steps" in out
    assert "hardware/broken.yaml:2:" in out and "gpus_per_node" in out
    assert "Traceback" not in out and ".github" not in out and "mkdocs" not in out
    assert "bad recipes" not in sh("git", "log", "--format=%s").stdout


def test_validate_hook_on_both_layouts(tmp_path):
    """What the hook hands `recipe validate -q --hook` from the repository's top: the recipe files
    of the source tree are validated as what they are there, the rest is skipped."""
    root = tmp_path / "root-layout"
    root.mkdir()
    (root / ".git").mkdir()  # the repository's top
    root_layout_repo(root)
    files = ["hardware/cpu4.yaml", "tiny/ddp/cpu.yaml", "exp/good.yaml", ".github/workflows/ci.yaml", "mkdocs.yml"]
    r = run_cli("validate", "-q", "--hook", *files, cwd=root)
    assert r.returncode == 0 and r.stdout == "" and r.stderr == "", r.stdout + r.stderr
    r = run_cli("validate", "--hook", *files, cwd=root)
    assert "tiny/ddp/cpu.yaml: valid" in r.stderr and "hardware/cpu4.yaml: valid" in r.stderr
    assert ".github/workflows/ci.yaml: skipped" in r.stderr and "mkdocs.yml: skipped" in r.stderr
    # without --hook each file is validated: an overlay as its cell, a part alone, the workflow
    # (found by no name in the source) as a recipe file on its own, which it is not
    assert run_cli("validate", "-q", "tiny/ddp/cpu.yaml", "hardware/cpu4.yaml", cwd=root).returncode == 0
    r = run_cli("validate", "-q", ".github/workflows/ci.yaml", cwd=root)
    assert r.returncode == 1 and ".github/workflows/ci.yaml:1:1: error[unknown-key] on" in r.stdout, r.stdout

    layout = tmp_path / "recipes-layout"
    (layout / ".git").mkdir(parents=True)
    root_layout_repo(layout / "recipes")
    (layout / "notes.yaml").write_text("not: [a recipe\n")  # outside recipes/: not the hook's business
    (layout / "configs").mkdir()
    (layout / "configs" / "a.yaml").write_text("x: 1\n")
    files = ["notes.yaml", "configs/a.yaml", "recipes/tiny/ddp/cpu.yaml", "recipes/hardware/cpu4.yaml"]
    r = run_cli("validate", "--hook", *files, cwd=layout)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "notes.yaml: skipped" in r.stderr and "recipes/tiny/ddp/cpu.yaml: valid" in r.stderr


def test_a_root_layout_source_lists_no_hidden_files(tmp_path):
    """.github/workflows/*.yaml and .pre-commit-config.yaml are no recipes of a source at its root."""
    root = tmp_path / "team"
    root_layout_repo(root)
    (root / ".pre-commit-config.yaml").write_text("repos: []\n")
    env = {"RECIPE_PATH": f"team={root}"}
    r = run_cli("list", "--format", "json", env=env)
    assert r.returncode == 0, r.stderr
    names = {row["name"] for row in yaml.safe_load(r.stdout)}
    assert "exp/good" in names and not [n for n in names if "." in n.split("/")[0]], names
    r = run_cli("validate", "--all", "-q", env=env)
    assert r.returncode == 0, r.stdout + r.stderr
