"""Verdicts kept on disk (registry/validate/verdicts.py): a second `recipe validate` of the same
recipe reads its verdict instead of checking again, prints exactly what a check from scratch
prints, and never reads a verdict whose inputs changed."""

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

from registry.compose import compose
from registry.files import SCHEMA_DIR
from registry.validate import RESOLVED, _validate, validate, verdicts

ROOT = Path(__file__).resolve().parent.parent
CHECKED = "import sys\nfrom registry.commands import main\ncode = main(sys.argv[1:])\n" + (
    "print('CHECKER', 'registry.validate.keywords' in sys.modules, 'jsonschema' in sys.modules, file=sys.stderr)\n"
    "sys.exit(code)\n"
)


def _validate_cli(cache: Path, *args: str, enabled: bool = True) -> tuple[int, str, bool]:
    """(exit code, stdout, whether the schema checks were imported) of `recipe validate ARGS`.
    No validate imports jsonschema: the checker is the project's own (registry/validate/checker.py)."""
    env = {**os.environ, "XDG_CACHE_HOME": str(cache), "RECIPE_VERDICT_CACHE": "1" if enabled else "0"}
    r = subprocess.run(
        [sys.executable, "-c", CHECKED, "validate", *args], cwd=ROOT, env=env, capture_output=True, text=True
    )
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith("CHECKER ") and last.endswith(" False"), f"jsonschema imported: {r.stderr}"
    return r.returncode, r.stdout, last == "CHECKER True False"


def _user_file(tmp_path: Path) -> Path:
    path = tmp_path / "mine.yaml"
    path.write_text("extends: [pi07/zero2/8xA100]\ndataset:\n  n_obs_history: 4\ntrain:\n  micro_batch_size: 0\n")
    return path


def test_a_second_validate_reads_the_verdict_and_prints_the_same(tmp_path):
    mine = _user_file(tmp_path)
    for i, args in enumerate((["pi07/zero2/8xA100"], [str(mine)], [str(mine), "--format", "json"], ["tiny/ddp/cpu"])):
        cache = tmp_path / f"cache{i}"
        scratch = _validate_cli(cache, *args, enabled=False)
        first = _validate_cli(cache, *args)
        second = _validate_cli(cache, *args)
        assert scratch[2] and first[2], "a check from scratch imports the schema checker"
        assert not second[2], f"{args}: a kept verdict is read without the schema checks"
        assert scratch[:2] == first[:2] == second[:2], args
    code, out, _ = _validate_cli(cache, str(mine))
    assert code == 1 and f"{mine}:" in out and "error[" in out  # the user's line, from the kept verdict


def test_an_edit_is_a_new_verdict(tmp_path):
    cache = tmp_path / "cache"
    mine = _user_file(tmp_path)
    assert _validate_cli(cache, str(mine))[0] == 1
    mine.write_text("extends: [pi07/zero2/8xA100]\n")
    code, _, imported = _validate_cli(cache, str(mine))
    assert (code, imported) == (0, True)
    code, _, _ = _validate_cli(cache, str(mine), "train.micro_batch_size=0")  # an override is an input too
    assert code == 1


def test_the_key_covers_schemas_package_and_origins():
    recipe = compose("pi07/zero2/8xA100")
    key = verdicts.key(recipe.data, recipe.origins, RESOLVED, ())
    assert key == verdicts.key(recipe.data, dict(recipe.origins), RESOLVED, ())
    moved = {path: f"elsewhere.yaml:{where}" for path, where in recipe.origins.items()}
    assert key != verdicts.key(recipe.data, moved, RESOLVED, ())  # a problem names its file and line
    assert key != verdicts.key(recipe.data, recipe.origins, RESOLVED, (("team", False, ()),))
    schema = SCHEMA_DIR / "train.schema.json"
    st = schema.stat()
    try:
        os.utime(schema, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
        verdicts._installation.cache_clear()
        assert key != verdicts.key(recipe.data, recipe.origins, RESOLVED, ())
    finally:
        os.utime(schema, ns=(st.st_atime_ns, st.st_mtime_ns))  # its ctime stays new: a new key still
        verdicts._installation.cache_clear()
    again = verdicts.key(recipe.data, recipe.origins, RESOLVED, ())
    assert again != key and again == verdicts.key(recipe.data, recipe.origins, RESOLVED, ())


def test_a_foreign_record_or_a_damaged_database_is_a_miss(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    recipe = compose("tiny/ddp/cpu", ["train.micro_batch_size=0"])
    truth = _validate(recipe.data, recipe.origins, RESOLVED)
    assert truth, "the recipe has problems to keep"
    key = verdicts.key(recipe.data, recipe.origins, RESOLVED, ())
    verdicts.put(key, truth)
    database = verdicts.database()
    assert database.is_file()
    for record in ('{"format": 1, "key": "', b"\xff\xfe", json.dumps({"format": 1, "key": "other"}), "[]", "null"):
        verdicts._SEEN.clear()
        verdicts._execute("UPDATE verdicts SET record = ? WHERE key = ?", (record, key))
        assert verdicts.get(key) is None, record
        assert validate(recipe.data, recipe.origins) == truth
        assert json.loads(verdicts._execute("SELECT record FROM verdicts WHERE key = ?", (key,))[0])["key"] == key
    for damage in (b"not a database at all" * 100, b""):
        verdicts.close()
        for suffix in ("-wal", "-shm"):
            Path(f"{database}{suffix}").unlink(missing_ok=True)
        database.write_bytes(damage)
        verdicts._SEEN.clear()
        assert verdicts.get(key) is None
        assert validate(recipe.data, recipe.origins) == truth  # the damaged file replaced, the verdict kept anew
        verdicts._SEEN.clear()
        assert verdicts.get(key) == truth
    verdicts.close()


def test_processes_writing_at_once_lose_nothing(tmp_path):
    """Forked workers (recipe validate over 200 files or more) write into one database at once."""
    code = (
        "import os, sys\n"
        "from registry.validate import verdicts\n"
        "for i in range(200):\n"
        "    verdicts.remember(f'{sys.argv[1]}-{i}', {'problems': []})\n"
    )
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path)}
    writers = [
        subprocess.Popen([sys.executable, "-c", code, f"w{n}"], cwd=ROOT, env=env, stderr=subprocess.PIPE)
        for n in range(4)
    ]
    assert all(w.wait(timeout=60) == 0 for w in writers), [w.stderr.read() for w in writers]
    os.environ["XDG_CACHE_HOME"], saved = str(tmp_path), os.environ.get("XDG_CACHE_HOME")
    try:
        verdicts.close()
        kept = verdicts._execute("SELECT COUNT(*) FROM verdicts", ())[0]
    finally:
        verdicts.close()
        if saved is None:
            del os.environ["XDG_CACHE_HOME"]
        else:
            os.environ["XDG_CACHE_HOME"] = saved
    assert kept == 800


def test_a_cache_that_cannot_be_written_never_fails_a_validate(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))
    verdicts._SEEN.clear()
    recipe = compose("tiny/ddp/cpu")
    assert validate(recipe.data, recipe.origins) == _validate(recipe.data, recipe.origins, RESOLVED)


def test_switched_off_it_writes_nothing(tmp_path):
    cache = tmp_path / "cache"
    _validate_cli(cache, "tiny/ddp/cpu", enabled=False)
    assert not (cache / "recipe" / "verdicts").exists()
    _validate_cli(cache, "tiny/ddp/cpu")
    with sqlite3.connect(cache / "recipe" / "verdicts" / verdicts.DATABASE) as db:
        assert db.execute("SELECT COUNT(*) FROM verdicts").fetchone()[0] == 2  # the composition's fixes, the verdict


def test_a_kept_fix_composes_as_a_fresh_one(tmp_path):
    """pi07/fsdp/4xH100 composes with the fix of fsdp-fp32-model (registry/validate/fixes.py): read
    back from the cache, the same values and origins, without the schema checker."""
    cache = tmp_path / "cache"
    args = ("pi07/fsdp/4xH100", "--origin")
    env = {**os.environ, "XDG_CACHE_HOME": str(cache)}
    code = CHECKED.replace("main(sys.argv[1:])", "main(['show', *sys.argv[2:]])")
    shown = [
        subprocess.run([sys.executable, "-c", code, "x", *args], cwd=ROOT, env=e, capture_output=True, text=True)
        for e in ({**env, "RECIPE_VERDICT_CACHE": "0"}, env, env)
    ]
    assert shown[0].stdout == shown[1].stdout == shown[2].stdout
    assert "dtype: float32  # schemas/policy.schema.json: fix of rule fsdp-fp32-model" in shown[2].stdout
    assert shown[2].stderr.strip() == "CHECKER False False"


def test_forked_workers_write_every_verdict_they_hold(tmp_path):
    """Over 200 files, forked workers write their verdicts in batches, the last as they exit:
    every one is kept (a fix record and a verdict per file), and a second call prints the same."""
    paths = []
    for i in range(210):
        path = tmp_path / f"r{i:03d}.yaml"
        path.write_text(f"extends: [tiny/ddp/cpu]\ntrain:\n  steps: {100 + i}\n")
        paths.append(str(path))
    cache = tmp_path / "cache"
    first = _validate_cli(cache, "-q", *paths)
    with sqlite3.connect(cache / "recipe" / "verdicts" / verdicts.DATABASE) as db:
        assert db.execute("SELECT COUNT(*) FROM verdicts").fetchone()[0] == 2 * len(paths)
    second = _validate_cli(cache, "-q", *paths)
    assert first[:2] == second[:2]


def test_a_kept_problem_reads_back_with_its_unset_related_values(monkeypatch, tmp_path):
    """A related value that is not set is kept as null and read back as None ("is not set"), not
    the text "None"; and the verdicts' folder follows HOME when XDG_CACHE_HOME is unset."""
    from registry.validate.verdicts import _problem, folder

    kept = {"severity": "error", "rule": "r", "path": "a.b", "message": "m", "origin": None, "hint": None}
    problem = _problem(kept | {"source": None, "related": [["c.d", None], ["e", "x.yaml:1:1"]]})
    assert problem.related == (("c.d", None), ("e", "x.yaml:1:1"))
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    for home in ("one", "two"):
        monkeypatch.setenv("HOME", str(tmp_path / home))
        assert folder() == tmp_path / home / ".cache" / "recipe" / "verdicts"
