"""What a rehearsal measures in every rank, whatever the trainer (docs/rehearsal.md).

A rehearsal puts this folder first on the ranks' PYTHONPATH, so Python imports this module at
start-up in every process the launcher starts. It never imports `registry`, and imports nothing
itself: it waits for the trainer to import torch. Where RECIPE_REHEARSAL_DIR is set it
  - times every optimizer step through torch's global optimizer-step hook, registered the moment
    torch.optim.optimizer is imported (one call per update, with accumulation too; the optimizers
    under DeepSpeed and FSDP are torch optimizers), after waiting for the GPU, so that a step's time
    is its work and not its launch;
  - splits each step's GPU memory at the same hook and its pre-step twin: the peak allocated from
    the last update to this one's start (forward and backward, and what a backend does to the
    gradients before the torch optimizer runs), what is allocated as the optimizer starts, and the
    peak inside the update; the estimate's two phases, measured (torch's peak counter is reset at
    each hook, the run's peak kept here);
  - after every step and at exit writes RECIPE_REHEARSAL_DIR/rank-<RANK>-<pid>.json: the step end
    times, the peak memory torch allocated and reserved on the rank's GPU, the phases, and the
    process's peak resident memory (after every step too, because a trainer may leave with
    os._exit, which runs no exit handler).
With RECIPE_REHEARSAL_INIT=1 it also wraps accelerate's Accelerator.prepare: before the trainer's
model is prepared, every weight matrix (a floating parameter of two or more dimensions) that is
exactly zero is drawn from a normal of standard deviation 0.02 instead. Libraries zero some
matrices at initialisation because a checkpoint overwrites them (transformers' Gemma 3 zeroes its
multimodal projector, so every image token enters the backbone as a zero row); with random
weights that leaves rows no checkpoint has, and an RMS norm's backward multiplies the gradient at
a zero row by 1/sqrt(eps) once per norm until bf16 overflows (docs/rehearsal.md, A gradient that is
not finite). The record names the matrices drawn.

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
_PREPARE = "accelerate.accelerator"
_INIT_STD = 0.02  # transformers' initializer_range for Gemma, SigLIP and most models it builds
_ends = []
_drawn = []
_phases = []  # per update: [forward/backward peak, allocated entering the update, update peak] in bytes
_peak = {"allocated": 0, "reserved": 0}  # the run's, across the resets


def _on_gpu(torch) -> bool:
    return torch.cuda.is_available() and torch.cuda.is_initialized()


def _take_peak(torch) -> int:
    """The peak allocated since the last take, folded into the run's; the counter starts again."""
    allocated = torch.cuda.max_memory_allocated()
    _peak["allocated"] = max(_peak["allocated"], allocated)
    _peak["reserved"] = max(_peak["reserved"], torch.cuda.max_memory_reserved())
    torch.cuda.reset_peak_memory_stats()
    return allocated


def _before_step(optimizer, args, kwargs):
    torch = sys.modules["torch"]
    if _on_gpu(torch):
        _phases.append([_take_peak(torch), torch.cuda.memory_allocated(), None])


def _on_step(optimizer, args, kwargs):
    torch = sys.modules["torch"]
    if _on_gpu(torch):
        torch.cuda.synchronize()
        if _phases and _phases[-1][2] is None:
            _phases[-1][2] = _take_peak(torch)
    _ends.append(time.perf_counter())
    _write()


def _hook_steps(module):
    module.register_optimizer_step_pre_hook(_before_step)
    module.register_optimizer_step_post_hook(_on_step)


def _draw_zero_matrices(model):
    torch = sys.modules["torch"]
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.is_floating_point() and p.dim() >= 2 and p.numel() and not bool(p.any()):
                p.normal_(0.0, _INIT_STD)
                _drawn.append(name)


def _hook_prepare(module):
    prepare = module.Accelerator.prepare

    def prepare_drawn(self, *args, **kwargs):
        torch = sys.modules["torch"]
        for arg in args:
            if isinstance(arg, torch.nn.Module):
                _draw_zero_matrices(arg)
        return prepare(self, *args, **kwargs)

    module.Accelerator.prepare = prepare_drawn


class _AfterImport(importlib.abc.MetaPathFinder):
    """Runs `then(module)` right after the module `name` runs; finds nothing itself."""

    def __init__(self, name, then):
        self.name, self.then = name, then

    def find_spec(self, name, path=None, target=None):
        if name != self.name:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.loader is not None and hasattr(spec.loader, "exec_module"):
            run, then = spec.loader.exec_module, self.then

            def exec_module(module):
                run(module)
                then(module)

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
        "drawn_zero_matrices": _drawn,
        "max_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
    }
    if _on_gpu(torch):
        record.update(
            device=torch.cuda.get_device_name(),
            peak_allocated_bytes=max(_peak["allocated"], torch.cuda.max_memory_allocated()),
            peak_reserved_bytes=max(_peak["reserved"], torch.cuda.max_memory_reserved()),
            phases=_phases,
        )
    path = os.path.join(_OUT, f"rank-{record['rank']}-{record['pid']}.json")
    try:
        with open(path + ".tmp", "w") as f:
            json.dump(record, f)
        os.replace(path + ".tmp", path)
    except OSError:
        pass  # the run folder went away: the rehearsal says that no rank reported


if _OUT:
    sys.meta_path.insert(0, _AfterImport(_HOOKED, _hook_steps))
    if os.environ.get("RECIPE_REHEARSAL_INIT") == "1":
        sys.meta_path.insert(0, _AfterImport(_PREPARE, _hook_prepare))
    atexit.register(_write)

# the environment's own sitecustomize, which this module's name hides
_here = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.machinery.PathFinder.find_spec(
    "sitecustomize", [p for p in sys.path if os.path.abspath(p or ".") != _here]
)
if _spec is not None and _spec.loader is not None:
    _spec.loader.exec_module(importlib.util.module_from_spec(_spec))
