"""What accelerate's and DeepSpeed's own code say about each configuration in tests/data/corpus.

Why: the registry imports teams' existing accelerate yamls, DeepSpeed JSONs and trainer configs and
validates them. To test that validation differentially (no false alarm where the libraries accept,
every conflict they raise caught) we need ground truth that does not come from the registry. This
module produces it by running the libraries' own code paths on CPU, without GPUs or network, and
never imports `registry`.

Stages, in the order `accelerate launch` and the training process meet them:

- ``load``: ``accelerate.commands.config.config_args.load_config_from_file`` (unknown keys, missing
  ``distributed_type``).
- ``launch``: ``launch_command_parser()`` and ``launch_command()`` with the entry's ``launch_args``.
  ``launch_command`` runs ``_validate_launch_command`` and picks the launcher; the launchers are
  replaced by stand-ins that call accelerate's own ``prepare_deepspeed_cmd_env`` /
  ``prepare_multi_gpu_env`` / ``prepare_simple_launcher_cmd_env`` and keep the environment instead
  of starting processes. ``is_port_in_use`` answers False so the verdict does not depend on this
  machine's ports.
- ``plugin``: in that environment, what ``Accelerator()`` builds: ``DeepSpeedPlugin()`` then
  ``set_mixed_precision`` and ``select`` (which builds transformers' ``HfDeepSpeedConfig``), or
  ``FullyShardedDataParallelPlugin()`` then ``set_mixed_precision``; ``ParallelismConfig()`` and its
  ``_validate_accelerator`` against a stand-in accelerator when the yaml has a parallelism_config.
  ``sync_module_states`` asks for the current CUDA device; that is answered with device 0.
- ``prepare`` (DeepSpeed): accelerate's own ``Accelerator._prepare_deepspeed`` on a stand-in
  accelerator (processes, accumulation, parallelism config) with a tiny model whose
  ``config.hidden_size`` is 1024, stopped where it calls ``deepspeed.initialize``; its "auto"
  filling, optimizer/scheduler checks and train_batch_size arithmetic run as written. The training
  code is emulated: OpenTau and LeRobot pass a torch AdamW, a LambdaLR and a dataloader of their
  per-process batch (OpenTau ``dataloader_batch_size``, LeRobot ``--batch_size``, default 8) and
  ``Accelerator(gradient_accumulation_steps=...)`` gets OpenTau's value (else 1), which
  ``ACCELERATE_GRADIENT_ACCUMULATION_STEPS`` overrides as in accelerate. Entries without a trainer
  come from HF-Trainer projects (TRL, axolotl, LLaMA-Factory, transformers): transformers' own
  ``propagate_args_to_deepspeed``, ``trainer_config_finalize`` and ``deepspeed_optim_sched`` run with
  TrainingArguments defaults, except that the micro batch, accumulation and clipping agree with the
  JSON wherever it fixes them (a fixed ``train_batch_size`` with an "auto" micro batch gives
  ``train_batch_size // (accumulation x processes)`` when that divides); mismatches between the JSON
  and those nominal arguments are cleared, since only the JSON is under test. Offloaded torch
  optimizers are not converted to DeepSpeedCPUAdam (that would compile an op); DeepSpeed's
  tensor-parallel device mesh and Ulysses registration are stand-ins.
- ``deepspeed``: ``deepspeed.runtime.config.DeepSpeedConfig(config, mpu)`` on the dict accelerate
  handed to ``deepspeed.initialize`` (the call ``initialize`` makes), with ``deepspeed.comm``'s
  ``get_world_size`` answering the process count and the stand-in mpu the sequence-parallel size,
  so the batch assertion ("train_batch_size is not equal to micro_batch_per_gpu *
  gradient_acc_step * world_size"), alias/deprecation checks and ZeRO checks run.

Everything runs in one process; each entry runs in its folder with the accelerate environment
cleared, and the environment, cwd and transformers' global DeepSpeed config are restored after it.

``read`` holds what the library objects ended up with, for comparison with an imported-then-resolved
config. Templated values (``${NUM_GPUS}``) are run as they are: their verdict is accelerate's.

    python tests/corpus_verdicts.py [ID...]      one JSON line per entry
    python tests/corpus_verdicts.py --write      store every verdict in tests/data/corpus/verdicts.json
"""

from __future__ import annotations

import contextlib
import copy
import importlib
import json
import logging
import os
import shlex
import sys
import time
import warnings
from pathlib import Path
from types import SimpleNamespace
from unittest import mock

import yaml

CORPUS = Path(__file__).resolve().parent / "data" / "corpus"
NOMINAL_HIDDEN_SIZE = 1024
ENV_PREFIXES = ("ACCELERATE_", "FSDP_", "PARALLELISM_CONFIG_")


_MODULES = {
    "launch_cli": "accelerate.commands.launch",
    "acc_dataclasses": "accelerate.utils.dataclasses",
    "acc_launch": "accelerate.utils.launch",
    "accelerator_module": "accelerate.accelerator",
    "deepspeed": "deepspeed",
    "ds_comm": "deepspeed.comm",
    "torch": "torch",
    "hf_ds": "transformers.integrations.deepspeed",
}
_NAMES = {
    "Accelerator": "accelerate",
    "load_config_from_file": "accelerate.commands.config.config_args",
    "ParallelismConfig": "accelerate.parallelism_config",
    "DeepSpeedPlugin": "accelerate.utils",
    "DynamoBackend": "accelerate.utils",
    "FullyShardedDataParallelPlugin": "accelerate.utils",
    "parse_choice_from_env": "accelerate.utils.environment",
    "DeepSpeedConfig": "deepspeed.runtime.config",
    "UlyssesSPAttentionHF": "deepspeed.runtime.sequence_parallel.ulysses_sp",
    "TrainingArguments": "transformers",
    "unset_hf_deepspeed_config": "transformers.integrations",
}


def _import_libraries() -> SimpleNamespace:
    """accelerate, DeepSpeed and transformers, imported once, without their start-up chatter."""
    logging.getLogger("DeepSpeed").setLevel(logging.ERROR)
    with contextlib.redirect_stdout(sys.stderr), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lib = {key: importlib.import_module(module) for key, module in _MODULES.items()}
        lib.update({name: getattr(importlib.import_module(module), name) for name, module in _NAMES.items()})
    logging.getLogger("DeepSpeed").setLevel(logging.ERROR)
    return SimpleNamespace(**lib)


LIB = _import_libraries()


class Rejected(Exception):
    """Carries the stage at which a library raised."""

    def __init__(self, stage: str, error: BaseException):
        super().__init__(stage)
        self.stage, self.error = stage, error


class _Collect(logging.Handler):
    def __init__(self):
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record):
        self.messages.append(record.getMessage())


def _jsonable(value):
    """Library objects as plain JSON values (enums by name, dtypes and functions by name)."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if value == value and abs(value) != float("inf") else str(value)
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)):
        return [_jsonable(v) for v in value]
    if hasattr(value, "name") and hasattr(value, "value"):  # enum
        return value.name
    if callable(value) and hasattr(value, "__name__"):
        return value.__name__
    return str(value)


@contextlib.contextmanager
def _sandbox(entry_dir: Path, world_size: dict):
    """cwd = the entry folder, a clean accelerate environment, launchers that only capture, and the
    two device questions answered; everything restored afterwards."""
    saved_env, saved_cwd = dict(os.environ), os.getcwd()
    for key in list(os.environ):
        if key.startswith(ENV_PREFIXES):
            del os.environ[key]
    captured: dict = {}

    def deepspeed_launcher(args):
        cmd, env = LIB.acc_launch.prepare_deepspeed_cmd_env(args)
        captured.update(launcher="deepspeed", env=env, args=args, cmd=cmd)

    def multi_gpu_launcher(args):
        captured.update(launcher="multi_gpu", env=LIB.acc_launch.prepare_multi_gpu_env(args), args=args)

    def simple_launcher(args):
        cmd, env = LIB.acc_launch.prepare_simple_launcher_cmd_env(args)
        captured.update(launcher="simple", env=env, args=args, cmd=cmd)

    def other_launcher(name):
        return lambda *a: captured.update(launcher=name, env=dict(os.environ), args=a[-1])

    collect = _Collect()
    acc_logger = logging.getLogger("accelerate")
    patches = [
        mock.patch.object(LIB.launch_cli, "deepspeed_launcher", deepspeed_launcher),
        mock.patch.object(LIB.launch_cli, "multi_gpu_launcher", multi_gpu_launcher),
        mock.patch.object(LIB.launch_cli, "simple_launcher", simple_launcher),
        mock.patch.object(LIB.launch_cli, "tpu_launcher", other_launcher("tpu")),
        mock.patch.object(LIB.launch_cli, "tpu_pod_launcher", other_launcher("tpu_pod")),
        mock.patch.object(LIB.launch_cli, "sagemaker_launcher", other_launcher("sagemaker")),
        mock.patch.object(LIB.launch_cli, "default_config_file", str(entry_dir / "__no_default_config__")),
        mock.patch.object(LIB.acc_launch, "is_port_in_use", lambda port: False),
        mock.patch("torch.cuda.current_device", lambda: 0),
        mock.patch.object(LIB.ds_comm, "get_world_size", lambda *a, **k: world_size["n"]),
        mock.patch.object(LIB.ds_comm, "get_rank", lambda *a, **k: 0),
    ]
    # accelerate asks for a device when sync_module_states is set: up to 1.15 through
    # is_cuda_available, from 1.16 through get_torch_accelerator_backend
    if hasattr(LIB.acc_dataclasses, "is_cuda_available"):
        patches.append(mock.patch.object(LIB.acc_dataclasses, "is_cuda_available", lambda: True))
    if hasattr(LIB.acc_dataclasses, "get_torch_accelerator_backend"):
        cuda = ("cuda", LIB.torch.cuda)
        patches.append(mock.patch.object(LIB.acc_dataclasses, "get_torch_accelerator_backend", lambda *a, **k: cuda))
    with contextlib.ExitStack() as stack:
        for p in patches:
            stack.enter_context(p)
        stack.enter_context(contextlib.redirect_stdout(sys.stderr))
        caught = stack.enter_context(warnings.catch_warnings(record=True))
        warnings.simplefilter("always")
        acc_logger.addHandler(collect)
        os.chdir(entry_dir)
        try:
            yield captured, collect.messages, caught
        finally:
            acc_logger.removeHandler(collect)
            os.chdir(saved_cwd)
            os.environ.clear()
            os.environ.update(saved_env)
            LIB.unset_hf_deepspeed_config()


def _stage(name: str, fn, *args, **kwargs):
    try:
        return fn(*args, **kwargs)
    except Exception as exc:  # the library's verdict, whatever its type
        raise Rejected(name, exc) from exc


def _trainer_batch(entry_dir: Path, entry: dict) -> tuple[int | None, int]:
    """(per-process micro batch, Accelerator gradient_accumulation_steps) the trainer would use."""
    if entry.get("trainer") == "opentau":
        cfg = json.loads((entry_dir / entry["trainer_config"]).read_text())
        return cfg.get("dataloader_batch_size"), int(cfg.get("gradient_accumulation_steps", 1))
    if entry.get("trainer") == "lerobot":
        for arg in shlex.split(entry.get("args", "")):
            if arg.startswith("--batch_size="):
                return int(arg.split("=", 1)[1]), 1
        return 8, 1  # lerobot-train's default batch_size
    return None, 1


def _read_config(cfg) -> dict:
    keep = ("compute_environment", "distributed_type", "mixed_precision", "num_processes", "num_machines")
    return {k: _jsonable(getattr(cfg, k, None)) for k in keep}


def _read_launch(args, captured: dict) -> dict:
    env = captured.get("env") or {}
    return {
        "launcher": captured.get("launcher"),
        "num_processes": _jsonable(args.num_processes),
        "num_machines": _jsonable(args.num_machines),
        "machine_rank": _jsonable(args.machine_rank),
        "mixed_precision": _jsonable(args.mixed_precision),
        "gpu_ids": _jsonable(args.gpu_ids),
        "env": {k: env[k] for k in sorted(env) if k.startswith(ENV_PREFIXES) and os.environ.get(k) != env[k]},
    }


def _read_deepspeed_plugin(plugin) -> dict:
    ds = plugin.hf_ds_config
    return {
        "config_file": os.environ.get("ACCELERATE_DEEPSPEED_CONFIG_FILE"),
        "zero_stage": _jsonable(plugin.zero_stage),
        "offload_optimizer_device": _jsonable(plugin.offload_optimizer_device),
        "offload_param_device": _jsonable(plugin.offload_param_device),
        "zero3_init_flag": _jsonable(plugin.zero3_init_flag),
        "zero3_save_16bit_model": _jsonable(plugin.zero3_save_16bit_model),
        "gradient_accumulation_steps": _jsonable(plugin.gradient_accumulation_steps),
        "gradient_clipping": _jsonable(plugin.gradient_clipping),
        "fp16": _jsonable(ds.get_value("fp16.enabled")),
        "bf16": _jsonable(ds.get_value("bf16.enabled")),
        "is_zero3": ds.is_zero3(),
        "is_offload": ds.is_offload(),
    }


def _read_deepspeed_config(c) -> dict:
    zero = c.zero_config
    return {
        "world_size": _jsonable(c.world_size),
        "train_batch_size": c.train_batch_size,
        "train_micro_batch_size_per_gpu": c.train_micro_batch_size_per_gpu,
        "gradient_accumulation_steps": c.gradient_accumulation_steps,
        "gradient_clipping": _jsonable(c.gradient_clipping),
        "zero_enabled": c.zero_enabled,
        "zero_stage": _jsonable(c.zero_optimization_stage),
        "offload_optimizer_device": _jsonable(zero.offload_optimizer.device) if zero.offload_optimizer else None,
        "offload_param_device": _jsonable(zero.offload_param.device) if zero.offload_param else None,
        "gather_16bit_weights_on_model_save": zero.gather_16bit_weights_on_model_save,
        "fp16": c.float16_config.enabled,
        "bf16": c.bfloat16_config.enabled,
    }


def _read_fsdp(p) -> dict:
    mp = p.mixed_precision_policy
    offload = p.cpu_offload
    return {
        "fsdp_version": p.fsdp_version,
        "sharding_strategy": _jsonable(p.sharding_strategy),
        "reshard_after_forward": _jsonable(p.reshard_after_forward),
        "auto_wrap_policy": _jsonable(p.auto_wrap_policy),
        "transformer_cls_names_to_wrap": _jsonable(p.transformer_cls_names_to_wrap),
        "min_num_params": _jsonable(p.min_num_params),
        "state_dict_type": _jsonable(p.state_dict_type),
        "cpu_offload": bool(getattr(offload, "offload_params", type(offload).__name__ == "CPUOffloadPolicy")),
        "backward_prefetch": _jsonable(p.backward_prefetch),
        "forward_prefetch": _jsonable(p.forward_prefetch),
        "use_orig_params": _jsonable(p.use_orig_params),
        "sync_module_states": _jsonable(p.sync_module_states),
        "cpu_ram_efficient_loading": _jsonable(p.cpu_ram_efficient_loading),
        "activation_checkpointing": _jsonable(p.activation_checkpointing),
        "param_dtype": _jsonable(getattr(mp, "param_dtype", None)),
    }


def _parallelism(read: dict, distributed_type: str, num_processes: int, fsdp_plugin=None):
    """ParallelismConfig() from the launcher's environment, checked by its own _validate_accelerator."""
    if os.environ.get("ACCELERATE_USE_PARALLELISM_CONFIG", "false").lower() != "true":
        return None
    pc = _stage("plugin", LIB.ParallelismConfig)
    stand_in = SimpleNamespace(
        multi_device=num_processes > 1,
        num_processes=num_processes,
        is_fsdp2=fsdp_plugin is not None and fsdp_plugin.fsdp_version == 2,
        distributed_type=distributed_type,
        is_main_process=True,
    )
    _stage("plugin", pc._validate_accelerator, stand_in)
    read["parallelism"] = {k: getattr(pc, f"{k}_size") for k in ("dp_replicate", "dp_shard", "tp", "cp", "sp")}
    read["parallelism"]["sp_backend"] = pc.sp_backend
    return pc


class _Handoff(Exception):
    """Raised by the stand-in for deepspeed.initialize: accelerate has finished preparing."""

    def __init__(self, kwargs):
        super().__init__("deepspeed.initialize")
        self.kwargs = kwargs


class _TinyModel(LIB.torch.nn.Module):
    """What accelerate and transformers look at: parameters and config.hidden_size."""

    def __init__(self):
        super().__init__()
        self.layer = LIB.torch.nn.Linear(4, 4)
        self.config = SimpleNamespace(hidden_size=NOMINAL_HIDDEN_SIZE)


def _training_args(plugin, micro, num_processes: int, mixed_precision: str):
    """TrainingArguments as the HF Trainer would hold them, defaults taken from transformers, batch and
    accumulation agreeing with the DeepSpeed JSON where it fixes them."""
    fields = LIB.TrainingArguments.__dataclass_fields__
    value = {
        k: fields[k].default for k in ("learning_rate", "adam_beta1", "adam_beta2", "adam_epsilon", "weight_decay")
    }
    ds_gas = plugin.get_value("gradient_accumulation_steps")
    ds_micro = plugin.get_value("train_micro_batch_size_per_gpu")
    gas = ds_gas if isinstance(ds_gas, int) else fields["gradient_accumulation_steps"].default
    if isinstance(ds_micro, int):
        micro = ds_micro
    elif micro is None:
        fixed = plugin.get_value("train_batch_size")
        if isinstance(fixed, int) and fixed % (gas * num_processes) == 0:
            micro = fixed // (gas * num_processes)
        else:
            micro = fields["per_device_train_batch_size"].default
    clip = plugin.get_value("gradient_clipping")
    return SimpleNamespace(
        **value,
        world_size=num_processes,
        per_device_train_batch_size=micro,
        gradient_accumulation_steps=gas,
        max_grad_norm=clip if isinstance(clip, (int, float)) else fields["max_grad_norm"].default,
        save_on_each_node=False,
        fp16=mixed_precision == "fp16",
        fp16_full_eval=False,
        bf16=mixed_precision == "bf16",
        bf16_full_eval=False,
        get_warmup_steps=lambda steps: 0,
    )


def _deepspeed(entry_dir: Path, entry: dict, read: dict, num_processes: int, world: dict):
    torch = LIB.torch
    plugin = _stage("plugin", LIB.DeepSpeedPlugin)
    mixed_precision = os.environ.get("ACCELERATE_MIXED_PRECISION", "no")
    _stage("plugin", plugin.set_mixed_precision, mixed_precision)
    _stage("plugin", plugin.select, _from_accelerator_state=True)
    read["deepspeed"] = _read_deepspeed_plugin(plugin)
    pc = _parallelism(read, "DEEPSPEED", num_processes)
    sp_size = pc.sp_size if pc is not None and pc.sp_backend == "deepspeed" else 1

    micro, code_gas = _trainer_batch(entry_dir, entry)
    model = _TinyModel()
    if entry.get("trainer", "none") == "none":
        # The HF Trainer: propagate_args_to_deepspeed, trainer_config_finalize, deepspeed_optim_sched.
        args = _training_args(plugin, micro, num_processes, mixed_precision)
        code_gas, micro = args.gradient_accumulation_steps, args.per_device_train_batch_size
        _stage(
            "prepare",
            LIB.hf_ds.propagate_args_to_deepspeed,
            SimpleNamespace(state=SimpleNamespace(deepspeed_plugin=plugin)),
            args,
        )
        hf_config = plugin.hf_ds_config
        hf_config.mismatches.clear()  # nominal TrainingArguments: only the JSON is under test
        _stage("prepare", hf_config.trainer_config_finalize, args, model, 1000)
        trainer = SimpleNamespace(create_optimizer=lambda: torch.optim.AdamW(model.parameters()))
        params = list(model.parameters())
        optimizer, scheduler = _stage(
            "prepare", LIB.hf_ds.deepspeed_optim_sched, trainer, hf_config, args, 1000, params
        )
        objects = [model, optimizer] + ([scheduler] if scheduler is not None else [])
    else:  # OpenTau and LeRobot prepare torch objects and their dataloader
        optimizer = torch.optim.AdamW(model.parameters())
        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)
        loader = torch.utils.data.DataLoader(list(range(4 * micro)), batch_size=micro)
        objects = [model, optimizer, loader, scheduler]
    # Accelerator(gradient_accumulation_steps=...) lets the launcher's environment override the code
    gas = int(LIB.parse_choice_from_env("ACCELERATE_GRADIENT_ACCUMULATION_STEPS", code_gas))
    stand_in = SimpleNamespace(
        fp8_backend=None,
        deepspeed_plugin=plugin,
        parallelism_config=pc,
        split_batches=False,
        num_processes=num_processes,
        gradient_accumulation_steps=gas,
        device=SimpleNamespace(type="cuda"),
        step_scheduler_with_optimizer=False,
        state=SimpleNamespace(dynamo_plugin=SimpleNamespace(backend=LIB.DynamoBackend.NO)),
        _prepare_one=lambda obj, first_pass=False: obj,
    )

    def handoff(**kwargs):
        raise _Handoff(kwargs)

    mpu = SimpleNamespace(get_sequence_parallel_world_size=lambda: sp_size)
    with (
        mock.patch.object(LIB.deepspeed, "initialize", handoff),
        mock.patch.object(LIB.accelerator_module, "map_pytorch_optim_to_deepspeed", lambda opt: opt),
        mock.patch("torch.distributed.device_mesh.init_device_mesh", lambda *a, **k: None),
        mock.patch.object(LIB.UlyssesSPAttentionHF, "register_with_transformers", lambda **k: mpu),
    ):
        try:
            _stage("prepare", LIB.Accelerator._prepare_deepspeed, stand_in, *objects)
            raise Rejected("prepare", RuntimeError("accelerate did not reach deepspeed.initialize"))
        except Rejected as rejected:
            if not isinstance(rejected.error, _Handoff):
                raise
            kwargs = rejected.error.kwargs
    config = kwargs["config_params"]
    read["batch"] = {
        "accelerator_gradient_accumulation_steps": gas,
        "train_micro_batch_size_per_gpu": _jsonable(config.get("train_micro_batch_size_per_gpu")),
        "train_batch_size": _jsonable(config.get("train_batch_size")),
        "gradient_accumulation_steps": _jsonable(config.get("gradient_accumulation_steps")),
        "left_auto": sorted(_auto_keys(config)),
    }
    world["n"] = num_processes
    ds = _stage("deepspeed", LIB.DeepSpeedConfig, copy.deepcopy(config), kwargs.get("mpu"))
    read["deepspeed_engine"] = _read_deepspeed_config(ds)


def _auto_keys(config: dict, prefix: str = ""):
    for key, value in config.items():
        if isinstance(value, dict):
            yield from _auto_keys(value, f"{prefix}{key}.")
        elif value == "auto":
            yield f"{prefix}{key}"


def _fsdp(read: dict, num_processes: int):
    plugin = _stage("plugin", LIB.FullyShardedDataParallelPlugin)
    mixed_precision = os.environ.get("ACCELERATE_MIXED_PRECISION", "no")
    if mixed_precision != "no":  # AcceleratorState hands the precision to the plugin
        _stage("plugin", plugin.set_mixed_precision, mixed_precision)
    read["fsdp"] = _read_fsdp(plugin)
    _parallelism(read, "FSDP", num_processes, plugin)


def _run(entry_dir: Path, entry: dict, read: dict, captured: dict, world: dict):
    config_file = entry["files"][0]
    cfg = _stage("load", LIB.load_config_from_file, config_file)
    read["config"] = _read_config(cfg)

    parser = LIB.launch_cli.launch_command_parser()
    argv = [*shlex.split(entry.get("launch_args") or ""), "--config_file", config_file, "train.py"]
    args = _stage("launch", parser.parse_args, argv)
    _stage("launch", LIB.launch_cli.launch_command, args)
    args = captured.get("args", args)
    read.update(_read_launch(args, captured))
    num_processes = _stage("launch", int, args.num_processes)

    env = captured.get("env") or {}
    os.environ.update({k: v for k, v in env.items() if os.environ.get(k) != v})
    if captured["launcher"] == "deepspeed":
        _deepspeed(entry_dir, entry, read, num_processes, world)
    elif os.environ.get("ACCELERATE_USE_FSDP", "false").lower() == "true":
        _fsdp(read, num_processes)
    else:
        _parallelism(read, "MULTI_GPU" if num_processes > 1 else "NO", num_processes)


def verdict(entry_dir, manifest_entry: dict) -> dict:
    """accelerate's and DeepSpeed's verdict on one corpus entry (see the module docstring)."""
    entry_dir = Path(entry_dir).resolve()
    read: dict = {}
    world = {"n": 1}
    result = {"accepted": True, "stage": "done", "error": None, "read": read}
    with _sandbox(entry_dir, world) as (captured, logged, caught):
        try:
            _run(entry_dir, manifest_entry, read, captured, world)
        except Rejected as rejected:
            message = str(rejected.error).replace(str(entry_dir), "<entry>")
            result.update(accepted=False, stage=rejected.stage, error=f"{type(rejected.error).__name__}: {message}")
        said = [*logged, *(str(w.message) for w in caught)]
    read["warnings"] = sorted({m.replace(str(entry_dir), "<entry>") for m in said})
    return result


def load_manifest() -> list[dict]:
    return yaml.safe_load((CORPUS / "manifest.yaml").read_text())["entries"]


def all_verdicts(ids=None) -> dict:
    entries = {e["id"]: e for e in load_manifest()}
    unknown = sorted(set(ids or ()) - set(entries))
    if unknown:
        raise SystemExit(f"unknown corpus ids: {', '.join(unknown)}")
    return {i: verdict(CORPUS / i, entries[i]) for i in sorted(ids or entries)}


def main(argv: list[str]) -> int:
    if argv[:1] == ["--spec"]:
        # other folders, e.g. what the registry resolved from an entry: [{"key", "dir", "entry"}] -> {key: verdict}
        spec = json.loads(Path(argv[1]).read_text())
        print(json.dumps({item["key"]: verdict(item["dir"], item["entry"]) for item in spec}, sort_keys=True))
        return 0
    write = "--write" in argv
    ids = [a for a in argv if a != "--write"]
    start = time.perf_counter()
    verdicts = all_verdicts(ids)
    if write:  # the named entries' verdicts replace theirs; the others' are kept
        path = CORPUS / "verdicts.json"
        kept = json.loads(path.read_text()) if ids and path.exists() else {}
        path.write_text(json.dumps({**kept, **verdicts}, indent=1, sort_keys=True) + "\n")
    else:
        for i, v in verdicts.items():
            print(json.dumps({"id": i, **v}, sort_keys=True))
    accepted = sum(v["accepted"] for v in verdicts.values())
    print(
        f"{len(verdicts)} entries: {accepted} accepted, {len(verdicts) - accepted} rejected "
        f"({time.perf_counter() - start:.1f} s)",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
