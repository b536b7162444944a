"""The documents that code, schemas, tests and benchmarks cite ship in docs/, with the sections
they name, and nothing cites a document that lives outside the repository.

A citation is `docs/NAME.md §X` (several sections: `docs/NAME.md §12, §15`); X is a heading's
number (`## 12. ...`), its first word (`### seed-002: ...`) or its slug. Inside docs/ a bare
`NAME.md §X` or `§X` refers to docs/ itself.
"""

from __future__ import annotations

import itertools
import json
import re
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
SCANNED = ("registry", "schemas", "recipes", "benchmarks", "tests", "docs", "README.md")
SUFFIXES = {".py", ".json", ".md", ".yaml", ".yml", ".txt", ".toml"}

DOC_REF = re.compile(r"(?<![\w/.-])docs/([\w-]+(?:\.[\w-]+)*?\.md)\b")
BARE_REF = re.compile(r"(?<![\w/.-])([\w-]+\.md)(?=\s*§)")
SECTION = re.compile(r"\s*,?\s*§([A-Za-z0-9][\w-]*)")
LOOSE_SECTION = re.compile(r"§[A-Za-z0-9]")
# documents that lived outside the repository: cite docs/ instead
OUTSIDE = re.compile(r"\bINVARIANTS\b|\bFACTS\b|\bseed 00\d\b|\b(?:TRAINERS|PRODUCT|STYLE|OPENTAU_CHECK)\.md\b")
HEADING = re.compile(r"^#{1,6}[ \t]+(.+?)[ \t]*$", re.M)
RULES_LINE = re.compile(r"^- Rules:(.*(?:\n  .*)*)", re.M)
RULE_ID = re.compile(r"`([a-z0-9][a-z0-9-]*)`")
LINK = re.compile(r"\]\((?:docs/)?([\w-]+\.md)#([\w-]+)\)")  # [text](failure-modes.md#anchor)


def slug(title: str) -> str:
    """GitHub's anchor for a heading."""
    return re.sub(r"[^\w\- ]", "", title.strip().lower()).replace(" ", "-")


def anchors(text: str) -> set[str]:
    """What `§X` may name in a document: each heading's number, first word and slug."""
    found = set()
    for title in HEADING.findall(text):
        number = re.match(r"(\d+)\.", title)
        if number:
            found.add(number.group(1))
        first = re.match(r"[A-Za-z0-9][\w-]*", title.strip("`"))
        if first:
            found.add(first.group(0).lower())
        found.add(slug(title))
    return found


@cache
def documents() -> dict[str, set[str]]:
    return {p.name: anchors(p.read_text(encoding="utf-8")) for p in sorted(DOCS.glob("*.md"))}


def _line(text: str, pos: int) -> int:
    return text.count("\n", 0, pos) + 1


def problems(text: str, where: str, docs: dict[str, set[str]], own: str | None = None) -> list[str]:
    """Every citation in `text` that names a missing document or section, or a document outside
    the repository. `own` is the document `text` is, when it is one of docs/."""
    out = []
    for m in OUTSIDE.finditer(text):
        out.append(f"{where}:{_line(text, m.start())}: {m.group(0)!r} names a document outside the repository")
    consumed: set[int] = set()
    refs = [(m, m.group(1)) for m in DOC_REF.finditer(text)]
    for m in BARE_REF.finditer(text):
        if own is None:
            out.append(f"{where}:{_line(text, m.start())}: cite {m.group(1)!r} as docs/{m.group(1)}")
        refs.append((m, m.group(1)))
    for m, name in refs:
        if name not in docs:
            out.append(f"{where}:{_line(text, m.start())}: docs/{name} does not exist")
        pos = m.end()
        while section := SECTION.match(text, pos):
            consumed.add(section.end() - len(section.group(1)) - 1)
            if name in docs and section.group(1).lower() not in docs[name]:
                out.append(f"{where}:{_line(text, pos)}: docs/{name} has no section §{section.group(1)}")
            pos = section.end()
    for m in LINK.finditer(text):
        name, anchor = m.groups()
        if name in docs and anchor not in docs[name]:
            out.append(f"{where}:{_line(text, m.start())}: docs/{name} has no heading #{anchor}")
    for m in LOOSE_SECTION.finditer(text):
        if m.start() in consumed:
            continue
        if own is None:
            out.append(f"{where}:{_line(text, m.start())}: {m.group(0)}... names no document")
            continue
        section = SECTION.match(text, m.start())
        if section.group(1).lower() not in docs.get(own, set()):
            out.append(f"{where}:{_line(text, m.start())}: {own} has no section §{section.group(1)}")
    return out


def _strings(value):
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield k
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


def scanned_files() -> list[Path]:
    files = []
    for top in SCANNED:
        path = ROOT / top
        candidates = [path] if path.is_file() else sorted(path.rglob("*"))
        files += [
            p
            for p in candidates
            if p.is_file() and p.suffix in SUFFIXES and "__pycache__" not in p.parts and p != Path(__file__).resolve()
        ]
    return files


def text_of(path: Path) -> str:
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".json":  # a "\u00a7" escape is a § too
        return "\n".join(_strings(json.loads(text)))
    return text


def rules() -> dict[str, dict]:
    found = {}
    for path in sorted((ROOT / "schemas").glob("*.schema.json")):
        doc = json.loads(path.read_text(encoding="utf-8"))
        for rule in doc.get("$defs", {}).get("invariants", {}).get("x-invariants", []):
            found[rule["id"]] = rule
    return found


def listed_rules() -> dict[str, set[str]]:
    """failure-modes.md: section number -> the rule ids on its `Rules:` line."""
    text = (DOCS / "failure-modes.md").read_text(encoding="utf-8")
    out: dict[str, set[str]] = {}
    starts = [(m.start(), m.group(1)) for m in re.finditer(r"^## (\d+)\. ", text, re.M)] + [(len(text), "")]
    for (begin, number), (end, _) in itertools.pairwise(starts):
        body = text[begin:end]
        out[number] = {i for line in RULES_LINE.findall(body) for i in RULE_ID.findall(line)}
    return out


def test_citations_name_documents_and_sections_that_exist():
    docs = documents()
    found = []
    for path in scanned_files():
        own = path.name if path.parent == DOCS else None
        found += problems(text_of(path), str(path.relative_to(ROOT)), docs, own)
    assert not found, "\n".join(found)


def test_the_check_reports_made_up_citations():
    docs = documents()
    text = (
        "see docs/failure-modes.md §12, §999 and docs/no-such-doc.md §1;\n"
        "bare failure-modes.md §3; INVARIANTS 4, seed 002, FACTS, TRAINERS.md; stray §5\n"
        "[a link](failure-modes.md#no-such-heading)\n"
    )
    found = problems(text, "made-up.py", docs)
    expected = [
        "has no section §999",
        "docs/no-such-doc.md does not exist",
        "cite 'failure-modes.md' as docs/failure-modes.md",
        "'INVARIANTS'",
        "'seed 002'",
        "'FACTS'",
        "'TRAINERS.md'",
        "§5... names no document",
        "has no heading #no-such-heading",
    ]
    for needle in expected:
        assert any(needle in p for p in found), (needle, found)
    assert len(found) == len(expected), found
    fine = "docs/failure-modes.md §12, §15, §seed-002; docs/design.md §rules; (docs/failure-modes.md)"
    assert problems(fine, "fine.py", docs) == []


def test_failure_modes_are_numbered_in_order():
    text = (DOCS / "failure-modes.md").read_text(encoding="utf-8")
    numbers = [int(n) for n in re.findall(r"^## (\d+)\. ", text, re.M)]
    assert numbers == list(range(1, len(numbers) + 1)), numbers
    assert len(numbers) >= 28


def test_every_rule_cites_a_document_and_is_listed_under_its_failure_mode():
    listed = listed_rules()
    known = rules()
    unknown = {i for ids in listed.values() for i in ids} - set(known)
    assert not unknown, f"docs/failure-modes.md lists rules that no schema has: {sorted(unknown)}"
    for rule_id, rule in known.items():
        source = rule.get("source", "")
        assert DOC_REF.search(source), f"{rule_id}: source {source!r} cites no document in docs/"
        cited = []
        for m in DOC_REF.finditer(source):
            if m.group(1) == "failure-modes.md":
                pos = m.end()
                while section := SECTION.match(source, pos):
                    cited.append(section.group(1))
                    pos = section.end()
        numbered = [s for s in cited if s.isdigit()]
        if numbered:
            assert any(rule_id in listed.get(n, set()) for n in numbered), (
                f"{rule_id} cites docs/failure-modes.md §{', §'.join(numbered)} but is on none of their Rules: lines"
            )
