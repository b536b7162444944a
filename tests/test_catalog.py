"""`recipe catalog -o DIR`: the static site. Unit tests read the pages as HTML (escaping, columns,
one page per recipe, every link resolving) and run everywhere; the browser tests load the pages
in headless Chromium from file:// and read the DOM after the index's script ran (search through
`?q=`, sorting through `?sort=`), and skip only where no Chromium binary exists."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
from conftest import ROOT, run_cli

HEAVY = ("torch", "accelerate", "deepspeed", "transformers")
COLUMNS = ["source", "recipe", "policy", "backend", "hardware", "status", "tuned", "samples/s", "memory fraction"]
# Shared input that must stay text: each would be markup or script if written unescaped.
EVIL_SUMMARY = "<script>alert('summary')</script> & \"quotes\""
EVIL_ENV = "<b>bold</b></pre><script>alert('env')</script>"
EVIL_NOTES = "</td></tr><script>alert('notes')</script>"
EVIL_HARDWARE = "8x A100 <svg onload=alert(1)>"
EVIL_RECIPE = f"""\
extends: [pi07/zero2/8xA100]
recipe:
  name: exp/evil
  summary: {json.dumps(EVIL_SUMMARY)}
  owners: ['<img src=x onerror=alert(1)>']
env:
  EVIL_NOTE: {json.dumps(EVIL_ENV)}
results:
  - samples_per_s: 11.5
    memory_fraction: 0.7
    date: "2026-09 <i>"
    notes: {json.dumps(EVIL_NOTES)}
    hardware: {json.dumps(EVIL_HARDWARE)}
"""
PLAIN_RECIPE = """\
extends: [tiny/ddp/cpu]
recipe:
  summary: a plain team recipe
train:
  steps: 20
"""
# Prints the modules that matter after building, so the same run proves the build imports none.
BUILD = (
    "import sys, time; from registry.commands import main; t = time.perf_counter(); "
    "rc = main(['catalog', '-o', sys.argv[1]]); "
    f"print('BUILD', rc, round(time.perf_counter() - t, 2), [m for m in {HEAVY!r} if m in sys.modules])"
)


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """The catalog of the bundled recipes and team-x: a free-standing recipe and two published
    versions of one with hostile values (the second with other results and micro batch)."""
    base = tmp_path_factory.mktemp("catalog")
    team = base / "team-x"
    (team / "exp").mkdir(parents=True)
    (team / "exp" / "plain.yaml").write_text(PLAIN_RECIPE)
    evil = team / "exp" / "evil.yaml"
    evil.write_text(EVIL_RECIPE)
    env = {"RECIPE_PATH": f"team-x={team}"}
    first = run_cli("publish", str(evil), "--to", "team-x", env=env)
    assert first.returncode == 0, first.stderr
    evil.write_text(
        EVIL_RECIPE.replace("11.5", "12.5").replace("memory_fraction: 0.7", "memory_fraction: 0.6")
        + "train:\n  micro_batch_size: 16\n"
    )
    second = run_cli("publish", str(evil), "--to", "team-x", env=env)
    assert second.returncode == 0, second.stderr
    out = base / "site"
    r = subprocess.run(
        [sys.executable, "-c", BUILD, str(out)],
        cwd=ROOT,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stderr
    report = next(line for line in r.stdout.splitlines() if line.startswith("BUILD"))
    print(r.stdout, report)
    return out, report, env


class Page(HTMLParser):
    """What a page holds: its tags, attributes, links, script texts and table rows."""

    def __init__(self, text: str):
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict]] = []
        self.scripts: list[str] = []
        self.rows: list[list[str]] = []
        self.heads: list[str] = []
        self._in: list[str] = []
        self._cell: list[str] | None = None
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        self._in.append(tag)
        if tag == "tr":
            self.rows.append([])
        if tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None:
            text = "".join(self._cell)
            (self.heads if tag == "th" and "thead" in self._in else self.rows[-1]).append(text)
            self._cell = None
        while self._in and self._in.pop() != tag:
            pass

    def handle_data(self, data):
        if self._in and self._in[-1] == "script":
            self.scripts.append(data)
        if self._cell is not None:
            self._cell.append(data)

    @property
    def links(self) -> list[str]:
        return [a["href"] for tag, a in self.tags if tag == "a" and "href" in a]


def read(path: Path) -> Page:
    return Page(path.read_text(encoding="utf-8"))


def index_rows(out: Path) -> dict[str, list[str]]:
    page = read(out / "index.html")
    return {row[1]: row for row in page.rows if len(row) == len(COLUMNS)}


# --- the build ---------------------------------------------------------------------------------


def test_build_is_fast_and_imports_no_training_library(site):
    _, report, _ = site
    _, rc, seconds, heavy = report.split(" ", 3)
    assert rc == "0" and heavy == "[]", report
    print(f"recipe catalog -o DIR: {seconds} s (bundled recipes and one team source)")


def test_refuses_a_file_as_the_output(tmp_path):
    target = tmp_path / "taken.html"
    target.write_text("mine")
    r = run_cli("catalog", "-o", str(target))
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == [
        f"recipe: error: {target}: is a file, not a folder (-o takes the folder to write the site into)"
    ]
    assert target.read_text() == "mine"
    empty = run_cli("catalog", "-o", "", cwd=tmp_path)
    assert (empty.returncode, empty.stderr) == (2, "recipe: error: -o needs a folder name\n")
    assert list(tmp_path.iterdir()) == [target]


# --- the index ---------------------------------------------------------------------------------


def test_index_lists_every_recipe_with_its_columns(site):
    out, _, _ = site
    page = read(out / "index.html")
    assert page.heads == COLUMNS
    rows = index_rows(out)
    tuned = ("pi07/zero2/8xA100", "pi07/fsdp/8xA100", "act/ddp/8xA100", "tiny/ddp/cpu", "tiny/zero2/cpu")
    for name in tuned:
        assert rows[name][6] == "yes", rows[name]
    assert rows["pi07/zero2/8xA100"][:9] == [
        "bundled",
        "pi07/zero2/8xA100",
        "pi07",
        "zero2",
        "8xA100",
        "valid",
        "yes",
        "13.7",
        "79%",
    ]
    assert rows["pi07/fsdp/8xA100"][5] == "warnings"
    assert rows["team-x:exp/plain"][:6] == ["team-x", "team-x:exp/plain", "tiny", "ddp", "cpu", "valid"]
    # published versions: each listed, the working file of a published name not again
    assert rows["team-x:exp/evil@1"][7:] == ["11.5", "70%"]
    assert rows["team-x:exp/evil@2"][7:] == ["12.5", "60%"]
    assert rows["team-x:exp/evil@2"][2:5] == ["pi07", "zero2", "8xA100"]  # the parts its index entry records
    assert "team-x:exp/evil" not in rows
    # untuned cells: listed when they validate, counted when they do not
    assert rows["tiny/ddp/2x1"][5:7] == ["valid", "no"]
    assert all(row[5] in ("valid", "warnings") for name, row in rows.items() if row[6] == "no" and ":" not in name)
    assert re.search(r"\d+ untuned cells that do not validate are not listed", (out / "index.html").read_text())


def test_numeric_columns_sort_by_their_figures(site):
    """The JS-free half of sorting: numeric cells carry the figure to sort by, a text column its text."""
    out, _, _ = site
    page = read(out / "index.html")
    numeric = [a for tag, a in page.tags if tag == "th" and a.get("data-type") == "number"]
    assert [a["data-col"] for a in numeric] == ["samples_per_s", "memory_fraction"]
    figures = [a["data-sort"] for tag, a in page.tags if tag == "td" and "data-sort" in a]
    assert "13.7" in figures and "0.79" in figures and "" in figures


# --- the pages ---------------------------------------------------------------------------------


def test_one_page_per_recipe_and_every_link_resolves(site):
    out, _, _ = site
    rows = index_rows(out)
    index = read(out / "index.html")
    linked = index.links
    assert len(linked) == len(rows) == len(set(linked))
    pages = sorted(p.relative_to(out).as_posix() for p in out.rglob("*.html"))
    assert len(pages) == len(rows) + 1  # and index.html
    for rel in pages:
        page = read(out / rel)
        for link in page.links:
            parts = urlsplit(link)
            assert not parts.scheme and not parts.netloc, f"{rel}: {link} leaves the site"
            target = (out / rel).parent / unquote(parts.path)
            assert target.resolve().is_file(), f"{rel}: {link} -> {target}"
        # nothing is loaded from anywhere: no src, no stylesheet link, one inline script at most
        assert not [a for _, a in page.tags if "src" in a or a.get("rel") == "stylesheet"], rel
        assert len(page.scripts) == (1 if rel == "index.html" else 0), rel


def test_values_are_text_never_markup(site):
    out, _, _ = site
    for rel in ("index.html", "r/team-x/exp/evil@1.html", "r/team-x/exp/evil@2.html"):
        text = (out / rel).read_text()
        page = Page(text)
        assert "<script>alert" not in text and "<img" not in text and "<svg onload" not in text, rel
        assert not [(t, k) for t, a in page.tags for k in a if k.startswith("on")], rel  # no event handler
        assert {t for t, _ in page.tags} <= ALLOWED_TAGS, {t for t, _ in page.tags} - ALLOWED_TAGS
    text = (out / "r/team-x/exp/evil@2.html").read_text()
    for value in (EVIL_SUMMARY, EVIL_ENV, EVIL_NOTES, EVIL_HARDWARE):
        assert value in shown_text(text), value


ALLOWED_TAGS = {
    *("html", "head", "meta", "title", "style", "script", "body", "h1", "h2", "h3", "p", "a", "span", "b"),
    *("code", "pre", "ul", "li", "table", "thead", "tbody", "tr", "th", "td", "input"),
    *("svg", "rect", "line", "text", "title", "polyline", "circle"),
}


def shown_text(text: str) -> str:
    """The page's text as a browser shows it (entities decoded)."""
    parts: list[str] = []
    parser = HTMLParser(convert_charrefs=True)
    parser.handle_data = parts.append  # type: ignore[method-assign]
    parser.feed(text)
    return "".join(parts)


def test_recipe_page_shows_values_origins_estimate_results_and_run(site):
    out, _, _ = site
    text = (out / "r/bundled/pi07/zero2/8xA100.html").read_text()
    page = Page(text)
    values = {row[0]: row for row in page.rows if len(row) == 3}
    assert values["train.micro_batch_size"][1:] == ["20", "recipes/pi07/zero2/8xA100.yaml:18:3"]
    assert re.fullmatch(r"recipes/base\.yaml:\d+:\d+", values["policy.use_torch_compile"][2])
    shown = shown_text(text)
    assert "recipe run pi07/zero2/8xA100" in shown
    assert "85% of 79.25 GiB" in shown and "Largest micro batch that fits: 25 (under 90%: 21)" in shown
    assert text.count("<svg") == 3  # the estimate's bars, samples/s and memory fraction


def test_version_pages_plot_across_versions_and_diff_the_previous(site):
    out, _, env = site
    text = (out / "r/team-x/exp/evil@2.html").read_text()
    page, shown = Page(text), shown_text(text)
    assert "recipe run team-x:exp/evil@2" in shown
    assert "evil%401.html" in page.links or "evil@1.html" in [unquote(x) for x in page.links]
    assert "recipe diff team-x:exp/evil@1 team-x:exp/evil@2" in shown
    cli_diff = run_cli("diff", "team-x:exp/evil@1", "team-x:exp/evil@2", env=env)
    assert cli_diff.returncode == 1 and cli_diff.stdout.strip()
    assert cli_diff.stdout.strip() in shown  # exactly `recipe diff`'s lines
    assert text.count("<circle") == 4  # two versions, two measured figures each
    first = shown_text((out / "r/team-x/exp/evil@1.html").read_text())
    assert "The first version" in first


def test_rebuild_removes_only_the_pages_it_wrote(tmp_path):
    from registry.sharing.site import MANIFEST, _remove_stale

    (tmp_path / "r").mkdir()
    for name in ("r/gone.html", "r/kept.html", "notes.html", "r/mine.txt"):
        (tmp_path / name).write_text("x")
    (tmp_path / MANIFEST).write_text("r/gone.html\nr/kept.html\n../outside.html\nr/mine.txt\n")
    (tmp_path.parent / "outside.html").write_text("x")
    _remove_stale(tmp_path, {"r/kept.html", "index.html"})
    assert sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if p.is_file()) == [
        MANIFEST,
        "notes.html",
        "r/kept.html",
        "r/mine.txt",
    ]
    assert (tmp_path.parent / "outside.html").exists()


def test_never_overwrites_a_file_it_did_not_write(tmp_path):
    """-o into a folder that holds files of someone else's: where a page would replace one, the
    build is refused in one line and nothing is written; its own pages are rebuilt freely."""
    out = tmp_path / "site"
    out.mkdir()
    (out / "index.html").write_text("my own page")
    (out / "notes.txt").write_text("mine")
    r = run_cli("catalog", "-o", str(out), timeout=300)
    *progress, said = r.stderr.strip().splitlines()  # how far it got, then the one line of refusal
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert all(line.startswith("recipe catalog: ") and "writing" not in line for line in progress), r.stderr
    assert f"{out / 'index.html'}: exists and was not written by recipe catalog" in said
    assert sorted(p.name for p in out.rglob("*")) == ["index.html", "notes.txt"]
    assert (out / "index.html").read_text() == "my own page"

    (out / "index.html").unlink()
    assert run_cli("catalog", "-o", str(out), timeout=300).returncode == 0
    (out / "index.html").write_text("edited by hand")  # a page of its own: replaced
    again = run_cli("catalog", "-o", str(out), timeout=300)
    assert again.returncode == 0, again.stderr
    assert "<html" in (out / "index.html").read_text() and (out / "notes.txt").read_text() == "mine"


def test_an_interrupted_build_leaves_its_pages_its_own(tmp_path, monkeypatch):
    """The manifest names the pages before they are written: a build that stopped half-way is
    followed by one that replaces its pages rather than refusing them as someone else's."""
    import registry.sharing.site as site_module
    from registry.errors import RecipeError

    written = []

    def failing(path, text, mode=0o644):
        if path.name != site_module.MANIFEST:
            if len(written) >= 3:
                raise OSError(28, "No space left on device")
            written.append(path)
        real(path, text, mode)

    real = site_module.write_atomic
    monkeypatch.setattr(site_module, "WRITERS", 1)
    monkeypatch.setattr(site_module, "write_atomic", failing)
    with pytest.raises(RecipeError, match="No space left"):
        site_module.build(tmp_path / "site")
    assert len(written) == 3
    monkeypatch.setattr(site_module, "write_atomic", real)
    site_module.build(tmp_path / "site")
    assert (tmp_path / "site" / "index.html").is_file()


def test_pages_escape_values_without_a_build():
    """The page functions alone, on a hand-made entry: runs in milliseconds."""
    from registry.compose import Recipe
    from registry.sharing.site.collect import Catalog, Entry
    from registry.sharing.site.pages import index_page, recipe_page

    data = {"recipe": {"name": "exp/x", "summary": EVIL_SUMMARY}, "env": {"A": EVIL_ENV}}
    origins = {("recipe", "summary"): "<b>file</b>.yaml:1:2", ("env", "A"): "command line"}
    entry = Entry("team", "exp/x", None, "free-standing", "team:exp/x", recipe=Recipe("exp/x", data, origins))
    entry.summary = EVIL_SUMMARY
    entry.results = [{"samples_per_s": 3.0, "memory_fraction": 0.5, "date": "<i>", "notes": EVIL_NOTES}]
    for text in (recipe_page(entry), index_page(Catalog([entry], 0))):
        assert "<script>alert" not in text and "<b>" not in text and "<i>" not in text
    assert EVIL_SUMMARY in shown_text(recipe_page(entry))
    assert "&lt;b&gt;file&lt;/b&gt;.yaml:1:2" in recipe_page(entry)
    broken = Entry("team", "exp/broken", 3, "published", "team:exp/broken@3", failure="<x> was changed")
    text = recipe_page(broken)
    assert broken.status == "invalid" and "&lt;x&gt; was changed" in text and "Resolved values" not in text


# --- in a browser ------------------------------------------------------------------------------


def chromium() -> str | None:
    return next(filter(None, (shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome"))), None)


needs_chromium = pytest.mark.skipif(chromium() is None, reason="no chromium binary (apt-get install -y chromium)")


def browse(url: str, tmp_path: Path, *flags: str) -> str:
    r = subprocess.run(
        [chromium(), "--headless=new", "--no-sandbox", "--disable-gpu", f"--user-data-dir={tmp_path / 'profile'}"]
        + list(flags)
        + [url],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    return r.stdout


def visible(dom: str) -> list[str]:
    """The names of the rows the index shows after its script ran."""
    page = Page(dom)
    rows = [tr for tag, tr in page.tags if tag == "tr" and "data-kind" in tr]
    return [row[1] for row, attrs in zip(page.rows[-len(rows) :], rows) if "hidden" not in attrs]


@needs_chromium
def test_search_and_sort_in_a_browser(site, tmp_path):
    out, _, _ = site
    index = (out / "index.html").as_uri()
    everything = visible(browse(index, tmp_path, "--dump-dom"))
    assert len(everything) == len(index_rows(out))
    dom = browse(index + "?q=act", tmp_path, "--dump-dom")
    shown = visible(dom)
    assert shown and len(shown) < len(everything)
    rows = index_rows(out)
    assert all("act" in " ".join(rows[name]).lower() for name in shown)
    assert "act/ddp/8xA100" in shown and "pi07/zero2/8xA100" not in shown
    assert re.search(rf"{len(shown)} of {len(everything)} recipes shown", dom)
    two_words = visible(browse(index + "?q=act%208xH100", tmp_path, "--dump-dom"))
    assert two_words and all(name.startswith("act/") and "8xH100" in name for name in two_words)

    dom = browse(index + "?sort=samples_per_s&dir=desc", tmp_path, "--dump-dom")
    order = visible(dom)
    assert order[:4] == ["pi07/zero2/8xA100", "team-x:exp/evil@2", "team-x:exp/evil@1", "pi07/fsdp/8xA100"]
    assert 'data-col="samples_per_s" data-type="number" aria-sort="descending"' in dom

    shot = tmp_path / "index-q-act.png"
    browse(index + "?q=act", tmp_path, f"--screenshot={shot}", "--window-size=1280,900")
    assert shot.stat().st_size > 10_000
    print(f"screenshot: {shot}")


@needs_chromium
def test_recipe_pages_in_a_browser(site, tmp_path):
    out, _, _ = site
    page = out / "r/team-x/exp/evil@2.html"
    dom = browse(page.as_uri(), tmp_path, "--dump-dom")
    assert "<script" not in dom  # the hostile values stayed text: no element was made of them
    assert EVIL_ENV in shown_text(dom) and EVIL_SUMMARY in shown_text(dom)
    assert dom.count("<svg") == 3 and 'id="run"' in dom
    for rel, name in (("r/team-x/exp/evil@2.html", "version"), ("r/bundled/pi07/zero2/8xA100.html", "tuned")):
        shot = tmp_path / f"page-{name}.png"
        browse((out / rel).as_uri(), tmp_path, f"--screenshot={shot}", "--window-size=1280,900")
        assert shot.stat().st_size > 10_000
        print(f"screenshot: {shot}")


def test_page_fragments_word_for_word_without_a_build():
    """In-process, on hand-made entries: the page skeleton (its policy, tables and headings), the
    results of two versions and of one recipe, the index's sort keys and the estimate's bars."""
    from registry.compose import Recipe
    from registry.sharing.site.collect import Catalog, Entry
    from registry.sharing.site.pages import index_page, recipe_page
    from registry.sharing.site.svg import bars

    data = {"recipe": {"name": "exp/x"}, "train": {"micro_batch_size": 4}}
    v1, v2 = (
        Entry("team", "exp/x", n, "published", f"team:exp/x@{n}", recipe=Recipe("exp/x", data, {})) for n in (1, 2)
    )
    v1.results = [{"samples_per_s": 2.5e-05, "memory_fraction": 0.5, "date": "d1"}]
    v2.results = [{"samples_per_s": 4.0, "memory_fraction": 0.6, "date": "d2"}]
    v1.siblings = v2.siblings = [v1, v2]
    v2.summary = "the second"
    page, first = recipe_page(v2), recipe_page(v1)
    assert "<p>the second</p>" in page and "<p></p>" not in first  # a summary only where there is one
    none = "&#x27;none&#x27;"
    assert f"img-src {none}; base-uri {none}; form-action {none}" in page  # the content security policy
    assert "<table>" in page and "</table>" in page and "<h2>Run</h2>" in page
    assert "<tr><th>source</th><td>team</td></tr>" in page
    assert "global samples/s, across versions" in page
    # each version's row: the page's own plain, the other linked
    assert "<tr><td>@2</td><td>d2</td>" in page and '<tr><td><a href="x%401.html">@1</a></td><td>d1</td>' in page
    alone = Entry("team", "exp/y", None, "free-standing", "team:exp/y", recipe=Recipe("exp/y", data, {}))
    alone.results = [{"samples_per_s": 3.0, "date": "d"}, {"samples_per_s": 3.5, "date": "e"}]
    assert "global samples/s, in the order recorded" in recipe_page(alone)
    index = index_page(Catalog([v1, v2], 0))
    assert '<td class="num" data-sort="2.5e-05">0.0</td>' in index and '<td class="num" data-sort="4">4.0</td>' in index
    assert "Samples/s and memory fraction are each recipe's latest measurement (<code>results</code>).</p>" in index
    chart = bars([("weights", 30.0), ("activations", 10.0)], capacity=80.0)
    assert chart.startswith("<svg") and chart.endswith("</svg>")
    # label_w 170, plot_w 390: the largest bar spans the plot, its label on its middle line; in the
    # total, 30 of 80 GiB is 146.25 wide (shown to one place)
    assert '<text x="164" y="17.0" text-anchor="end">weights</text><rect x="170" y="4.0" width="390.0"' in chart
    assert '<rect x="170.0" y="64.0" width="146.2"' in chart and '<rect x="316.2" y="64.0" width="48.8"' in chart


@pytest.mark.parametrize(
    "section, axis, named",
    [
        ({"gpu": {"name": "H100"}, "gpus_per_node": 8, "nodes": 2}, "hardware", "2x8xH100"),
        ({"gpu": {"name": "H100"}, "gpus_per_node": 8, "nodes": 1}, "hardware", "8xH100"),
        ({"gpu": "A100", "gpus_per_node": 4}, "hardware", "4xA100"),
        ({"gpus_per_node": 2}, "hardware", "cpu"),
        ({"kind": "deepspeed", "zero_stage": 3, "offload": {"optimizer": "cpu"}}, "backend", "zero3-offload"),
        ({"kind": "deepspeed", "zero_stage": 2, "offload": {"optimizer": "none"}}, "backend", "zero2"),
        ({"kind": "fsdp", "version": 2}, "backend", "fsdp2"),
        ({"kind": "fsdp", "sharding": "SHARD_GRAD_OP"}, "backend", "fsdp-grad-op"),
        ({"type": "act"}, "policy", "act"),
    ],
)
def test_a_published_recipes_axes_are_named_from_its_values(section, axis, named):
    """A published file holds no parts: the catalog names its axes as the parts are spelt."""
    from registry.sharing.listing import described

    assert described({axis: section}, axis) == named


def test_index_order_sources_and_summaries_and_stale_pages_in_process(tmp_path):
    """Versions of a name in order whatever order they came in; an untuned cell's pages under the
    first team source that supplies a part; a recipe's summary read from its values; a manifest
    that names a page outside the site removes nothing."""
    from dataclasses import replace

    from registry.compose import Recipe
    from registry.errors import RecipeError
    from registry.sharing import listing
    from registry.sharing.site import _remove_stale
    from registry.sharing.site.collect import Catalog, Entry, _entry, _source
    from registry.sharing.site.pages import index_page

    data = {"recipe": {"name": "exp/x"}}
    v1, v2 = (
        Entry("team", "exp/x", n, "published", f"team:exp/x@{n}", recipe=Recipe("exp/x", data, {})) for n in (1, 2)
    )
    index = index_page(Catalog([v2, v1], 0))
    assert index.index("x%401.html") < index.index("x%402.html")
    row = replace(
        listing._broken("a/b/c", "bundled", False, RecipeError("x"), None, "a/b/c"), parts_from=("bundled", "team-x")
    )
    assert _source(row) == "team-x" and _source(replace(row, parts_from=("bundled",))) == "bundled"
    assert _source(replace(row, parts_from=(), source="team-y")) == "team-y"
    cell = _entry("bundled", "tiny/ddp/cpu", None, "cell", "tiny/ddp/cpu", ("tiny", "ddp", "cpu"))
    assert cell.summary and cell.summary == cell.recipe.data["recipe"]["summary"]
    outside, site = tmp_path / "outside.html", tmp_path / "site"
    outside.write_text("not the site's")
    site.mkdir()
    (site / "old.html").write_text("stale")
    (site / ".recipe-catalog").write_text(f"{outside}\nold.html\n../outside.html\n")
    _remove_stale(site, set())
    assert outside.exists() and not (site / "old.html").exists()


def test_recipe_page_heading_table_versions_and_estimate_in_process():
    """The heading and facts table of a page, its versions list, the estimate's line, a total
    above the GPU's memory drawn to scale, and the index's title and search box."""
    from registry.compose import Recipe
    from registry.sharing.site.collect import Catalog, Entry, _axes, _entry
    from registry.sharing.site.pages import index_page, recipe_page
    from registry.sharing.site.svg import bars

    data = {"recipe": {"name": "exp/x"}}
    v1, v2 = (
        Entry("team", "exp/x", n, "published", f"team:exp/x@{n}", recipe=Recipe("exp/x", data, {})) for n in (1, 2)
    )
    v1.siblings = v2.siblings = [v1, v2]
    v2.axes, v2.date = ("pi07", "zero2", "8xA100"), "2026-11-27"
    page = recipe_page(v2)
    assert page.startswith("<!DOCTYPE html>\n") and "<h1>team:exp/x@2</h1>" in page
    assert "<tr><th>kind</th><td>published</td></tr>" in page and "<tr><th>tuned</th><td>no</td></tr>" in page
    assert "<tr><th>policy / backend / hardware</th><td>pi07 / zero2 / 8xA100</td></tr>" in page
    assert (
        '<ul id="versions"><li><a href="x%401.html">team:exp/x@1</a> </li><li><b>team:exp/x@2</b> 2026-11-27</li></ul>'
        in page
    )
    v2.tuned = True
    assert "<tr><th>tuned</th><td>yes</td></tr>" in recipe_page(v2)
    index = index_page(Catalog([v1, v2], 0))
    assert "<title>Recipe catalog" in index and "</tr>\n</tbody></table>" in index
    assert 'aria-label="filter recipes" autofocus> <span id="count" class="muted"></span></p>' in index
    cell = _entry("bundled", "pi07/zero2/8xA100", None, "cell", "pi07/zero2/8xA100", ("pi07", "zero2", "8xA100"))
    est = cell.estimate
    assert f"<p>{est['describe']}, micro batch {est['micro_batch_size']}; peak in {est['phase']}</p>" in recipe_page(
        cell
    )
    assert cell.axes == ("pi07", "zero2", "8xA100") and _axes(None, None) == ("", "", "")
    # 100 GiB on an 80 GiB GPU: the total sets the scale (390 px), the GPU's line at 80% of it
    over = bars([("weights", 60.0), ("activations", 40.0)], capacity=80.0)
    assert 'width="234.0"' in over and 'width="156.0"' in over and '<line x1="482.0" x2="482.0"' in over
