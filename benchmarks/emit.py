"""What every benchmark result ends with: the host it was measured on, and the JSON printed and
optionally written to --out."""

import json
import os
import platform
import time
from pathlib import Path


def host() -> dict:
    """The interpreter, the machine, its load while measuring and the day."""
    return {
        "python": platform.python_version(),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores",
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "date": time.strftime("%Y-%m-%d"),
    }


def emit(result: dict, out: str | None) -> None:
    """Print the result as JSON; also write it to `out` when given."""
    text = json.dumps(result, indent=2)
    print(text)
    if out:
        Path(out).write_text(text + "\n")
