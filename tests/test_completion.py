"""`recipe completion bash|zsh`: verbs, each verb's options, recipe names, parts after hardware=,
files; exercised in a real bash (and zsh, where installed) with this checkout's `recipe` on PATH."""

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import ROOT, heavy_imports, run_cli

BIN = Path(sys.executable).parent  # where `recipe` is installed (pip install -e .)
ENV = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}


@pytest.fixture(scope="module")
def bash_script(tmp_path_factory) -> Path:
    r = run_cli("completion", "bash")
    assert r.returncode == 0, r.stderr
    path = tmp_path_factory.mktemp("completion") / "recipe.bash"
    path.write_text(r.stdout)
    return path


def bash_complete(script: Path, line: str, cwd=ROOT) -> list[str]:
    """What bash offers for `line` with the cursor at its end: the completion function called as
    readline calls it (COMP_LINE, COMP_POINT, COMP_WORDS, COMP_CWORD)."""
    code = (
        'source "$1"; COMP_LINE="$2"; COMP_POINT=${#COMP_LINE}; read -ra COMP_WORDS <<< "$2"; '
        '[[ $2 == *" " ]] && COMP_WORDS+=(""); COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); '
        '_recipe; printf "%s\\n" "${COMPREPLY[@]}"'
    )
    r = subprocess.run(
        ["bash", "--norc", "--noprofile", "-c", code, "bash", str(script), line],
        cwd=cwd,
        env=ENV,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0 and not r.stderr, r.stderr
    return [w for w in r.stdout.splitlines() if w]


def test_recipe_alone_prints_the_verbs():
    from registry.commands import VERBS

    r = run_cli()
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "verbs:" in r.stderr
    listed = [line.split()[0] for line in r.stderr.split("verbs:", 1)[1].splitlines() if line.startswith("  ")]
    assert listed == [verb.NAME for verb in VERBS] and "completion" in listed


def test_bash_completes_verbs_options_and_names(bash_script):
    assert bash_complete(bash_script, "recipe va") == ["validate"]
    assert bash_complete(bash_script, "recipe comp") == ["completion"]
    names = bash_complete(bash_script, "recipe validate pi07/ze")
    assert "pi07/zero2/8xA100" in names and "pi07/zero3/8xH100" in names
    assert all(n.startswith("pi07/ze") for n in names)
    assert bash_complete(bash_script, "recipe run --dr") == ["--dry-run"]
    assert bash_complete(bash_script, "recipe run tiny/ddp/cpu --dr") == ["--dry-run"]
    assert "--format" in bash_complete(bash_script, "recipe validate --f")
    assert bash_complete(bash_script, "recipe show --format ") == ["yaml", "json"]
    assert bash_complete(bash_script, "recipe diff --format=j") == ["json"]  # after the = word break
    assert bash_complete(bash_script, "recipe completion ") == ["bash", "zsh"]
    assert bash_complete(bash_script, "recipe source ") == ["add", "list", "update", "accept", "remove"]
    assert bash_complete(bash_script, "recipe history tiny/ddp/c") == ["tiny/ddp/cpu"]
    assert bash_complete(bash_script, "recipe list --hardware 8xH") == ["8xH100", "8xH200"]


def test_bash_completes_parts_after_an_axis(bash_script):
    # bash replaces only what follows the last word break (=): the part names alone
    assert bash_complete(bash_script, "recipe show tiny/ddp/cpu hardware=8xH") == ["8xH100", "8xH200"]
    assert "zero3-offload" in bash_complete(bash_script, "recipe run tiny/ddp/cpu backend=zero")
    assert "pi07" in bash_complete(bash_script, "recipe validate pi07/zero2/8xA100 policy=")
    assert bash_complete(bash_script, "recipe show tiny/ddp/cpu har") == ["hardware="]


def test_bash_completes_files(bash_script, tmp_path):
    (tmp_path / "mine.yaml").write_text("extends: [tiny/ddp/cpu]\n")
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "accelerate.yaml").write_text("")
    assert bash_complete(bash_script, "recipe validate mi", cwd=tmp_path) == ["mine.yaml"]
    assert bash_complete(bash_script, "recipe validate --accelerate-config co", cwd=tmp_path) == ["configs/"]
    assert bash_complete(bash_script, "recipe validate --accelerate-config configs/", cwd=tmp_path) == [
        "configs/accelerate.yaml"
    ]
    assert bash_complete(bash_script, "recipe resolve mine.yaml -o ", cwd=tmp_path) == ["configs/"]  # directories


def test_script_knows_every_verb_and_option(bash_script):
    from registry.commands import _parser
    from registry.commands.completion import spec

    text = bash_script.read_text()
    for name, verb in spec(_parser()).items():
        assert name in text.split("_recipe_verbs=", 1)[1].splitlines()[0]
        for option in verb.options:
            assert option in bash_complete(bash_script, f"recipe {name} {option}"), (name, option)
    assert "--list" not in text.split("_recipe_options()", 1)[1].split("}", 1)[0]  # internal, not offered


def test_zsh_script():
    if shutil.which("zsh") is None:
        pytest.skip("zsh is not installed here: the zsh script was not checked")
    r = run_cli("completion", "zsh")
    assert r.returncode == 0 and r.stdout.startswith("#compdef recipe")
    check = subprocess.run(["zsh", "-n"], input=r.stdout, capture_output=True, text=True, timeout=30)
    assert check.returncode == 0, check.stderr
    # compadd, _describe and _files stubbed: each prints what it was given
    harness = r"""
compdef() { : }
compset() { : }
compadd() { while [[ $# -gt 0 && $1 != -- ]]; do shift; done; shift; print -rl -- "$@"; }
_describe() { local d; for d in "${(@P)4}"; do print -r -- "${d%%:*}"; done; }
_files() { print -r -- "FILES $*"; }
eval "$(cat)"
c() { words=(${=1}); [[ $1 == *' ' ]] && words+=(''); CURRENT=${#words}; _recipe; }
c "$1"
"""

    def zsh(line: str) -> list[str]:
        out = subprocess.run(
            ["zsh", "-f", "-c", harness, "zsh", line],
            input=r.stdout,
            env=ENV,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert out.returncode == 0 and not out.stderr, out.stderr
        return out.stdout.splitlines()

    assert "validate" in zsh("recipe va")  # zsh filters by the typed prefix itself
    assert "pi07/zero2/8xA100" in zsh("recipe validate pi07/ze") and "FILES " in zsh("recipe validate pi07/ze")
    assert "--dry-run" in zsh("recipe run --dr")
    assert zsh("recipe show x hardware=8xH") == ["hardware=8xH100", "hardware=8xH200"]
    assert zsh("recipe completion ") == ["bash", "zsh"]
    assert zsh("recipe resolve x -o ") == ["FILES -/"]


def test_name_listing_is_fast_and_imports_nothing_heavy():
    argvs = [["completion", "--list", "recipe", "--prefix=pi07/ze"], ["completion", "--list", "target"]]
    r = heavy_imports([*argvs, ["completion", "bash"]])
    assert r.returncode == 0, r.stderr
    assert "HEAVY []" in r.stderr and "pi07/zero2/8xA100" in r.stdout
    # a TAB starts `recipe completion --list`: the whole process, start-up included
    times = []
    for _ in range(3):
        start = time.perf_counter()
        out = subprocess.run(
            [BIN / "recipe", "completion", "--list", "recipe", "--prefix=pi07/ze"], capture_output=True, text=True
        )
        times.append(time.perf_counter() - start)
        assert out.returncode == 0 and "pi07/zero2/8xA100" in out.stdout.splitlines()
    print(f"recipe completion --list: best of 3 {min(times):.3f} s")
    assert min(times) < 2.0, times  # ~0.1 s of CPU; generous for a loaded CI runner


def test_listing_from_broken_sources_offers_nothing(tmp_path):
    r = run_cli("completion", "--list", "recipe", env={"RECIPE_PATH": str(tmp_path / "missing")})
    assert r.returncode == 0 and r.stdout == "" and "Traceback" not in r.stderr


def test_usage_errors_are_one_line():
    r = run_cli("completion")
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "recipe completion bash" in r.stderr
    r = run_cli("completion", "fish")
    assert r.returncode == 2 and "Traceback" not in r.stderr and "invalid choice" in r.stderr


# --- names from a shared source are text on the command line, never code -----------------------
# A file name in someone else's source decides what TAB inserts: `$(...)`, backquotes or `;` in it
# would run when the user presses Enter.
EVIL = "zz$(touch pwned)`touch pwned2`;touch pwned3"


@pytest.fixture
def evil_source(tmp_path) -> dict:
    """A source whose file names are shell code, beside a recipe whose name is fine."""
    root = tmp_path / "team"
    (root / "hardware").mkdir(parents=True)
    (root / "sub").mkdir()
    (root / f"{EVIL}.yaml").write_text("extends: [tiny/ddp/cpu]\n")
    (root / "sub" / "a\ntouch pwned4.yaml").write_text("extends: [tiny/ddp/cpu]\n")  # a line of its own in --list
    (root / "hardware" / "8x$(touch pwned5).yaml").write_text((ROOT / "recipes/hardware/8xA100.yaml").read_text())
    (root / "zz-ok.yaml").write_text("recipe: {name: zz-ok, summary: OFFERED-OK}\nextends: [tiny/ddp/cpu]\n")
    return {"RECIPE_PATH": f"team={root}"}


def test_listing_offers_only_names_that_parse(evil_source):
    import re

    asked = [
        ("recipe", "zz"),
        ("recipe", ""),
        ("target", ""),
        ("name", "zz"),
        ("recipe", "team:"),
        ("parts:hardware", ""),
        ("target", "hardware="),
        ("recipe", "pi07/zero2/"),
    ]
    for kind, prefix in asked:
        r = run_cli("completion", "--list", kind, f"--prefix={prefix}", env=evil_source)
        assert r.returncode == 0 and not r.stderr, r.stderr
        offered = r.stdout.splitlines()
        assert offered, (kind, prefix)
        unsafe = [c for c in offered if not re.fullmatch(r"[A-Za-z0-9._+/:=@-]+", c)]
        assert not unsafe, (kind, prefix, unsafe)
        assert not [c for c in offered if "touch" in c], (kind, prefix)
    assert run_cli("completion", "--list", "recipe", "--prefix=zz", env=evil_source).stdout == "zz-ok\n"
    assert run_cli("completion", "--list", "recipe", "--prefix=sub/", env=evil_source).stdout == ""
    assert "team:zz-ok" in run_cli("completion", "--list", "recipe", "--prefix=team:", env=evil_source).stdout


def typed(shell: str, script: Path, line: str, cwd: Path, env: dict, timeout: float = 60) -> str:
    """An interactive shell on a terminal: the completion script loaded, `line` typed, TAB, Enter;
    what the terminal showed. The shell's own completion machinery (readline, zle) inserts."""
    import os
    import pty
    import select

    if shell == "bash":
        argv = ["bash", "--norc", "--noprofile", "-i"]
        setup = f"source {script}\r"
    else:  # compinit without a dump file; -u: the test's folders are not the user's
        argv = ["zsh", "-f", "-i"]
        setup = f"autoload -Uz compinit; compinit -u -D; source {script}\r"
    master, slave = pty.openpty()
    proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, cwd=cwd, env=env, start_new_session=True)
    os.close(slave)
    seen = b""
    try:
        # the shell reads what is typed in order: TAB completes before Enter is read
        os.write(master, f"PS1='P> '\r{setup}{line}\t\recho DO''NE\r".encode())
        deadline = time.monotonic() + timeout
        while b"DONE" not in seen.replace(b"DO''NE", b""):
            ready, _, _ = select.select([master], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                raise AssertionError(f"{shell}: no DONE in {seen[-2000:]!r}")
            seen += os.read(master, 65536)
    finally:
        proc.kill()
        proc.wait()
        os.close(master)
    return seen.decode(errors="replace")


SHELLS = ["bash", pytest.param("zsh", marks=pytest.mark.skipif(shutil.which("zsh") is None, reason="no zsh"))]


@pytest.mark.parametrize("shell", SHELLS)
def test_tab_inserts_a_strange_name_quoted(shell, tmp_path):
    """Whatever `recipe completion --list` answers (a stand-in `recipe` here), the script inserts
    it quoted: the program gets the name as one argument and nothing runs."""
    stub = tmp_path / "bin"
    stub.mkdir()
    (stub / "recipe").write_text(
        "#!/bin/sh\n"
        f"if [ \"$1\" = completion ] && [ \"$2\" = --list ]; then printf '%s\\n' '{EVIL}'; exit 0; fi\n"
        "printf 'ARGV<%s>\\n' \"$@\"\n"
    )
    (stub / "recipe").chmod(0o755)
    script = tmp_path / f"recipe.{shell}"
    script.write_text(run_cli("completion", shell).stdout)
    work = tmp_path / "work"
    work.mkdir()
    env = {**ENV, "PATH": f"{stub}{os.pathsep}{ENV['PATH']}"}
    shown = typed(shell, script, "recipe show zz", work, env)
    assert f"ARGV<{EVIL}>" in shown, shown[-2000:]
    assert sorted(p.name for p in work.iterdir()) == []  # no pwned, pwned2, pwned3


@pytest.mark.parametrize("shell", SHELLS)
def test_tab_never_offers_a_source_file_named_as_code(shell, tmp_path, evil_source):
    """The real `recipe` on PATH and a source holding `$(touch pwned).yaml` beside zz-ok.yaml:
    TAB after `zz` has one name to insert, zz-ok, and Enter runs `recipe show zz-ok`."""
    script = tmp_path / f"recipe.{shell}"
    script.write_text(run_cli("completion", shell).stdout)
    work = tmp_path / "work"
    work.mkdir()
    shown = typed(shell, script, "recipe show zz", work, {**ENV, **evil_source})
    assert "OFFERED-OK" in shown, shown[-2000:]
    assert sorted(p.name for p in work.iterdir()) == []
