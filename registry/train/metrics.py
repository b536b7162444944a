"""Throughput, memory and phase timings, reduced across ranks (the slowest rank sets samples/s,
the fullest rank sets peak memory), written to metrics.jsonl on rank 0."""

from __future__ import annotations

import json
import os
import resource
import sys
import time
from pathlib import Path

import torch

from registry.train import PHASES, TERMINAL

GIB = 1024**3


def process_started() -> float | None:
    """This process's start as wall-clock epoch seconds, to 10 ms (Linux /proc; None elsewhere)."""
    try:
        ticks = int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[19])
        uptime = float(Path("/proc/uptime").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return time.time() - (uptime - ticks / os.sysconf("SC_CLK_TCK"))


class Phases:
    """Wall time and, on a GPU, peak allocated memory per phase; synchronises the device at each
    boundary only when asked to. Peaks are read and reset at each boundary, so the run's overall
    peak is kept here too (`peak_memory`)."""

    def __init__(self, device: torch.device, enabled: bool):
        self.device = device
        self.sync = enabled and device.type == "cuda"
        self.enabled = enabled
        self.totals = dict.fromkeys(PHASES, 0.0)
        self.peaks = dict.fromkeys(PHASES, 0.0)  # GiB allocated, highest over the window
        self.resident = 0.0  # GiB allocated between steps: parameters, gradients kept, optimizer states
        self._highest = (0.0, 0.0)  # (allocated, reserved) GiB up to the last reset
        self._last = 0.0

    def start(self):
        if self.enabled:
            self._wait()
            self._memory(None)
            self._last = time.perf_counter()

    def mark(self, phase: str):
        if self.enabled:
            self._wait()
            now = time.perf_counter()
            self.totals[phase] += now - self._last
            self._memory(phase)
            self._last = now

    def take(self) -> tuple[list[float], list[float]]:
        """Seconds and peak GiB per phase since the last take."""
        values, peaks = [self.totals[p] for p in PHASES], [self.peaks[p] for p in PHASES]
        self.totals, self.peaks = dict.fromkeys(PHASES, 0.0), dict.fromkeys(PHASES, 0.0)
        return values, peaks

    def _memory(self, phase: str | None):
        if not self.sync:
            return
        since_reset = peak_memory_gib(self.device)[0]
        self._highest = self.peak_memory()
        if phase is not None:
            self.peaks[phase] = max(self.peaks[phase], since_reset)
        if phase == PHASES[-1]:
            self.resident = torch.cuda.memory_allocated(self.device) / GIB
        torch.cuda.reset_peak_memory_stats(self.device)

    def peak_memory(self) -> tuple[float, float]:
        """(allocated, reserved) GiB, the highest since the run began, phase resets or not."""
        allocated, reserved = peak_memory_gib(self.device)
        return max(allocated, self._highest[0]), max(reserved, self._highest[1])

    def _wait(self):
        if self.sync:
            torch.cuda.synchronize()


def peak_memory_gib(device: torch.device) -> tuple[float, float]:
    """(allocated, reserved) on a GPU; on a CPU both are the process's peak resident set."""
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / GIB, torch.cuda.max_memory_reserved(device) / GIB
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / GIB  # KiB on Linux
    return rss, rss


class Log:
    """metrics.jsonl, and on rank 0 a progress bar when the output reaches a terminal (directly, or
    through `recipe run`, which pipes it and says so in TERMINAL), else one line per logged step."""

    def __init__(self, path: Path, main: bool, total_steps: int, progress: bool):
        self.main = main
        self.file = open(path, "a", encoding="utf-8") if main else None  # noqa: SIM115 (closed by close())
        self.bar = None
        columns = os.environ.get(TERMINAL, "")
        if main and progress and (sys.stderr.isatty() or columns.isdigit()):
            from tqdm.auto import tqdm

            width = {"ncols": int(columns)} if columns.isdigit() else {"dynamic_ncols": True}
            self.bar = tqdm(total=total_steps, unit="step", file=sys.stderr, **width)
        self.total = total_steps

    def resumed(self, step: int) -> None:
        if self.bar is not None:
            self.bar.n = self.bar.last_print_n = step
            self.bar.refresh()

    def write(self, record: dict) -> None:
        if self.file:
            self.file.write(json.dumps(record) + "\n")
            self.file.flush()

    def progress(self, step: int, record: dict, advanced: int) -> None:
        if not self.main:
            return
        if self.bar is not None:
            self.bar.update(advanced)
            self.bar.set_postfix(loss=f"{record['loss']:.4g}", sps=f"{record['samples_per_s']:.1f}")
        else:
            print(
                f"step {step}/{self.total} loss {record['loss']:.6g} lr {record['lr']:.3g} "
                f"samples/s {record['samples_per_s']:.1f} peak {record['peak_allocated_gib']:.2f} GiB",
                flush=True,
            )

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
        if self.file:
            self.file.close()
