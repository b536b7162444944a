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
from conftest import ROOT

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


def test_hooks_file_names_recipe_files():
    import re

    for hook in hooks().values():
        assert hook["entry"].split()[:2] == ["recipe", "validate"] and hook["pass_filenames"] is True
        files = re.compile(hook["files"])
        assert files.search("recipes/pi07/zero2/8xA100.yaml") and files.search("team/recipes/exp/a.yml")
        assert not files.search("configs/a.yaml") and not files.search("recipes/README.md")


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
