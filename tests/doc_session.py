"""Shell sessions written in Markdown, run for real and compared with what they show.

A ```console block is a session: `$ COMMAND` lines, each followed by the output it shows. A command
with a here-document (`cat > f.yaml <<'EOF'`) takes the lines up to its terminator. In the output:

- a line `...` stands for any number of lines, and `...` inside a line for any text;
- in a block opened as ```console measured, figures that differ from run to run (decimal
  numbers, durations such as `15.8s` or `1m05s`, run folder timestamps, dates, short sha256
  prefixes) match any such figure; whole numbers (steps, counts) stay exact.

Every command must exit 0: one that is meant to fail shows its exit code itself
(`recipe validate bad.yaml; echo "exit: $?"`), so the reader sees it too.

    python tests/doc_session.py docs/tutorial.md    # run a document's sessions, print what they print

prints the real transcript, to paste where a document has drifted.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

FENCE = re.compile(r"^```(\S*)[ \t]*(.*)$")
HEREDOC = re.compile(r"<<-?\s*'?\"?(\w+)'?\"?")
# figures that change between runs of the same command (a `measured` block)
VARYING = re.compile(
    r"(?P<duration>(?<![\w.])\d+(?:\.\d+s|m\d\ds|h\d\dm)(?!\w))"  # wall times (registry/run/summary.py)
    r"|\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ"  # publish dates
    r"|\d{8}-\d{6}"  # run folders
    r"|(?<![\w.])[0-9a-f]{12}(?![\w])"  # short sha256
    r"|\d+\.\d+(?:e[-+]?\d+)?|\d+e[-+]?\d+"  # measured figures
)
ANY_FIGURE = r"[0-9a-fTZ:.e+-]+"
# a wall time may cross a unit between runs (59.8s, 1m02s)
ANY_DURATION = r"\d+(?:\.\d+s|m\d\ds|h\d\dm)"
ELISION = "..."


@dataclass
class Step:
    """One `$ COMMAND` of a document, with the output the document shows for it."""

    document: str
    line: int
    command: str
    expected: list[str]
    measured: bool


def steps(text: str, document: str = "") -> list[Step]:
    """Every command of every ```console block, in order."""
    out: list[Step] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        fence = FENCE.match(lines[i])
        i += 1
        if not fence or fence.group(1) != "console":
            if fence:  # skip any other block whole
                while i < len(lines) and not lines[i].startswith("```"):
                    i += 1
                i += 1
            continue
        measured = "measured" in fence.group(2).split()
        step: Step | None = None
        while i < len(lines) and not lines[i].startswith("```"):
            line = lines[i]
            if line.startswith("$ "):
                step = Step(document, i + 1, line[2:], [], measured)
                out.append(step)
                heredoc = HEREDOC.search(line)
                if heredoc:
                    body = []
                    while i + 1 < len(lines) and lines[i + 1] != heredoc.group(1):
                        i += 1
                        body.append(lines[i])
                    i += 1
                    step.command += "\n" + "\n".join(body) + "\n" + heredoc.group(1)
            elif step is None:
                raise ValueError(f"{document}:{i + 1}: a console block starts with output, not a `$ ` command")
            else:
                step.expected.append(line)
            i += 1
        i += 1
    return out


def _line_pattern(line: str, measured: bool) -> str:
    parts = []
    for k, piece in enumerate(line.split(ELISION)):
        if k:
            parts.append(".*")
        if measured:
            pos = 0
            for m in VARYING.finditer(piece):
                parts.append(re.escape(piece[pos : m.start()]) + (ANY_DURATION if m.group("duration") else ANY_FIGURE))
                pos = m.end()
            piece = piece[pos:]
        parts.append(re.escape(piece))
    return "".join(parts)


def matches(expected: list[str], actual: str, measured: bool = False) -> bool:
    """Whether `actual` (a command's whole output) is what `expected` shows, elisions allowed."""
    pattern = "".join(
        r"(?:[^\n]*\n)*?" if line.strip() == ELISION else _line_pattern(line.rstrip(), measured) + r"[ \t]*\n"
        for line in _trimmed(expected)
    )
    text = "".join(line.rstrip() + "\n" for line in _trimmed(actual.splitlines()))
    return re.fullmatch(pattern, text) is not None


def _trimmed(lines: list[str]) -> list[str]:
    lines = list(lines)
    while lines and not lines[-1].strip():
        lines.pop()
    return lines


class Session:
    """A fresh folder and home, sealed off from the user's configuration, where `recipe` is this
    checkout's."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.cwd = folder / "work"
        bin_dir = folder / "bin"
        for d in (self.cwd, bin_dir):
            d.mkdir(parents=True)
        shim = bin_dir / "recipe"
        shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m registry "$@"\n')
        shim.chmod(0o755)
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("RECIPE_", "XDG_", "MACHINE_RANK", "MAIN_PROCESS_")) and k != "COLUMNS"
        }
        env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
        for name in ("HOME", "XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME"):
            path = folder / name.lower()
            path.mkdir()
            env[name] = str(path)
        self.env = env

    def run(self, step: Step, timeout: float = 300) -> subprocess.CompletedProcess:
        return subprocess.run(
            ["bash", "-c", step.command],
            cwd=self.cwd,
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            text=True,
            timeout=timeout,
        )


def check(document: Path, folder: Path) -> tuple[list[str], Session]:
    """Runs a document's sessions in `folder`; one message per command whose exit or output differs
    from what the document shows."""
    name = str(document.relative_to(ROOT)) if document.is_relative_to(ROOT) else str(document)
    session = Session(folder)
    problems = []
    for step in steps(document.read_text(encoding="utf-8"), name):
        done = session.run(step)
        if done.returncode != 0:
            problems.append(f"{name}:{step.line}: `{step.command}` exited {done.returncode}:\n{done.stdout}")
        elif not matches(step.expected, done.stdout, step.measured):
            problems.append(
                f"{name}:{step.line}: `{step.command}` printed (the document shows otherwise):\n{done.stdout}"
            )
    return problems, session


def main(argv: list[str]) -> int:
    for document in argv or ["README.md", "docs/tutorial.md"]:
        path = Path(document).resolve()
        with tempfile.TemporaryDirectory(prefix="doc-session-") as folder:
            session = Session(Path(folder))
            for step in steps(path.read_text(encoding="utf-8"), document):
                done = session.run(step)
                print(f"$ {step.command}\n{done.stdout}", end="" if done.stdout.endswith("\n") else "\n")
                if done.returncode:
                    print(f"[{document}:{step.line}: exit {done.returncode}]")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
