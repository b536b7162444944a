"""The README and the tutorial are run, not trusted: every command they show is executed in a fresh
folder and home (tests/doc_session.py) and its output compared with what they show; the README's
picture is that session's own output; the figures the docs quote are the tool's.

The tutorial trains twice on the CPU (tiny/ddp/cpu, 20 steps, then 20 more resumed): about 30 s on
a quiet 2-core host, started with the session in the background."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from conftest import cell_names
from doc_session import ROOT, check, matches, steps
from terminal_svg import PICTURE, picture_steps, recorded, svg

README = ROOT / "README.md"
TUTORIAL = ROOT / "docs" / "tutorial.md"
DOCS = ROOT / "docs"
SHELLS = {"bash", "sh", "shell", "zsh", "console"}
NOT_RUN = re.compile(r"<!-- not run by tests/test_readme\.py: (.+?) -->")
# a phrase quoting a figure that changes as the registry grows (not inside a console block)
CELLS = re.compile(r"\b(\d[\d,]*) (?:bundled )?cells\b")
SITE = re.compile(r"\((\d[\d,]*) pages, (\d+) MB\)")


def _session(document: Path, folder: Path, port: int) -> dict:
    problems, session = check(document, folder)
    site = session.cwd / "site"
    files = [p for p in site.rglob("*") if p.is_file()] if site.is_dir() else []
    return {
        "problems": problems,
        "pages": sum(p.suffix == ".html" for p in files),
        "mb": round(sum(p.stat().st_size for p in files) / 1e6),
    }


def background_runs(items) -> dict:
    """The two documents' sessions, for conftest's `background` to start with the session."""
    wanted = {"tutorial": TUTORIAL, "readme": README}
    return {
        key: (lambda folder, port, doc=doc: _session(doc, folder, port))
        for key, doc in wanted.items()
        if any(f"{key}_session" in item.fixturenames for item in items)
    }


@pytest.fixture(scope="module")
def tutorial_session(background, request) -> dict:
    return background.of(request.module)["tutorial"].result()


@pytest.fixture(scope="module")
def readme_session(background, request) -> dict:
    return background.of(request.module)["readme"].result()


def test_the_tutorial_prints_what_it_shows(tutorial_session):
    assert not tutorial_session["problems"], "\n\n".join(tutorial_session["problems"])


def test_the_readme_prints_what_it_shows(readme_session):
    assert not readme_session["problems"], "\n\n".join(readme_session["problems"])


def test_the_tutorial_covers_the_first_hour():
    """What a newcomer's first hour needs, each shown by a command that runs."""
    commands = "\n".join(s.command for s in steps(TUTORIAL.read_text(), "tutorial"))
    for needed in (
        "extends: [tiny/ddp/cpu]",  # a file that extends a bundled cell
        'recipe validate my-tiny.yaml; echo "exit: $?"',  # a mistake
        "recipe run my-tiny.yaml",
        "--resume",
        "recipe source add team",
        "recipe publish",
        "extends: [team:my-tiny@1]",  # a pin
    ):
        assert needed in commands, needed


def test_the_readme_s_recipe_file_validates_and_resolves(tmp_path):
    """The front page's recipe (the first ```yaml block) is a real one: short, valid, and its
    overrides reach what resolve writes."""
    from conftest import run_cli

    text = README.read_text()
    head = text.index("```yaml\n")
    body = text[head + len("```yaml\n") : text.index("```\n", head + 1)]
    assert 10 <= len(body.splitlines()) <= 20 and head < text.index("## What it does")
    name = re.match(r"# ([\w-]+\.yaml):", body).group(1)  # the file name its first line gives
    (tmp_path / name).write_text(body)
    r = run_cli("validate", name, cwd=tmp_path)
    assert r.returncode == 0 and f"{name}: valid" in r.stderr, r.stdout + r.stderr
    r = run_cli("resolve", name, "-o", "out", cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    launch = (tmp_path / "out" / "launch.sh").read_text()
    for flag in ("--batch_size=16", "--steps=50000", "--save_freq=5000", "--optimizer.lr=2e-05"):
        assert flag in launch, flag
    assert "--dataset.repo_id=lerobot/aloha_sim_insertion_human" in launch


def _fences(text: str):
    """(line, language and words, the line before) of every opening fence."""
    lines = text.splitlines()
    inside = False
    for i, line in enumerate(lines):
        if line.startswith("```"):
            if not inside:
                before = next((lines[j] for j in range(i - 1, -1, -1) if lines[j].strip()), "")
                yield i + 1, line[3:].split(), before
            inside = not inside


@pytest.mark.parametrize("document", [README, TUTORIAL], ids=["README.md", "tutorial.md"])
def test_every_shell_block_is_run_or_says_why_not(document):
    unmarked = []
    for line, words, before in _fences(document.read_text()):
        if words and words[0] in SHELLS and words[0] != "console" and not NOT_RUN.search(before):
            unmarked.append(f"{document.name}:{line}: ```{words[0]} block neither run (```console) nor marked")
    assert not unmarked, "\n".join(unmarked)


def test_the_readme_stays_a_front_door():
    text = README.read_text()
    assert len(text.splitlines()) <= 200
    linked = set(re.findall(r"\]\(docs/([\w-]+\.md)", text))
    pages = {p.name for p in DOCS.glob("*.md")}
    assert pages <= linked, "every docs/ page is linked from the README"
    assert linked <= pages, f"the README links pages that do not exist: {sorted(linked - pages)}"
    tutorial_links = set(re.findall(r"\]\(([\w-]+\.md)", TUTORIAL.read_text()))
    assert tutorial_links <= pages, sorted(tutorial_links - pages)


def test_the_picture_is_the_readme_session():
    """The drawing is made from its transcript, and the transcript is what the README's picture
    block shows (which the README's session compares with the tool's output)."""
    assert PICTURE.read_text(encoding="utf-8") == svg(recorded()), "run: python tests/terminal_svg.py"
    shown = picture_steps()
    drawn = re.split(r"^\$ (.*)\n", recorded(), flags=re.M)[1:]
    assert [s.command for s in shown] == drawn[0::2], "run: python tests/terminal_svg.py"
    for step, output in zip(shown, drawn[1::2]):
        assert matches(step.expected, output), f"{step.command}: the picture shows\n{output}"
    assert f"]({PICTURE.relative_to(ROOT)})" in README.read_text()


def _prose(path: Path) -> str:
    """A document without its console blocks (their figures are checked as output)."""
    return re.sub(r"^```console.*?^```", "", path.read_text(encoding="utf-8"), flags=re.S | re.M)


def _quoted(pattern: re.Pattern) -> list[tuple[str, re.Match]]:
    pages = [README, *sorted(DOCS.glob("*.md"))]
    # failure-modes.md tells what happened at the time, with the figures of that time
    return [(p.name, m) for p in pages if p.name != "failure-modes.md" for m in pattern.finditer(_prose(p))]


def test_the_cell_count_the_docs_quote_is_the_registry_s():
    cells = len(cell_names())
    quoted = _quoted(CELLS)
    assert quoted, "docs/recipes.md states how many cells the bundled parts make"
    wrong = [f"{name}: {m.group(0)}" for name, m in quoted if int(m.group(1).replace(",", "")) != cells]
    assert not wrong, f"the bundled parts make {cells:,} cells: {wrong}"


def test_the_catalog_figures_the_docs_quote_are_the_built_site_s(tutorial_session):
    """The tutorial builds the catalog before it adds a source: the bundled registry's site."""
    pages, mb = tutorial_session["pages"], tutorial_session["mb"]
    quoted = _quoted(SITE)
    assert quoted and pages
    wrong = [
        f"{name}: {m.group(0)}"
        for name, m in quoted
        # the size carries the checkout's path in its pages: a megabyte either way is the same site
        if int(m.group(1).replace(",", "")) != pages or abs(int(m.group(2)) - mb) > 1
    ]
    assert not wrong, f"the bundled catalog is {pages} pages, {mb} MB: {wrong}"


SPEED = {"before": "validate_1000_before.json", "after": "validate_1000.json"}  # docs/rules.md's rows -> result files


def speed_rows() -> list[str]:
    """docs/rules.md's Speed table, as the benchmarks' JSON files give it."""
    rows = []
    for when, name in SPEED.items():
        ratio = json.loads((ROOT / "benchmarks" / "results" / name).read_text())
        med, one, many = ratio["median_s"], ratio["ratio_one_to_import"], ratio["ratio_many_to_one"]
        target = ratio["targets"]
        rows += [
            f"| the import, {when} | {med['import']} s | | | |",
            f"| one file, {when} | {med['one_cold']} s | {med['one_new']} s | {med['one_warm']} s | |",
            f"| one file against the import, {when} | {one['cold']}x | {one['new']}x | {one['warm']}x"
            f" | {target['ratio_one_to_import']}x |",
            f"| 1,000 files, {when} | {med['many_cold']} s | {med['many_new']} s | {med['many_warm']} s | |",
            f"| 1,000 files against one file, {when} | {many['cold']}x | {many['new']}x | {many['warm']}x"
            f" | {target['ratio_many_to_one']}x |",
        ]
    run = json.loads((ROOT / "benchmarks" / "results" / "run_overhead.json").read_text())
    span = lambda o: f"{o['median']} s ({o['min']} to {o['max']})"  # noqa: E731
    rows.append(f"{span(run['overhead_s'])} for a recipe run before and {span(run['overhead_new_recipe_s'])}")
    return rows


def test_the_speed_figures_the_docs_quote_are_the_recorded_ones():
    """docs/rules.md's Speed figures are the JSON files the benchmarks wrote, word for word, and
    what it says is met is."""
    page = " ".join((DOCS / "rules.md").read_text(encoding="utf-8").split("\n"))
    page = page.replace("  ", " ")
    missing = [row for row in speed_rows() if row not in page]
    assert not missing, missing
    results = ROOT / "benchmarks" / "results"
    before, after = (json.loads((results / name).read_text()) for name in SPEED.values())
    for ratio in (before, after):
        assert ratio["files"] == 1000 and ratio["runs"] == 11 and ratio["cold_and_warm_print_the_same"]
        assert ratio["error_lines"] == 399 and "399 error lines" in page
    one, many, target = after["ratio_one_to_import"], after["ratio_many_to_one"], after["targets"]
    assert max(one.values()) <= target["ratio_one_to_import"] < before["ratio_one_to_import"]["new"]
    assert max(many.values()) <= target["ratio_many_to_one"]
    assert max(many.values()) < max(before["ratio_many_to_one"].values())
    run = json.loads((results / "run_overhead.json").read_text())
    assert max(run["overhead_s"]["median"], run["overhead_new_recipe_s"]["median"]) <= run["target_s"]
    assert f"({run['pairs']} rounds)" in page or f", {run['pairs']} rounds)" in page


# --- the comparison can fail ---------------------------------------------------------------------
@pytest.mark.parametrize(
    ("shown", "printed", "measured", "same"),
    [
        (["a", "b"], "a\nb\n", False, True),
        (["a", "b"], "a\nc\n", False, False),
        (["a"], "a\nb\n", False, False),  # an extra line
        (["a", "...", "d"], "a\nb\nc\nd\n", False, True),
        (["a", "...", "d"], "a\nd\n", False, True),
        (["a", "...", "d"], "a\nb\n", False, False),
        (["x ... z"], "x anything z\n", False, True),
        (["x ... z"], "x anything y\n", False, False),
        (["loss 0.25 step 20/20"], "loss 0.31 step 20/20\n", True, True),
        (["loss 0.25 step 20/20"], "loss 0.31 step 19/20\n", True, False),  # whole numbers stay exact
        (["loss 0.25"], "loss 0.31\n", False, False),  # only in a measured block
        (["runs/x/20261127-060628 sha256 dff9808e7f08"], "runs/x/20270101-000000 sha256 0123456789ab\n", True, True),
        (["step 20/20, 15.8s wall time"], "step 20/20, 1m05s wall time\n", True, True),  # a duration crosses a unit
        (["step 20/20, 15.8s wall time"], "step 20/20, 15.8 wall time\n", True, False),
        (["15.8s wall time"], "15.8s wall time\n", False, True),
        (["15.8s wall time"], "16.1s wall time\n", False, False),
    ],
)
def test_the_comparison(shown, printed, measured, same):
    assert matches(shown, printed, measured) is same


def test_a_session_is_parsed_with_its_here_documents():
    text = "x\n```console measured\n$ cat > f <<'EOF'\na: 1\nEOF\n$ echo hi\nhi\n```\n```bash\n$ not run\n```\n"
    found = steps(text, "t.md")
    assert [(s.command, s.expected, s.measured) for s in found] == [
        ("cat > f <<'EOF'\na: 1\nEOF", [], True),
        ("echo hi", ["hi"], True),
    ]


def test_a_session_reports_what_differs_and_what_fails(tmp_path):
    doc = tmp_path / "doc.md"
    doc.write_text(
        '```console\n$ echo hi\nhi\n$ echo hi\nbye\n$ false\n$ false; echo "exit: $?"\nexit: 1\n'
        "$ echo $HOME\n" + str(tmp_path / "session" / "home") + "\n```\n"
    )
    problems, _ = check(doc, tmp_path / "session")
    assert len(problems) == 2, problems
    assert "doc.md:4: `echo hi` printed" in problems[0] and "doc.md:6: `false` exited 1" in problems[1]
