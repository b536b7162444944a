"""The fields of every policy config a trainer registers, printed as JSON: run as a script by the
trainer's own interpreter (OpenTau's Python 3.10, LeRobot's 3.12), which has no registry, so
standard library only besides the trainer itself (registry/validate/upstream.py reads the output).

    python policy_fields.py opentau|lerobot
"""

import contextlib
import dataclasses
import importlib
import json
import sys

PACKAGES = {"opentau": "opentau", "lerobot": "lerobot"}


def main(trainer):
    package = PACKAGES[trainer]
    with contextlib.redirect_stdout(sys.stderr):  # import-time chatter is no part of the answer
        configs = importlib.import_module(package + ".configs.policies")
        importlib.import_module(package + ".policies")  # registers every policy type
        choices = configs.PreTrainedConfig.get_known_choices()
        version = importlib.import_module("importlib.metadata").version(package)
    # keys the loader strips before parsing (OpenTau: removed and deprecated fields): taken, unread
    stripped = set(getattr(configs, "_STRIPPED_FIELDS", ()))
    types = {
        name: sorted({f.name for f in dataclasses.fields(cls) if f.init} | stripped)
        for name, cls in sorted(choices.items())
    }
    print(json.dumps({"version": version, "types": types, "stripped": sorted(stripped)}))


if __name__ == "__main__":
    main(sys.argv[1])
