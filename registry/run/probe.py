"""What a Python interpreter says about itself: its version, the versions of the named packages
and the CUDA release its torch was built for, all read from package metadata and files, nothing
imported. Standard library only: besides being imported, this file's text is run as it stands
(`python -c`) by a trainer's own interpreter (registry/run/environment.py), which may be another
Python (OpenTau wants 3.10) without the registry.
"""

import json
import re
import sys

# torch/version.py, as torch's build writes it: `cuda: Optional[str] = '12.4'` (or `= None`)
_CUDA = re.compile(r"^cuda\s*(?::[^=]*)?=\s*(.+?)\s*$", re.M)


def _version(metadata, name):
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def _torch_cuda(metadata):
    """torch.version.cuda without importing torch (seconds): the string its version.py holds;
    None for a CPU build, "unknown (...)" where the file cannot be read."""
    try:
        path = metadata.distribution("torch").locate_file("torch/version.py")
        with open(path, encoding="utf-8") as f:
            return cuda_in(f.read())
    except metadata.PackageNotFoundError:
        return None
    except OSError as e:
        return f"unknown (torch/version.py: {e.strerror or e})"


def cuda_in(text):
    """The `cuda` that torch/version.py's text assigns: a release, or None (a CPU build)."""
    found = _CUDA.search(text)
    if not found:
        return "unknown (torch/version.py names no cuda)"
    value = found.group(1)
    return None if value == "None" else value.strip("'\"")


def report(names):
    """{"python": "3.11.9", "packages": {name: version or None}, "torch_cuda": "12.4" or None}."""
    import importlib.metadata as metadata

    return {
        "python": sys.version.split()[0],
        "packages": {name: _version(metadata, name) for name in names},
        "torch_cuda": _torch_cuda(metadata),
    }


if __name__ == "__main__":
    print(json.dumps(report(sys.argv[1:])))
