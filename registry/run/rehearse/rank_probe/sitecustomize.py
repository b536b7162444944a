"""What a rehearsal measures in every rank, whatever the trainer (docs/rehearsal.md).

A rehearsal puts this folder first on the ranks' PYTHONPATH, so Python imports this module at
start-up in every process the launcher starts. It never imports `registry`, and imports nothing
itself: it waits for the trainer to import torch. Where RECIPE_REHEARSAL_DIR is set it
  - times every optimizer step through torch's global optimizer-step hook, registered the moment
    torch.optim.optimizer is imported (one call per update, with accumulation too; the optimizers
    under DeepSpeed and FSDP are torch optimizers), after waiting for the GPU, so that a step's time
    is its work and not its launch;
  - after every step and at exit writes RECIPE_REHEARSAL_DIR/rank-<RANK>-<pid>.json: the step end
    times, the peak memory torch allocated and reserved on the rank's GPU, and the process's peak
    resident memory (after every step too, because a trainer may leave with os._exit, which runs
    no exit handler).
Then it runs the sitecustomize it shadows, if the environment has one.
"""

import atexit
import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import resource
import sys
import time

_OUT = os.environ.get("RECIPE_REHEARSAL_DIR")
_HOOKED = "torch.optim.optimizer"
_ends = []


def _on_step(optimizer, args, kwargs):
    torch = sys.modules["torch"]
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()
    _ends.append(time.perf_counter())
    _write()


class _WhenTorchArrives(importlib.abc.MetaPathFinder):
    """Registers the hook right after torch.optim.optimizer runs; finds nothing itself."""

    def find_spec(self, name, path=None, target=None):
        if name != _HOOKED:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.loader is not None and hasattr(spec.loader, "exec_module"):
            run = spec.loader.exec_module

            def exec_module(module):
                run(module)
                module.register_optimizer_step_post_hook(_on_step)

            spec.loader.exec_module = exec_module
        return spec


def _write():
    torch = sys.modules.get("torch")
    if torch is None:
        return  # a launcher or a helper process: nothing trained here
    record = {
        "rank": int(os.environ.get("RANK", os.environ.get("LOCAL_RANK", "0"))),
        "pid": os.getpid(),
        "step_ends": _ends,
        "max_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
    }
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        record.update(
            device=torch.cuda.get_device_name(),
            peak_allocated_bytes=torch.cuda.max_memory_allocated(),
            peak_reserved_bytes=torch.cuda.max_memory_reserved(),
        )
    path = os.path.join(_OUT, f"rank-{record['rank']}-{record['pid']}.json")
    try:
        with open(path + ".tmp", "w") as f:
            json.dump(record, f)
        os.replace(path + ".tmp", path)
    except OSError:
        pass  # the run folder went away: the rehearsal says that no rank reported


if _OUT:
    if _HOOKED in sys.modules:  # imported before site ran (never in a fresh interpreter)
        sys.modules[_HOOKED].register_optimizer_step_post_hook(_on_step)
    else:
        sys.meta_path.insert(0, _WhenTorchArrives())
    atexit.register(_write)

# the environment's own sitecustomize, which this module's name hides
_here = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.machinery.PathFinder.find_spec(
    "sitecustomize", [p for p in sys.path if os.path.abspath(p or ".") != _here]
)
if _spec is not None and _spec.loader is not None:
    _spec.loader.exec_module(importlib.util.module_from_spec(_spec))
