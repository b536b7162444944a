"""What a Python interpreter says about itself: its version, the versions of the named packages
and the CUDA release its torch was built for, all read from package metadata and files, nothing
imported. Standard library only: besides being imported, this file's text is run as it stands
(`python -c`) by a trainer's own interpreter (registry/run/environment.py), which may be another
Python (OpenTau wants 3.10) without the registry.
"""

import json
import os
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
        return _torch_cuda_at(metadata.distribution("torch").locate_file("torch/version.py"))
    except metadata.PackageNotFoundError:
        return None


def _torch_cuda_at(path):
    try:
        with open(path, encoding="utf-8") as f:
            return cuda_in(f.read())
    except OSError as e:
        return f"unknown (torch/version.py: {e.strerror or e})"


def cuda_in(text):
    """The `cuda` that torch/version.py's text assigns: a release, or None (a CPU build)."""
    found = _CUDA.search(text)
    if not found:
        return "unknown (torch/version.py names no cuda)"
    value = found.group(1)
    return None if value == "None" else value.strip("'\"")


def _normal(name):
    return re.sub(r"[-_.]+", "_", name).lower()


def _installed(wanted):
    """{normalised name: (version, dist-info folder)} for the wanted names, read straight from the
    `NAME-VERSION.dist-info/METADATA` headers on sys.path, first entry first, as importlib.metadata
    finds them, without importing it (and the email parser it reads METADATA with): a launch asks
    before its first rank starts. Names not found here (.egg-info, a zip) are left to it."""
    found = {}
    for entry in sys.path:
        try:
            names = os.listdir(entry or ".")
        except OSError:
            continue
        for folder in names:
            if folder.endswith(".dist-info"):
                key, metadata = _normal(folder[: -len(".dist-info")].rpartition("-")[0]), "METADATA"
            elif folder.endswith(".egg-info"):  # NAME-VERSION[-pyX.Y].egg-info, a folder or the file itself
                key, metadata = _normal(folder.split("-")[0]), "PKG-INFO"
            else:
                continue
            if key not in wanted or key in found:
                continue
            path = os.path.join(entry or ".", folder)
            headers = _headers(os.path.join(path, metadata) if os.path.isdir(path) else path)
            if headers.get("version"):  # found by its folder's name, as importlib.metadata finds it
                found[key] = (headers["version"], path)
    return found


def _complete():
    """Whether a scan of sys.path's folders sees every distribution: not where an entry is a zip
    or an egg file, which only importlib.metadata reads."""
    return not any(entry and os.path.isfile(entry) for entry in sys.path)


def _headers(path):
    """Name and Version of a METADATA file (RFC 822 headers, up to the first blank line)."""
    out = {}
    try:
        with open(path, encoding="utf-8") as f:
            for line in f:
                if not line.strip():
                    break
                key, sep, value = line.partition(":")
                if sep and key.lower() in ("name", "version"):
                    out.setdefault(key.lower(), value.strip())
    except (OSError, UnicodeDecodeError):
        return {}
    return out


def report(names):
    """{"python": "3.11.9", "packages": {name: version or None}, "torch_cuda": "12.4" or None}."""
    wanted = {_normal(n) for n in (*names, "torch")}
    fast = _installed(wanted)
    packages = {name: fast[_normal(name)][0] if _normal(name) in fast else None for name in names}
    if not _complete():
        import importlib.metadata as metadata

        packages = {name: _version(metadata, name) for name in names}
        torch_cuda = _torch_cuda(metadata)
    elif "torch" not in fast:
        torch_cuda = None
    else:
        torch_cuda = _torch_cuda_at(os.path.join(os.path.dirname(fast["torch"][1]), "torch", "version.py"))
    return {"python": sys.version.split()[0], "packages": {n: packages[n] for n in names}, "torch_cuda": torch_cuda}


if __name__ == "__main__":
    print(json.dumps(report(sys.argv[1:])))
