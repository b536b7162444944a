"""registry/untrusted.py, the one guarded reader of what comes from outside the registry
(docs/failure-modes.md §68): each reason it refuses for, on real files, FIFOs, devices and
processes, and the happy paths it must keep."""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path

import pytest

from registry import untrusted
from registry.untrusted import Rejected


def _quick(fn, *args, limit: float = 5.0, **kwargs):
    """fn(*args) run in a thread: a hang fails the test in `limit` seconds instead of blocking it."""
    out: dict = {}

    def call():
        try:
            out["value"] = fn(*args, **kwargs)
        except BaseException as e:  # handed back to the test
            out["error"] = e

    worker = threading.Thread(target=call, daemon=True)
    worker.start()
    worker.join(limit)
    assert not worker.is_alive(), f"{fn.__name__} hung"
    if "error" in out:
        raise out["error"]
    return out["value"]


# --- happy paths -----------------------------------------------------------------------------------
def test_a_regular_file_and_a_symlink_to_one_are_read(tmp_path):
    real = tmp_path / "config.json"
    real.write_text('{"a": [1, 2.5, "x"], "b": {"c": null}}')
    link = tmp_path / "link.json"
    link.symlink_to(real)  # the hub cache's snapshots are links to blobs
    for path in (real, link):
        assert untrusted.read_json(path) == {"a": [1, 2.5, "x"], "b": {"c": None}}
        assert untrusted.read_bytes(path) == real.read_bytes()
        assert untrusted.head(path, 4) == b'{"a"'
    assert untrusted.is_regular(link) and not untrusted.is_regular(tmp_path)


def test_loads_keeps_what_a_well_formed_file_holds():
    deep = "[" * untrusted.MAX_DEPTH + "]" * untrusted.MAX_DEPTH
    assert untrusted.check_depth(untrusted.loads(deep, "x"), "x") is None
    assert untrusted.loads(b'{"n": 9223372036854775807, "f": 1e300}', "x") == {"n": 2**63 - 1, "f": 1e300}


def test_run_output_returns_the_code_and_what_was_printed():
    code, out = untrusted.run_output([sys.executable, "-c", "import sys; print('hi'); sys.exit(3)"])
    assert (code, out) == (3, b"hi\n")


def test_expect_passes_the_value_back():
    assert untrusted.expect({"a": 1}, dict, "f", "x") == {"a": 1}
    assert untrusted.expect(3, (int, float), "f", "x") == 3


# --- each refusal ----------------------------------------------------------------------------------
def test_a_fifo_is_refused_without_hanging(tmp_path):
    fifo = tmp_path / "info.json"
    os.mkfifo(fifo)
    for fn, args in ((untrusted.read_json, ()), (untrusted.read_bytes, ()), (untrusted.head, (512,))):
        with pytest.raises(Rejected, match="a FIFO, not a regular file"):
            _quick(fn, fifo, *args)
    assert not untrusted.is_regular(fifo)


def test_a_fifo_swapped_in_after_the_check_is_refused_without_hanging(tmp_path, monkeypatch):
    """The path checked is a regular file; the one opened a FIFO: the non-blocking open returns
    and the check on the descriptor refuses it."""
    path, fifo = tmp_path / "config.json", tmp_path / "fifo"
    path.write_text("{}")
    os.mkfifo(fifo)
    real_open = os.open

    def swapped(p, *args, **kwargs):
        if str(p) == str(path):
            os.replace(fifo, path)
        return real_open(p, *args, **kwargs)

    monkeypatch.setattr(untrusted.os, "open", swapped)
    with pytest.raises(Rejected, match="a FIFO, not a regular file"):
        _quick(untrusted.read_json, path)


def test_a_device_and_a_directory_are_refused(tmp_path):
    link = tmp_path / "zero.json"
    link.symlink_to("/dev/zero")
    with pytest.raises(Rejected, match="a device, not a regular file"):
        _quick(untrusted.read_bytes, link)
    with pytest.raises(Rejected, match="a directory, not a file"):
        untrusted.read_bytes(tmp_path)


def test_a_missing_file_and_a_dangling_link_cannot_be_read(tmp_path):
    with pytest.raises(Rejected, match="cannot read"):
        untrusted.read_bytes(tmp_path / "nothing")
    (tmp_path / "dangling").symlink_to(tmp_path / "gone")
    with pytest.raises(Rejected, match="cannot read"):
        untrusted.head(tmp_path / "dangling", 10)


def test_a_sparse_file_past_the_cap_is_refused_unread_and_head_reads_its_start(tmp_path):
    sparse = tmp_path / "big.json"
    with open(sparse, "wb") as f:
        f.write(b"#!/usr/bin/python3\n")
        f.truncate(64 << 30)  # 64 GiB of holes: reading it whole would take minutes and all memory
    started = time.monotonic()
    with pytest.raises(Rejected, match=r"68719476736 bytes, more than the 16 MiB"):
        untrusted.read_bytes(sparse)
    assert untrusted.head(sparse, 512).startswith(b"#!/usr/bin/python3\n") and len(untrusted.head(sparse, 512)) == 512
    assert time.monotonic() - started < 2


def test_a_file_over_a_small_cap_is_refused(tmp_path):
    path = tmp_path / "f"
    path.write_bytes(b"x" * 101)
    with pytest.raises(Rejected, match="101 bytes, more than the 100 bytes"):
        untrusted.read_bytes(path, limit=100)
    assert untrusted.read_bytes(path, limit=101) == b"x" * 101


def test_text_that_is_not_utf8_is_refused(tmp_path):
    path = tmp_path / "f"
    path.write_bytes(b'{"a": "\xff"}')
    with pytest.raises(Rejected, match="not UTF-8 text"):
        untrusted.read_json(path)
    with pytest.raises(Rejected, match="not UTF-8"):
        untrusted.loads(b"\xff", "where")


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("[" * 100_000 + "]" * 100_000, "nested deeper than 64 levels"),
        ("[" * 65 + "]" * 65, "nested deeper than 64 levels"),
        ('{"frames": 1' + "0" * 400 + "}", "an integer of 401 digits"),
        ('{"fps": 1e400}', "1e400 overflows a float"),
        ('{"fps": NaN}', "NaN is not a number"),
        ('{"fps": -Infinity}', "-Infinity is not a number"),
        ("{not json", "not JSON"),
    ],
)
def test_json_past_the_bounds_is_refused(text, why):
    with pytest.raises(Rejected, match=why) as caught:
        untrusted.loads(text, "info.json")
    assert str(caught.value).startswith("info.json: ")


def test_a_deep_value_built_in_memory_is_refused_without_recursion():
    value: list = []
    for _ in range(200_000):
        value = [value]
    with pytest.raises(Rejected, match="nested deeper than 64 levels"):
        untrusted.check_depth(value, "x")


def test_a_program_that_floods_or_stalls_is_killed_and_refused():
    flood = [sys.executable, "-c", "import sys\nwhile True: sys.stdout.write('x' * 65536)"]
    with pytest.raises(Rejected, match="printed more than 1 MiB"):
        untrusted.run_output(flood, limit=1 << 20, timeout=10)
    stall = [sys.executable, "-c", "import time; time.sleep(30)"]
    started = time.monotonic()
    with pytest.raises(Rejected, match=r"no answer within 0\.5 s"):
        untrusted.run_output(stall, timeout=0.5)
    assert time.monotonic() - started < 5
    with pytest.raises(Rejected, match="cannot run it"):
        untrusted.run_output([os.devnull])


def test_expect_names_what_was_wanted():
    with pytest.raises(Rejected, match="f: packages is list, not a mapping"):
        untrusted.expect([], dict, "f", "packages")
    with pytest.raises(Rejected, match="f: count is bool, not an integer"):
        untrusted.expect(True, int, "f", "count")
    with pytest.raises(Rejected, match="f: v is str, not an integer or a number"):
        untrusted.expect("1", (int, float), "f", "v")


def test_a_child_left_holding_the_pipe_neither_hangs_the_answer_nor_outlives_it(tmp_path):
    """A program that prints its answer and exits, leaving a background child with its stdout: the
    read waited for the child (300 s, past any limit). The answer is taken once the program has
    exited, and the child is killed with its session."""
    pid_file = tmp_path / "child.pid"
    script = "echo '{\"ok\": 1}'; (sleep 300 & echo $! > " + str(pid_file) + "); exit 0"
    started = time.monotonic()
    code, out = _quick(untrusted.run_output, ["bash", "-c", script], timeout=30, limit=10.0)
    assert (code, out) == (0, b'{"ok": 1}\n')
    assert time.monotonic() - started < untrusted.EXIT_GRACE_S + 3
    child = int(pid_file.read_text())
    for _ in range(50):  # killed, and reaped by init: gone from the process table
        stat = Path(f"/proc/{child}/stat")
        if not stat.exists() or "Z" in stat.read_text().split()[2]:
            break
        time.sleep(0.1)
    else:
        raise AssertionError(f"the child {child} outlived the call")
