"""The `recipe` command as a user runs it: output, exit codes, no tracebacks, no heavy imports."""

import json
import sys

import pytest
from conftest import heavy_imports, run_cli


def test_validate_all_passes(cli):
    r = cli("validate", "--all")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "pi07/zero2/8xA100: valid" in r.stderr and "recipes/catalog/gpus.yaml: valid" in r.stderr


def test_validate_override_names_other_field(cli):
    r = cli("validate", "pi07/zero2/8xA100", "policy.n_obs_steps=8")
    assert r.returncode == 1
    assert "error[obs-history] policy.n_obs_steps" in r.stdout
    assert "dataset.n_obs_history set at recipes/pi07/zero2/8xA100.yaml:16:3" in r.stdout


def test_validate_exit_codes(cli, tmp_path):
    assert cli("validate", "tiny/ddp/cpu").returncode == 0
    assert cli("validate", "act/fsdp/2xH100").returncode == 0  # a warning does not fail
    assert cli("validate", "act/zero2/8xA100").returncode == 1
    assert cli("validate", "pi07/zero2/9xZ100").returncode == 2  # 9xA100 is a generated name
    assert cli("validate").returncode == 2
    assert cli("validate", "--all", "tiny/ddp/cpu").returncode == 2
    assert cli("bogus-verb").returncode == 2
    mixed = cli("validate", "tiny/ddp/cpu", "act/zero2/8xA100", "nope/x/y")
    assert mixed.returncode == 2 and "tiny/ddp/cpu: valid" in mixed.stderr


def test_show_origin(cli):
    r = cli("show", "pi07/zero2/8xA100", "--origin", "train.steps=5")
    assert r.returncode == 0
    lines = r.stdout.splitlines()
    assert "  micro_batch_size: 20  # recipes/pi07/zero2/8xA100.yaml:18:3" in lines
    assert "  steps: 5  # command line" in lines
    assert "  kind: deepspeed  # recipes/backend/zero2.yaml:5:3" in lines
    leaves = [s for s in lines if ": " in s and not s.rstrip().endswith(":")]
    assert all("  # " in s for s in leaves)  # every value says where it came from
    js = json.loads(cli("show", "pi07/zero2/8xA100", "--origin", "--format", "json").stdout)
    assert js["origins"]["train.micro_batch_size"].startswith("recipes/pi07/zero2/8xA100.yaml:")
    assert js["recipe"]["backend"]["zero_stage"] == 2


def test_list(cli):
    r = cli("list")
    assert r.returncode == 0 and "untuned cells not shown" in r.stdout
    assert r.stdout.splitlines()[0].split() == [
        "NAME",
        "VERSION",
        "SOURCE",
        "TUNED",
        "STATUS",
        "REASON",
        "SHADOWS",
        "SUMMARY",
    ]
    zero2 = next(line for line in r.stdout.splitlines() if line.startswith("pi07/zero2/8xA100 "))
    assert zero2.split()[:7] == ["pi07/zero2/8xA100", "1", "bundled", "tuned", "valid", "-", "-"]
    r = cli("list", "--policy", "act", "--hardware", "2xH100")
    assert "act/fsdp2/2xH100" in r.stdout and len(r.stdout.splitlines()) == 9
    assert cli("list", "--policy", "nope").returncode == 2
    assert "fsdp2" in cli("list", "--parts").stdout


def test_schema_is_self_contained(cli):
    from jsonschema import Draft202012Validator

    schema = json.loads(cli("schema").stdout)
    Draft202012Validator.check_schema(schema)
    check = Draft202012Validator(schema)  # no registry: every $ref resolves inside the bundle
    assert check.is_valid({"backend": {"kind": "ddp"}})
    assert not check.is_valid({"backend": {"kind": "zero2"}})


BAD_FILES = {
    "malformed.yaml": "train: [1\n",
    "types.yaml": "extends: [tiny/ddp/cpu]\ntrain: {micro_batch_size: lots}\n",
    "unknown.yaml": "extends: [tiny/ddp/cpu]\ntrian: {}\n",
    "cycle.yaml": "extends: [cycle.yaml]\n",
    "unknown-name.yaml": "extends: [policy/pi99]\n",
    "unsafe.yaml": "extends: [../../etc/passwd.yaml]\n",
    "unsafe-name.yaml": "extends: ['../x']\n",
    "tag.yaml": "a: !!python/object/apply:os.system ['echo pwned']\n",
    "duplicate.yaml": "train: {}\ntrain: {}\n",
    "empty.yaml": "",
    "list.yaml": "- a\n",
    "shell.yaml": "extends: [tiny/ddp/cpu]\npolicy: {block_classes: ['A; rm -rf /']}\n",
}


@pytest.mark.parametrize("name", sorted(BAD_FILES))
def test_bad_input_is_one_clear_message(cli, tmp_path, name):
    f = tmp_path / name
    f.write_text(BAD_FILES[name])
    r = cli("validate", str(f))
    assert r.returncode == 1, r.stdout + r.stderr
    assert "Traceback" not in r.stdout + r.stderr and "pwned" not in r.stdout
    assert "error[" in r.stdout


@pytest.mark.parametrize(
    "args",
    [
        ["show", "../x"],
        ["show", "/etc/passwd"],
        ["show", "pi07/zero2/8xA100", "hardware=../x"],
        ["show", "pi07/zero2/8xA100", "=3"],
        ["validate", "pi07;id"],
        ["show", "pi07/zero2/8xA100", "train.steps=!!python/name:os.system"],
    ],
)
def test_bad_arguments(cli, args):
    r = cli(*args)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr


def test_alias_bomb_cli(cli, tmp_path):
    lines = ['a: &a ["x","x","x","x","x","x","x","x","x"]'] + [
        f"{chr(98 + i)}: &{chr(98 + i)} [" + ",".join([f"*{chr(97 + i)}"] * 9) + "]" for i in range(9)
    ]
    f = tmp_path / "bomb.yaml"
    f.write_text("\n".join(lines))
    r = cli("validate", str(f), timeout=20)
    assert r.returncode == 1 and "alias bomb" in r.stdout


def test_start_up_path_imports_no_heavy_modules():
    argvs = [
        ["validate", "pi07/zero2/8xA100"],
        ["show", "pi07/zero2/8xA100", "--origin"],
        ["list"],
        ["list", "--versions", "--format", "json"],
        ["search", "tiny"],
        ["schema"],
        ["run", "pi07/zero2/8xA100", "--dry-run"],
    ]
    r = heavy_imports(argvs, heavy=("torch", "accelerate", "deepspeed", "transformers", "omegaconf"), codes=(0,))
    assert r.returncode == 0, r.stderr
    assert "HEAVY []" in r.stderr
    assert "micro_batch_size" in r.stdout  # the commands really ran


def test_python_m_and_console_script_agree(tmp_path):
    import subprocess
    from pathlib import Path

    exe = Path(sys.executable).parent / "recipe"  # installed by `pip install -e .`
    r = subprocess.run([exe, "validate", "tiny/ddp/cpu"], capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 0 and "tiny/ddp/cpu: valid" in r.stderr
    assert run_cli("--version").stdout.startswith("recipe ")
