"""Guards against bad input that only an attack or an accident reaches, each pinned by a test that
fails when the guard is removed (docs/mutation.md): a published version's hash checked whether or
not the name carries @N, a source's paths confined to it, and a launcher killed by a signal
reported as 128+N."""

from __future__ import annotations

import os
import signal
import sys

import pytest
import yaml
from conftest import run_cli
from test_hostile import rewrite_version, teams  # noqa: F401  (a fixture)

from registry.errors import RecipeError
from registry.sharing import sources

TINY = "tiny/ddp/cpu"


# --- a published version is checked, named with @N or not ------------------------------------------
@pytest.fixture
def published(teams):  # noqa: F811
    a, _, env = teams
    r = run_cli("publish", TINY, "recipe.name=lab/x", "--to", "team-a", env=env)
    assert r.returncode == 0, r.stderr
    return a, env


@pytest.mark.parametrize("name", ["lab/x", "lab/x@1", "team-a:lab/x"])
def test_a_version_edited_after_publishing_is_refused_by_any_name(published, name):
    a, env = published
    (version,) = (a / "published" / "lab" / "x").glob("1.yaml")
    version.chmod(0o644)
    version.write_text(version.read_text() + "# edited\n")
    r = run_cli("show", name, env=env)
    assert r.returncode == 1 and "error[hash-mismatch] published version team-a:lab/x@1 was changed" in r.stderr


def test_a_version_rewritten_with_its_hash_is_refused_by_its_bare_name(published):
    """A remote that rewrites file and index together passes the index check; the hash this
    machine saw first does not move (registry/sharing/trust.py)."""
    a, env = published
    assert yaml.safe_load(run_cli("show", "lab/x", env=env).stdout)["recipe"]["name"] == "lab/x"  # seen once
    rewrite_version(a, "lab/x", 1, "micro_batch_size: 16", "micro_batch_size: 2")
    r = run_cli("show", "lab/x", env=env)
    assert r.returncode != 0 and "Traceback" not in r.stderr
    assert "lab/x@1" in r.stderr and "micro_batch_size: 2" not in r.stdout


# --- a source's paths stay inside it -------------------------------------------------------------------
def test_a_path_through_a_symlink_out_of_the_source_is_refused(tmp_path):
    root, outside = tmp_path / "team", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (root / "published").symlink_to(outside)
    source = sources.Source("team", root, "path")
    assert sources.confined(source, "index.yaml") == root / "index.yaml"
    with pytest.raises(RecipeError, match=r"published/1\.yaml leads outside the source"):
        sources.confined(source, "published/1.yaml")


def test_a_recipe_file_linked_from_outside_the_source_is_refused(tmp_path):
    root, outside = tmp_path / "team", tmp_path / "outside"
    (root / "lab").mkdir(parents=True)
    outside.mkdir()
    (outside / "x.yaml").write_text("extends: [tiny/ddp/cpu]\n")
    (root / "lab" / "x.yaml").symlink_to(outside / "x.yaml")
    (root / "lab" / "y.yaml").write_text("extends: [tiny/ddp/cpu]\n")
    source = sources.Source("team", root, "path")
    assert source.file(("lab", "y")) == (root / "lab" / "y.yaml").resolve()
    assert source.file(("lab", "z")) is None
    with pytest.raises(RecipeError, match="lab/x: resolves outside source 'team'"):
        source.file(("lab", "x"))


# --- a launcher's exit status -----------------------------------------------------------------------------
@pytest.mark.parametrize(
    "code, status",
    [
        ("raise SystemExit(3)", 3),
        ("import os, signal; os.kill(os.getpid(), signal.SIGKILL)", 128 + signal.SIGKILL),
        ("import os, signal; os.kill(os.getpid(), signal.SIGSEGV)", 128 + signal.SIGSEGV),
    ],
)
def test_a_launcher_killed_by_a_signal_exits_128_plus_its_number(tmp_path, code, status):
    """As a shell reports it: 137 for SIGKILL (an out-of-memory kill), not 119 or -9."""
    from registry.run.supervise import supervise

    assert supervise([([sys.executable, "-c", code], dict(os.environ))], tmp_path, echo=False) == status
