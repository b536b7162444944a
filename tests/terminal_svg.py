"""The README's picture: its ```console picture block, run for real and drawn as a terminal in SVG.

    python tests/terminal_svg.py     # run the block, write docs/images/quick-look.svg

The transcript is kept in the SVG's <desc> (also the text a screen reader gives), and the drawing is
made from it alone, so tests/test_readme.py can check both: the drawing against the <desc>, and
the <desc> against what the commands print now.
"""

from __future__ import annotations

import html
import re
import sys
import tempfile
import textwrap
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from doc_session import ROOT, Session, steps

README = ROOT / "README.md"
PICTURE = ROOT / "docs" / "images" / "quick-look.svg"
COLUMNS = 110
CHAR_W, LINE_H, PAD, BAR = 7.8, 17, 14, 26
DESC = re.compile(r"<desc>(.*?)</desc>", re.S)


def picture_steps():
    return [s for s in steps(README.read_text(encoding="utf-8"), "README.md") if "picture" in _block_words(s)]


def _block_words(step) -> list[str]:
    lines = README.read_text(encoding="utf-8").splitlines()[: step.line]
    opening = next(line for line in reversed(lines) if line.startswith("```"))
    return opening.split()[1:]


def transcript() -> str:
    """The picture block's commands and what they print, the checkout's path shown as `...`."""
    out = []
    with tempfile.TemporaryDirectory(prefix="picture-") as folder:
        session = Session(Path(folder))
        for step in picture_steps():
            done = session.run(step)
            if done.returncode:
                raise SystemExit(f"README.md:{step.line}: `{step.command}` exited {done.returncode}:\n{done.stdout}")
            out.append(f"$ {step.command}\n{done.stdout.replace(str(ROOT) + '/', '.../')}")
    return "".join(out)


def svg(text: str) -> str:
    """A terminal window holding `text`, long lines wrapped at COLUMNS."""
    rows: list[tuple[str, str]] = []
    for line in text.rstrip("\n").splitlines():
        kind = "cmd" if line.startswith("$ ") else ("err" if "error[" in line else "out")
        wrapped = textwrap.wrap(line, COLUMNS, subsequent_indent="  ", break_on_hyphens=False) or [""]
        rows += [(kind, piece) for piece in wrapped]
    width = round(2 * PAD + COLUMNS * CHAR_W)
    height = round(BAR + 2 * PAD + len(rows) * LINE_H)
    body = "\n".join(
        f'<text x="{PAD}" y="{BAR + PAD + (i + 1) * LINE_H - 4}" class="{kind}" xml:space="preserve">{html.escape(piece)}</text>'
        for i, (kind, piece) in enumerate(rows)
    )
    return f"""<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img">
<title>recipe in a terminal</title>
<desc>{html.escape(text)}</desc>
<style>
text {{ font: 13px ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; fill: #d8dee9; }}
.cmd {{ fill: #a3be8c; font-weight: bold; }}
.err {{ fill: #ebcb8b; }}
</style>
<rect width="{width}" height="{height}" rx="8" fill="#2e3440"/>
<circle cx="18" cy="13" r="5" fill="#bf616a"/><circle cx="36" cy="13" r="5" fill="#ebcb8b"/><circle cx="54" cy="13" r="5" fill="#a3be8c"/>
{body}
</svg>
"""


def recorded(path: Path = PICTURE) -> str:
    """The transcript an SVG written by svg() holds."""
    return html.unescape(DESC.search(path.read_text(encoding="utf-8")).group(1))


def main() -> int:
    sys.path.insert(0, str(ROOT))
    from registry.files import write_atomic

    PICTURE.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(PICTURE, svg(transcript()))
    print(f"wrote {PICTURE.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
