"""What a Python interpreter says about itself: its version, the versions of the named packages,
what an extra of a package (`lerobot[diffusion]`) requires and whether it is there, the CUDA
release its torch was built for and the NCCL beside it, all read from package metadata and files,
nothing imported. Standard library only: besides being imported, this file's text is run as it stands
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


# `name[extras] (spec) ; marker`, as a wheel's METADATA writes each Requires-Dist line
_REQUIREMENT = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[([^\]]*)\])?\s*\(?([^;()]*)\)?\s*(?:;\s*(.*))?$")
_EXTRA = re.compile(r"""extra\s*==\s*["']([^"']+)["']""")


def _applies(marker, extra):
    """Whether a requirement's marker holds for this extra on this interpreter. A marker that is only
    `extra == "x"` is read here; others need `packaging` (None: it cannot be told, left out)."""
    if not marker:
        return False
    found = _EXTRA.search(marker)
    if not found or _normal(found.group(1)) != _normal(extra):
        return False
    if not _EXTRA.sub("", marker).strip(" ()andor"):
        return True
    try:
        from packaging.markers import Marker

        return Marker(marker).evaluate({"extra": extra})
    except Exception:
        return None


def _satisfies(version, spec):
    """True or False where `packaging` can compare them, None where it cannot."""
    if not spec.strip():
        return True
    try:
        from packaging.specifiers import SpecifierSet

        return SpecifierSet(spec).contains(version, prereleases=True)
    except Exception:
        return None


def extra_requirements(metadata, package, extra, seen=None):
    """[{"name", "spec", "version", "ok"}] for what `package[extra]` requires, following the extras
    it names of itself (lerobot[diffusion] -> lerobot[diffusers-dep] -> diffusers); None where
    the package is absent or declares no such extra."""
    seen = set() if seen is None else seen
    try:
        dist = metadata.distribution(package)
    except metadata.PackageNotFoundError:
        return None
    declared = {_normal(e) for e in dist.metadata.get_all("Provides-Extra") or []}
    if _normal(extra) not in declared:
        return None
    seen.add(_normal(extra))
    out = []
    for line in dist.requires or []:
        found = _REQUIREMENT.match(line)
        if not found or not _applies(found.group(4), extra):
            continue
        name, extras, spec = found.group(1), found.group(2), found.group(3).strip()
        if _normal(name) == _normal(package):  # an extra of its own: what that one requires
            for sub in (extras or "").split(","):
                if sub.strip() and _normal(sub) not in seen:
                    out += extra_requirements(metadata, package, sub.strip(), seen) or []
            continue
        version = _version(metadata, name)
        out.append({"name": name, "spec": spec, "version": version, "ok": version and _satisfies(version, spec)})
    return out


def _nccl(metadata):
    """The NCCL torch would load: the nvidia-nccl wheel's version, "bundled" where torch's lib/
    holds a libnccl, None where neither is found."""
    for name in ("nvidia-nccl-cu13", "nvidia-nccl-cu12", "nvidia-nccl-cu11"):
        version = _version(metadata, name)
        if version:
            return version
    try:
        lib = metadata.distribution("torch").locate_file("torch/lib")
        return "bundled" if any(p.name.startswith("libnccl") for p in lib.iterdir()) else None
    except (metadata.PackageNotFoundError, OSError):
        return None


def _bundled_nccl(torch_parent):
    """ "bundled" where torch's lib/ holds a libnccl, else None."""
    try:
        return (
            "bundled"
            if any(n.startswith("libnccl") for n in os.listdir(os.path.join(torch_parent, "torch", "lib")))
            else None
        )
    except OSError:
        return None


NCCL_WHEELS = ("nvidia-nccl-cu13", "nvidia-nccl-cu12", "nvidia-nccl-cu11")


def report(names):
    """{"python": "3.11.9", "packages": {name: version or None}, "torch_cuda": "12.4" or None,
    "nccl": "2.21.5" or "bundled" or None, "extras": {"pkg[extra]": [...] or None}}. A name with
    brackets asks what that extra requires (extra_requirements) besides the package's version."""
    extras = [n for n in names if "[" in n]
    plain = list(dict.fromkeys(n.split("[")[0] for n in names))
    out = {"python": sys.version.split()[0]}
    if _complete():
        fast = _installed({_normal(n) for n in (*plain, "torch", *NCCL_WHEELS)})
        out["packages"] = {n: fast[_normal(n)][0] if _normal(n) in fast else None for n in plain}
        torch_parent = os.path.dirname(fast["torch"][1]) if "torch" in fast else None
        out["torch_cuda"] = _torch_cuda_at(os.path.join(torch_parent, "torch", "version.py")) if torch_parent else None
        wheel = next((fast[_normal(n)][0] for n in NCCL_WHEELS if _normal(n) in fast), None)
        out["nccl"] = wheel or (_bundled_nccl(torch_parent) if torch_parent else None)
    else:
        import importlib.metadata as metadata

        out["packages"] = {name: _version(metadata, name) for name in plain}
        out["torch_cuda"] = _torch_cuda(metadata)
        out["nccl"] = _nccl(metadata)
    if extras:
        import importlib.metadata as metadata

        out["extras"] = {n: extra_requirements(metadata, n.split("[")[0], n.split("[")[1].rstrip("]")) for n in extras}
    return out


if __name__ == "__main__":
    print(json.dumps(report(sys.argv[1:])))
