"""The catalog's pages as HTML strings: pure functions of the gathered entries.

Every value from a recipe is shared input, so every one goes through `esc` (text and attribute
values alike). The pages load nothing: styles and the index's one script are inline, and each
page's Content-Security-Policy allows exactly those (by hash) and nothing else, so even a value
that slipped through escaping could neither run nor fetch anything."""

from __future__ import annotations

import base64
import hashlib
import posixpath
import shlex
from urllib.parse import quote

from registry.sharing.site.collect import Catalog, Entry, number
from registry.sharing.site.svg import bars, esc, line

INDEX = "index.html"

CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:1.5rem;color:#222;max-width:1400px}
h1{font-size:1.4rem;margin:.2rem 0}h2{font-size:1.1rem;margin-top:1.6rem;border-bottom:1px solid #ddd}
table{border-collapse:collapse;font-size:.85rem}th,td{padding:.2rem .5rem;border-bottom:1px solid #eee;text-align:left}
th{background:#f4f4f4;position:sticky;top:0}th.sortable{cursor:pointer;user-select:none}
th[aria-sort=ascending]::after{content:" \\25B2"}th[aria-sort=descending]::after{content:" \\25BC"}
td.num{text-align:right;font-variant-numeric:tabular-nums}
.valid{color:#1a7f37}.warnings{color:#9a6700}.invalid{color:#cf222e}
code,pre,.mono{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:.82rem}
pre{background:#f6f8fa;padding:.6rem;overflow-x:auto;white-space:pre-wrap}
#q{font-size:1rem;padding:.3rem;width:28rem;max-width:90%}.muted{color:#666}
ul.problems li{font-family:ui-monospace,monospace;font-size:.8rem}
td.origin{color:#666}
"""

# The index's script: the search box filters rows (hidden rows carry the `hidden` attribute),
# a header click sorts; `?q=TEXT` pre-fills the search and `?sort=COLUMN&dir=desc` sorts, so
# both can be opened as a URL (and tested by loading one).
SCRIPT = """
(function () {
  var table = document.getElementById("recipes");
  var body = table.tBodies[0];
  var box = document.getElementById("q");
  var count = document.getElementById("count");
  var heads = table.tHead.rows[0].cells;
  function filter() {
    var terms = box.value.toLowerCase().split(/\\s+/).filter(Boolean);
    var shown = 0;
    for (var i = 0; i < body.rows.length; i++) {
      var row = body.rows[i];
      var text = row.textContent.toLowerCase();
      var hit = terms.every(function (t) { return text.indexOf(t) >= 0; });
      if (hit) { row.removeAttribute("hidden"); shown++; } else { row.setAttribute("hidden", ""); }
    }
    count.textContent = shown + " of " + body.rows.length + " recipes shown";
  }
  function key(row, col, numeric) {
    var cell = row.cells[col];
    var value = cell.getAttribute("data-sort");
    if (value === null) { value = cell.textContent; }
    if (numeric) { return value === "" ? null : parseFloat(value); }
    return value.toLowerCase();
  }
  function sortBy(col, descending) {
    var numeric = heads[col].getAttribute("data-type") === "number";
    var rows = Array.prototype.slice.call(body.rows);
    rows.sort(function (a, b) {
      var x = key(a, col, numeric), y = key(b, col, numeric);
      if (x === y) { return 0; }
      if (x === null) { return 1; }  // rows without a figure go last either way
      if (y === null) { return -1; }
      var order = x < y ? -1 : 1;
      return descending ? -order : order;
    });
    rows.forEach(function (row) { body.appendChild(row); });
    for (var i = 0; i < heads.length; i++) { heads[i].removeAttribute("aria-sort"); }
    heads[col].setAttribute("aria-sort", descending ? "descending" : "ascending");
  }
  for (var i = 0; i < heads.length; i++) {
    (function (col) {
      heads[col].addEventListener("click", function () {
        sortBy(col, heads[col].getAttribute("aria-sort") === "ascending");
      });
    })(i);
  }
  var params = new URLSearchParams(window.location.search);
  if (params.get("q")) { box.value = params.get("q"); }
  var sort = params.get("sort");
  if (sort) {
    for (var j = 0; j < heads.length; j++) {
      if (heads[j].getAttribute("data-col") === sort) { sortBy(j, params.get("dir") === "desc"); }
    }
  }
  box.addEventListener("input", filter);
  filter();
})();
"""

# (id used by ?sort=, header, numeric)
COLUMNS = (
    ("source", "source", False),
    ("recipe", "recipe", False),
    ("policy", "policy", False),
    ("backend", "backend", False),
    ("hardware", "hardware", False),
    ("status", "status", False),
    ("tuned", "tuned", False),
    ("samples_per_s", "samples/s", True),
    ("memory_fraction", "memory fraction", True),
)


def _hash(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


def document(title: str, body: str, script: str | None = None) -> str:
    scripts = _hash(script) if script else "'none'"
    csp = f"default-src 'none'; style-src {_hash(CSS)}; script-src {scripts}; "
    csp += "img-src 'none'; base-uri 'none'; form-action 'none'"
    tail = f"<script>{script}</script>" if script else ""
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{esc(csp)}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{esc(title)}</title><style>{CSS}</style></head>\n"
        f"<body>\n{body}\n{tail}</body></html>\n"
    )


def href(page: str, target: str) -> str:
    """A link from one page of the site to another, relative (so the site works from any
    folder, over file://), percent-encoded."""
    return quote(posixpath.relpath(target, posixpath.dirname(page) or "."))


def command(*words: str) -> str:
    """A `recipe` command line to copy from a page: each word quoted for the shell, then escaped."""
    return esc(shlex.join(["recipe", *words]))


def fmt(value: float | None, spec: str) -> str:
    return "" if value is None else format(value, spec)


# --- the index ---------------------------------------------------------------------------------


def index_page(catalog: Catalog) -> str:
    rows = [_row(entry) for entry in sorted(catalog.entries, key=_order)]
    heads = "".join(
        f'<th class="sortable" data-col="{col}"{" data-type=number" if numeric else ""}>{esc(label)}</th>'
        for col, label, numeric in COLUMNS
    )
    counts = {s: sum(e.status == s for e in catalog.entries) for s in ("valid", "warnings", "invalid")}
    note = (
        f"<p class=muted>{catalog.left_out} untuned cells that do not validate are not listed "
        "(<code>recipe validate NAME</code> says why).</p>"
        if catalog.left_out
        else ""
    )
    body = (
        "<h1>Recipe catalog</h1>"
        f"<p>{len(catalog.entries)} recipes: every tuned overlay, free-standing recipe and published version of "
        "every source, and every untuned cell that validates. "
        f'<span class="valid">{counts["valid"]} valid</span>, '
        f'<span class="warnings">{counts["warnings"]} with warnings</span>, '
        f'<span class="invalid">{counts["invalid"]} invalid</span>. '
        "Samples/s and memory fraction are each recipe's latest measurement (<code>results</code>).</p>"
        f"{note}"
        '<p><input id="q" type="search" placeholder="filter: words that every shown row contains" '
        'aria-label="filter recipes" autofocus> <span id="count" class="muted"></span></p>'
        f'<table id="recipes"><thead><tr>{heads}</tr></thead><tbody>\n' + "\n".join(rows) + "\n</tbody></table>"
    )
    return document("Recipe catalog", body, SCRIPT)


def _order(entry: Entry):
    kinds = {"tuned": 0, "published": 1, "free-standing": 2, "cell": 3}
    return (kinds[entry.kind], entry.source != "bundled", entry.source, entry.name, entry.version or 0)


def _row(entry: Entry) -> str:
    rate = number(entry.latest.get("samples_per_s"))
    mem = number(entry.latest.get("memory_fraction"))
    cells = [
        f"<td>{esc(entry.source)}</td>",
        f'<td><a href="{esc(href(INDEX, entry.page))}" title="{esc(entry.summary)}">{esc(entry.key)}</a></td>',
        *(f"<td>{esc(a)}</td>" for a in entry.axes),
        f'<td class="{entry.status}">{entry.status}</td>',
        f"<td>{'yes' if entry.tuned else 'no'}</td>",
        f'<td class="num" data-sort="{fmt(rate, "g")}">{fmt(rate, ".1f")}</td>',
        f'<td class="num" data-sort="{fmt(mem, "g")}">{fmt(mem, ".0%")}</td>',
    ]
    return f'<tr data-kind="{entry.kind}">' + "".join(cells) + "</tr>"


# --- a recipe ----------------------------------------------------------------------------------


def recipe_page(entry: Entry) -> str:
    page = entry.page
    policy, backend, hardware = entry.axes
    parts = [
        f'<p><a href="{esc(href(page, INDEX))}">&larr; all recipes</a></p>',
        f"<h1>{esc(entry.key)}</h1>",
        f"<p>{esc(entry.summary)}</p>" if entry.summary else "",
        "<table>",
        f"<tr><th>source</th><td>{esc(entry.source)}</td></tr>",
        f"<tr><th>kind</th><td>{esc(entry.kind)}</td></tr>",
        f"<tr><th>policy / backend / hardware</th><td>{esc(policy)} / {esc(backend)} / {esc(hardware)}</td></tr>",
        f'<tr><th>status</th><td class="{entry.status}">{entry.status}</td></tr>',
        f"<tr><th>tuned</th><td>{'yes' if entry.tuned else 'no'}</td></tr>",
        "</table>",
        "<h2>Run</h2>",
        f'<pre id="run">{esc(entry.run_command)}</pre>',
        _problems(entry),
        _estimate(entry),
        _results(entry),
        _versions(entry),
        _values(entry),
    ]
    return document(f"{entry.key} - recipe catalog", "\n".join(p for p in parts if p))


def _problems(entry: Entry) -> str:
    lines = [entry.failure] if entry.failure else [p.render() for p in entry.problems]
    if not lines:
        return ""
    items = "".join(f"<li>{esc(line)}</li>" for line in lines)
    return (
        f'<h2>Validation</h2><p class="mono">{command("validate", entry.target)}</p><ul class="problems">{items}</ul>'
    )


def _estimate(entry: Entry) -> str:
    est = entry.estimate
    head = f'<h2>Memory estimate</h2><p class="mono">{command("estimate", entry.target)}</p>'
    if est is None:
        return head + f"<p>{esc(entry.estimate_note or 'not composed: nothing to estimate')}</p>"
    rows = list(est["breakdown"].items())
    table = "".join(f'<tr><td>{esc(k)}</td><td class="num">{v:.2f}</td></tr>' for k, v in rows)
    return (
        head
        + f"<p>{esc(est['describe'])}, micro batch {est['micro_batch_size']}; peak in {esc(est['phase'])}</p>"
        + bars(rows, est["capacity_gib"])
        + f"<table><tr><th>per rank</th><th>GiB</th></tr>{table}"
        + f'<tr><th>total</th><th class="num">{est["total_gib"]:.2f}</th></tr></table>'
        + f"<p>{est['fraction']:.0%} of {est['capacity_gib']:.2f} GiB (allocated {est['allocated_gib']:.2f}, "
        f"reserved {est['reserved_gib']:.2f}; activations {est['per_sample_gib']:.3f} GiB per sample). "
        f"Largest micro batch that fits: {est['largest_micro_batch']} (under 90%: {est['largest_under_90']}).</p>"
    )


def _measurements(entry: Entry) -> list[tuple[str, Entry, dict]]:
    """(label, version, result) across every version of the name, or the recipe's own."""
    group = entry.siblings or [entry]
    out = []
    for member in group:
        for i, result in enumerate(member.results, 1):
            label = f"@{member.version}" if member.version is not None else result.get("date") or f"#{i}"
            if member.version is not None and len(member.results) > 1:
                label += f" #{i}"
            out.append((str(label), member, result))
    return out


def _results(entry: Entry) -> str:
    measured = _measurements(entry)
    head = "<h2>Measured results</h2>"
    if not measured:
        return head + "<p>No measurements recorded (<code>recipe bench --record</code> adds them).</p>"
    across = "across versions" if entry.siblings else "in the order recorded"
    charts = ""
    for key, title, spec in (
        ("samples_per_s", "global samples/s", "{:.1f}"),
        ("memory_fraction", "memory fraction", "{:.0%}"),
    ):
        points = [(label, number(r.get(key))) for label, _, r in measured]
        points = [(label, v) for label, v in points if v is not None]
        if points:
            charts += line(points, f"{title}, {across}", spec)
    rows = []
    for label, member, r in measured:
        rate, mem = number(r.get("samples_per_s")), number(r.get("memory_fraction"))
        link = esc(label) if member is entry else f'<a href="{esc(href(entry.page, member.page))}">{esc(label)}</a>'
        rows.append(
            f"<tr><td>{link}</td><td>{esc(r.get('date') or '')}</td>"
            f'<td class="num">{fmt(rate, ".1f")}</td><td class="num">{fmt(mem, ".0%")}</td>'
            f"<td>{esc(r.get('hardware') or '')}</td><td>{esc(r.get('micro_batch_size') or '')}</td>"
            f"<td>{esc(r.get('source') or r.get('notes') or '')}</td></tr>"
        )
    return (
        head
        + charts
        + "<table><tr><th>measurement</th><th>date</th><th>samples/s</th><th>memory</th><th>hardware</th>"
        + "<th>micro batch</th><th>source</th></tr>"
        + "".join(rows)
        + "</table>"
    )


def _versions(entry: Entry) -> str:
    if entry.version is None:
        return ""
    items = []
    for member in entry.siblings:
        label = esc(member.key)
        shown = f"<b>{label}</b>" if member is entry else f'<a href="{esc(href(entry.page, member.page))}">{label}</a>'
        items.append(f"<li>{shown} {esc(member.date)}</li>")
    out = f'<h2>Versions</h2><ul id="versions">{"".join(items)}</ul>'
    prev = entry.previous
    if prev is None:
        return out + "<p>The first version: nothing earlier to compare with.</p>"
    out += (
        f'<h3 id="diff">Changes from <a href="{esc(href(entry.page, prev.page))}">{esc(prev.key)}</a></h3>'
        f'<p class="mono">{command("diff", prev.target, entry.target)}</p>'
    )
    if prev.recipe is None or entry.recipe is None:
        return out + "<p>One side could not be composed, so there is no diff.</p>"
    from registry.commands.diff import differences

    lines = differences(prev.recipe, entry.recipe)
    if not lines:
        return out + "<p>No differences.</p>"
    return out + '<pre class="diff">' + "\n".join(esc(x) for x in lines) + "</pre>"


def _values(entry: Entry) -> str:
    if entry.recipe is None:
        return ""
    origins = entry.recipe.origins
    rows = []
    for path, value in _leaves(entry.recipe.data, ()):
        where = next((origins[path[:n]] for n in range(len(path), 0, -1) if path[:n] in origins), "composed")
        rows.append(
            f'<tr><td class="mono">{esc(".".join(str(p) for p in path))}</td>'
            f'<td class="mono">{esc(_scalar(value))}</td><td class="origin mono">{esc(where)}</td></tr>'
        )
    return (
        f'<h2>Resolved values</h2><p class="mono">{command("show", entry.target, "--origin")}</p>'
        '<table id="values"><tr><th>key</th><th>value</th><th>set at (file:line:column)</th></tr>'
        + "".join(rows)
        + "</table>"
    )


_SCALARS: dict[tuple, str] = {}


def _scalar(value) -> str:
    """`recipe show`'s rendering of a value (YAML flow style), remembered for plain scalars:
    the same few hundred values recur on every page, and YAML's emitter is slow."""
    from registry.commands.render import scalar

    if value is None or isinstance(value, (str, int, float, bool)):
        key = (type(value), value)
        if key not in _SCALARS:
            _SCALARS[key] = scalar(value)
        return _SCALARS[key]
    return scalar(value)


def _leaves(value, path: tuple):
    """Each leaf in document order; a list of mappings (results) is walked item by item."""
    if isinstance(value, dict) and value:
        for key, sub in value.items():
            yield from _leaves(sub, (*path, key))
    elif isinstance(value, list) and any(isinstance(v, dict) for v in value):
        for i, sub in enumerate(value):
            yield from _leaves(sub, (*path, i))
    else:
        yield path, value
