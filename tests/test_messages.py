"""Exit codes and messages a newcomer meets: every verb's --help lists its exit codes; a CPU
estimate is a note; a bundled recipe has a history; a file written in the command line's swap
form, or a key nested a level too deep, gets a hint showing what to write."""

import re

from conftest import run_cli

from registry.commands import _VERB_MODULES, _parser


def help_of(verb: str) -> str:
    parser = _parser(verb)
    return parser._subparsers._group_actions[0].choices[verb].format_help()


def test_every_verb_documents_its_exit_codes():
    for verb, _ in _VERB_MODULES:
        text = help_of(verb)
        block = text.split("exit codes:\n", 1)[1]
        codes = [int(m) for m in re.findall(r"^  (\d+) ", block, re.M)]
        assert 0 in codes and 2 in codes and 130 in codes, (verb, block)
    assert re.search(r"^  1 +they differ \(as diff\(1\)\)$", help_of("diff"), re.M)
    assert re.search(r"^  127 +the trainer's program is not on PATH$", help_of("run"), re.M)
    assert "rows with warnings are kept" in help_of("list")
    top = run_cli("--help").stdout
    assert "exit codes:" in top and re.search(r"^  2 +a usage error", top, re.M)


def test_estimate_of_a_cpu_recipe_is_a_note():
    r = run_cli("estimate", "tiny/ddp/cpu")
    assert r.returncode == 0 and r.stderr == ""
    assert r.stdout == "tiny/ddp/cpu: runs on CPU (hardware.gpu: null): no GPU memory to estimate\n"


def test_history_of_a_bundled_recipe_shows_its_version_and_results():
    r = run_cli("history", "pi07/zero2/8xA100")
    assert r.returncode == 0, r.stderr
    header, row = r.stdout.splitlines()
    assert header.split()[:4] == ["VERSION", "PUBLISHED", "SHA256", "SAMPLES/S"]
    assert row.startswith("bundled:pi07/zero2/8xA100@1  shipped with recipe ") and " 13.7 " in row
    shown = run_cli("show", "bundled:pi07/zero2/8xA100@1")  # what the row names resolves
    assert shown.returncode == 0 and "micro_batch_size: 20" in shown.stdout
    none = run_cli("history", "tiny/ddp/8xA100")
    assert none.returncode == 2 and "no versions in any source" in none.stderr


def test_the_command_line_swap_form_in_a_file_shows_the_file_form(tmp_path):
    cell = tmp_path / "cell.yaml"
    cell.write_text("policy: act\nbackend: fsdp\nhardware: 4xH100\n")
    r = run_cli("validate", str(cell))
    assert r.returncode == 1
    lines = r.stdout.splitlines()
    assert len(lines) == 3 and all("write `extends: [act/fsdp/4xH100]` instead" in line for line in lines), lines
    part = tmp_path / "part.yaml"
    part.write_text("extends: [tiny/ddp/8xA100]\nbackend: fsdp\n")
    (line,) = run_cli("validate", str(part)).stdout.splitlines()
    assert line.startswith(f"{part}:2:1: error[type] backend: 'fsdp' is not of type object (hint: ")
    assert "write `extends: [..., backend/fsdp]` instead (backend=fsdp is the command line's swap" in line
    fixed = tmp_path / "fixed.yaml"
    fixed.write_text("extends: [tiny/ddp/8xA100, backend/fsdp]\n")
    assert run_cli("validate", str(fixed)).returncode == 0  # what the hint says works


def test_a_key_nested_a_level_too_deep_gets_did_you_mean(tmp_path):
    r = run_cli("validate", "tiny/ddp/cpu", "backend.fsdp.use_orig_params=true")
    assert r.returncode == 1
    assert r.stdout.startswith(
        "command line: error[unknown-key] backend.fsdp: unknown key (hint: did you mean backend.use_orig_params?"
    ), r.stdout
    mine = tmp_path / "mine.yaml"
    mine.write_text("extends: [tiny/ddp/cpu]\ntrain:\n  optimizer:\n    adamw: {lr: 0.001, weight_decay: 0.1}\n")
    out = run_cli("validate", str(mine)).stdout
    assert "did you mean train.optimizer.lr, train.optimizer.weight_decay?" in out, out


def test_a_reports_summary_counts_errors_and_warnings_in_words():
    from registry.errors import Exit, Problem, RecipeError
    from registry.validate.report import Report

    def problem(severity: str) -> Problem:
        return Problem(severity, "r", "a.b", "m", None, None)

    assert Report("x").summary() == "x: valid"
    assert Report("x", [problem("warning")]).summary() == "x: valid (1 warning)"
    assert Report("x", [problem("warning")] * 2).summary() == "x: valid (2 warnings)"
    assert Report("x", [problem("error")]).summary() == "x: invalid (1 error, 0 warnings)"
    assert Report("x", [problem("error")] * 2 + [problem("warning")]).summary() == "x: invalid (2 errors, 1 warning)"
    assert Report("x", [problem("error")]).exit_code == Exit.INVALID and Report("x").exit_code == Exit.OK
    broken = Report("x", failure=RecipeError("no such recipe"))
    assert broken.summary() == "x: not validated" and broken.exit_code == Exit.USAGE
    unreadable = Report("x", failure=RecipeError("bad file", Exit.INVALID))
    assert unreadable.summary() == "x: invalid" and unreadable.exit_code == Exit.INVALID
    assert broken.lines() == [RecipeError("no such recipe").render(prefix="x")]


def test_validate_all_reports_the_catalog_every_part_then_every_overlay(monkeypatch):
    """`recipe validate --all` over the bundled recipes, in-process: the GPU catalog, each part
    file on its own (structure only) axis by axis, then each tuned overlay composed; a part that
    cannot be read is one failed report, and the rest still come."""
    from pathlib import Path

    from registry.errors import Exit, RecipeError
    from registry.validate import report

    root = Path(__file__).resolve().parent.parent / "recipes"
    parts = [
        f"recipes/{axis}/{p.name}"
        for axis in ("policy", "backend", "hardware")
        for p in sorted((root / axis).glob("*.yaml"), key=lambda p: p.stem)
    ]
    overlays = sorted(
        str(p.relative_to(root).with_suffix(""))
        for p in root.glob("*/*/*.yaml")
        if p.parts[-3] not in ("policy", "backend", "hardware", "catalog")
    )
    reports = list(report.validate_all())
    targets = [r.target for r in reports]
    assert targets[0] == "recipes/catalog/gpus.yaml"
    assert targets[1 : 1 + len(parts)] == parts
    assert sorted(targets[1 + len(parts) :]) == overlays and len(targets) == 1 + len(parts) + len(overlays)
    assert all(r.exit_code == Exit.OK and r.summary().startswith(f"{r.target}: valid") for r in reports)

    real = report.load_cached

    def unreadable(path):
        if Path(path).name == "zero2.yaml" and Path(path).parent.name == "backend":
            raise RecipeError("cannot read it", Exit.INVALID)
        return real(path)

    monkeypatch.setattr(report, "load_cached", unreadable)
    again = list(report.validate_all())
    failed = [r for r in again if r.failure]
    assert [r.target for r in failed] == [str(root / "backend" / "zero2.yaml")]
    assert failed[0].summary().endswith(": invalid") and len(again) == len(reports)
