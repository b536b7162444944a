"""Check generated sky.yaml tasks with SkyPilot's own task loader, many in one process.

    python skypilot_check.py CASES.json        (CASES.json: a file, or - for standard input)

Runs in the venv that skypilot_env.sh builds, never in the project's: it imports sky, not registry.
CASES.json lists cases: [{"id": "...", "folder": "/abs/run/folder"}], each folder holding sky.yaml
and the files it runs.

Each case goes through what `sky launch sky.yaml` does before it asks a cloud for anything, from the
case's folder (a relative workdir is taken from where sky launch runs):
 1. load: `sky.Task.from_yaml`: SkyPilot's task schema (sky/utils/schemas.py get_task_schema(),
    through common_utils.validate_schema), then the Task and its Resources built from it;
 2. validate: the parts of `Task.validate()` that stay offline: the name, the run command, the
    workdir and file mounts. Resources.validate() is left out: it downloads SkyPilot's catalog.
Accelerator names are not checked against a catalog by either step offline, so each is looked up
in SkyPilot's list of GPU names (sky.catalog.get_common_gpus()).

Nothing may reach the network: connections other than local sockets raise. HOME is a temporary
folder (SkyPilot writes ~/.sky).

Prints one JSON line per case on standard output:
    {"id", "ok", "stage": "load"|"validate"|"accelerator"|null, "error": "Type: message"|null,
     "num_nodes", "accelerators": {"H100": 8}|null, "cpus": "2+"|null, "workdir": "/abs"|null,
     "run": "..."|null}
Exit 0: every case ok; 1: some case failed; 2: the check itself could not run.
"""

import json
import os
import socket
import sys
import tempfile


def offline() -> None:
    real = socket.socket.connect

    def connect(self, address):
        if self.family in (socket.AF_INET, socket.AF_INET6):
            raise OSError(f"skypilot_check: no network (tried {address})")
        return real(self, address)

    socket.socket.connect = connect


def check(sky, common: set, case: dict) -> dict:
    result = {"id": case["id"], "ok": False, "stage": "load", "error": None}
    result.update(num_nodes=None, accelerators=None, cpus=None, workdir=None, run=None)
    os.chdir(case["folder"])
    try:
        task = sky.Task.from_yaml("sky.yaml")
        resources = list(task.resources)
        result.update(
            num_nodes=task.num_nodes,
            accelerators=resources[0].accelerators if len(resources) == 1 else "several",
            cpus=resources[0].cpus if len(resources) == 1 else "several",
            run=task.run,
        )
        result["stage"] = "validate"
        task.validate_name()
        task.validate_run()
        task.expand_and_validate_workdir()
        task.expand_and_validate_file_mounts()
        result["workdir"] = task.workdir
        result["stage"] = "accelerator"
        unknown = sorted(set(result["accelerators"] or ()) - common)
        if unknown:
            raise ValueError(f"{unknown} not among SkyPilot's GPU names {sorted(common)}")
    except Exception as e:
        result["error"] = f"{type(e).__name__}: {e}"
        return result
    result.update(ok=True, stage=None)
    return result


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    # JSON lines go to the original stdout; anything SkyPilot prints goes to stderr
    out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    home = tempfile.mkdtemp(prefix="skypilot-check-")
    os.environ.update(HOME=home, SKYPILOT_DISABLE_USAGE_COLLECTION="1")
    offline()
    try:
        import sky
        from sky import catalog

        common = set(catalog.get_common_gpus())
        with open(0 if sys.argv[1] == "-" else sys.argv[1]) as f:
            cases = json.load(f)
    except Exception as e:
        print(f"skypilot_check: cannot start: {type(e).__name__}: {e}", file=sys.stderr)
        return 2
    failed = False
    for case in cases:
        result = check(sky, common, case)
        failed |= not result["ok"]
        out.write(json.dumps(result) + "\n")
        out.flush()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
