"""Check generated OpenTau configs with OpenTau's own code, many in one process.

    python opentau_check.py CASES.json        (CASES.json: a file, or - for standard input)

Runs in the venv that opentau_env.sh builds, never in the project's: it imports opentau, not
registry. CASES.json lists cases:

    [{"id": "...", "config": "/abs/opentau.json", "accelerate_config": "/abs/accelerate.yaml" or null,
      "args": ["--extra=opentau-train", "--cli=args"]}]

Each case goes through what `opentau-train --accelerate-config=Y --config_path=J ARGS` does before it
builds a dataset or a model:
 1. parse: a function wrapped in `opentau.configs.parser.wrap()`, the decorator of train(), with
    sys.argv = [prog, --config_path=J, *ARGS]; the dataclasses' __post_init__ run here;
 2. validate: `cfg.validate()`, the first statement of train();
 3. backend (only with an accelerate yaml): the `if` guards that train() runs between building its
    Accelerator and building the policy, read from the installed opentau/scripts/train.py and run
    against a stand-in accelerator: its distributed type and its DeepSpeedPlugin come from the
    ACCELERATE_* variables that accelerate's own launch code derives from the yaml.
Each case runs in an empty temporary working directory (a relative output_dir must not exist).

Prints one JSON line per case on standard output:
    {"id", "ok", "stage": "parse"|"validate"|"backend"|null, "error": "Type: message"|null,
     "warnings": [...], "backend": "DEEPSPEED ZeRO-2"|...|null}
`warnings` holds what OpenTau logged or warned during the case, e.g. "Overriding policy.chunk_size=10
with action_chunk=50 ...": OpenTau changed the config without failing. Exit 0: every case ok;
1: some case failed; 2: the check itself could not run.
"""

import ast
import builtins
import contextlib
import functools
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import inspect
import io
import json
import logging
import os
import shutil
import sys
import tempfile
import warnings
from pathlib import Path
from types import SimpleNamespace

# Offline before anything imports huggingface_hub: nothing here may download.
os.environ.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", HF_DATASETS_OFFLINE="1", WANDB_MODE="disabled")


# --- torchvision ---------------------------------------------------------------------------
class TorchvisionStandIn(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Import-only torchvision, used when none is installed. OpenTau's config modules import it
    (datasets/utils.py, transforms.py, video_utils.py, envs/utils.py) but only use it to build
    datasets, and PyPI's wheels do not load next to the CPU torch. Every name but the
    `transforms.v2.Transform` base class is a class that raises when built. Having no
    distribution metadata, it reads as absent to transformers."""

    MODULES = ("torchvision", "torchvision.io", "torchvision.transforms", "torchvision.transforms.v2")
    MODULES += ("torchvision.transforms.v2.functional",)

    def find_spec(self, name, path=None, target=None):
        if name in self.MODULES:
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
        return None

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        name = module.__name__

        def missing(attr):
            if attr.startswith("__"):
                raise AttributeError(attr)
            if f"{name}.{attr}" in self.MODULES:  # `from torchvision.transforms import v2`
                return importlib.import_module(f"{name}.{attr}")

            def unavailable(*args, **kwargs):
                raise RuntimeError(f"{name}.{attr}: torchvision is not installed (opentau_check.py stand-in)")

            return type(attr, (), {"__init__": unavailable})

        module.__getattr__ = missing
        if name == "torchvision.transforms.v2":
            import torch

            module.Transform = type("Transform", (torch.nn.Module,), {})


# --- OpenTau's train() ---------------------------------------------------------------------
def register_policy_types() -> None:
    """Import the `configuration_*` modules that opentau/policies/factory.py imports, as the train
    script does through factory.py (`import opentau.configs.train` alone misses pi06), without the
    modeling code and its training-only dependencies."""
    import opentau

    source = Path(opentau.__file__).parent / "policies" / "factory.py"
    for node in ast.walk(ast.parse(source.read_text())):
        module = (node.module or "") if isinstance(node, ast.ImportFrom) else ""
        if module.startswith("opentau.policies.") and module.rsplit(".", 1)[-1].startswith("configuration_"):
            importlib.import_module(module)


class BackendGuards:
    """The `if` statements of train() between `_sync_deepspeed_gradient_accumulation_steps(...)`
    (the Accelerator is ready) and `make_policy(...)` that raise or log a warning, compiled from
    the installed opentau/scripts/train.py with the module-level helpers they call."""

    def __init__(self):
        import accelerate
        import opentau

        self.path = str(Path(opentau.__file__).parent / "scripts" / "train.py")
        source = Path(self.path).read_text()
        tree = ast.parse(source)
        functions = {node.name: node for node in tree.body if isinstance(node, ast.FunctionDef)}
        if "train" not in functions:
            raise RuntimeError(f"{self.path}: no train() (OpenTau changed: update opentau_check.py)")
        self.guards, started = [], False
        for statement in functions["train"].body:
            text = ast.unparse(statement)
            if "_sync_deepspeed_gradient_accumulation_steps(" in text:
                started = True
            elif "make_policy(" in text:
                break
            elif started and isinstance(statement, ast.If) and _raises_or_warns(statement):
                self.guards.append(statement)
        if not self.guards:
            raise RuntimeError(f"{self.path}: no backend guards in train() (OpenTau changed: update opentau_check.py)")
        # the guards see what train() sees, less what needs a real run
        self.namespace = {"accelerate": accelerate, "logging": logging, "os": os}
        self.namespace["make_subgoal_generator"] = lambda cfg: None  # builds the eval planner: not a check
        helpers: dict[str, ast.FunctionDef] = {}  # the module's functions the guards call, and those they call
        todo = list(self.guards)
        while todo:
            for n in ast.walk(todo.pop()):
                if isinstance(n, ast.Name) and n.id in functions and n.id not in helpers:
                    todo.append(helpers.setdefault(n.id, functions[n.id]))
        exec(compile(ast.Module(list(helpers.values()), []), self.path, "exec"), self.namespace)
        names = [n for node in (*self.guards, *helpers.values()) for n in ast.walk(node)]
        known = {n.id for n in names if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
        known |= {n.arg for n in names if isinstance(n, ast.arg)} | {"cfg", "accelerator"} | set(dir(builtins))
        unknown = {n.id for n in names if isinstance(n, ast.Name)} - known - self.namespace.keys()
        if unknown:
            raise RuntimeError(
                f"{self.path}: the guards use {sorted(unknown)} (OpenTau changed: update opentau_check.py)"
            )
        self.code = compile(ast.Module(self.guards, []), self.path, "exec")  # keeps train.py's line numbers

    def run(self, cfg, accelerator) -> None:
        exec(self.code, {**self.namespace, "cfg": cfg, "accelerator": accelerator})


def _raises_or_warns(node: ast.AST) -> bool:
    for n in ast.walk(node):
        if isinstance(n, ast.Raise):
            return True
        if isinstance(n, ast.Call) and ast.unparse(n.func) in ("logging.warning", "logger.warning", "warn"):
            return True
    return False


def launch_env(yaml_path: Path) -> tuple[dict[str, str], str]:
    """The ACCELERATE_* variables `accelerate launch --config_file YAML` exports to the script, and the
    launcher it picks, from accelerate's own launch code. Relative paths in the yaml are taken from
    its folder: launch.sh runs from there."""
    from accelerate.commands.launch import _validate_launch_command, launch_command_parser
    from accelerate.utils.launch import prepare_deepspeed_cmd_env, prepare_multi_gpu_env

    here = os.getcwd()
    os.chdir(yaml_path.parent)
    try:
        args = launch_command_parser().parse_args(["--config_file", str(yaml_path), "train.py"])
        args, defaults, mixed_precision_from_config = _validate_launch_command(args)
        # as accelerate.commands.launch.launch_command picks its launcher
        if args.use_deepspeed:
            fields = list(defaults.deepspeed_config) if defaults else []
            fields += ["mixed_precision"] if mixed_precision_from_config else []
            args.deepspeed_fields_from_accelerate_config = ",".join(fields)
            env, launcher = prepare_deepspeed_cmd_env(args)[1], "deepspeed"
        elif args.use_fsdp or args.multi_gpu:
            env, launcher = prepare_multi_gpu_env(args), "multi_gpu"
        else:  # a MULTI_CPU yaml too: without an mpirun hostfile, one process
            env, launcher = {}, "simple"
    finally:
        os.chdir(here)
    env = {k: v for k, v in env.items() if k.startswith("ACCELERATE_")}
    if "ACCELERATE_DEEPSPEED_CONFIG_FILE" in env:
        env["ACCELERATE_DEEPSPEED_CONFIG_FILE"] = str(yaml_path.parent / env["ACCELERATE_DEEPSPEED_CONFIG_FILE"])
    return env, launcher


def stand_in_accelerator(yaml_path: Path) -> SimpleNamespace:
    """What the guards read of train()'s Accelerator: the distributed type that accelerate's state
    derives in the launched process on a GPU host, and a real DeepSpeedPlugin built from the launch
    environment."""
    import accelerate
    from accelerate.utils import DeepSpeedPlugin

    with quiet():  # accelerate's notes on what it filled in for `accelerate launch`: not OpenTau's
        env, launcher = launch_env(yaml_path)
    kind = accelerate.DistributedType
    if env.get("ACCELERATE_USE_DEEPSPEED") == "true":
        distributed_type = kind.DEEPSPEED
    elif env.get("ACCELERATE_USE_FSDP") == "true":
        distributed_type = kind.FSDP
    else:  # torchrun's WORLD_SIZE > 1 on CUDA, or a single process
        distributed_type = kind.MULTI_GPU if launcher == "multi_gpu" else kind.NO
    plugin = None
    if distributed_type == kind.DEEPSPEED:
        saved = dict(os.environ)
        os.environ.update(env)
        try:
            with quiet():
                plugin = DeepSpeedPlugin()  # reads ACCELERATE_DEEPSPEED_* as in the launched process
        finally:
            os.environ.clear()
            os.environ.update(saved)
    return SimpleNamespace(distributed_type=distributed_type, deepspeed_plugin=plugin, is_main_process=True)


@contextlib.contextmanager
def quiet():
    logging.disable(logging.WARNING)
    try:
        with contextlib.redirect_stderr(io.StringIO()), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        logging.disable(logging.NOTSET)


def describe(accelerator) -> str:
    plugin = accelerator.deepspeed_plugin
    stage = plugin.hf_ds_config.config.get("zero_optimization", {}).get("stage") if plugin else None
    return str(accelerator.distributed_type).rsplit(".", 1)[-1] + (f" ZeRO-{stage}" if stage is not None else "")


# --- one case ------------------------------------------------------------------------------
class Collect(logging.Handler):
    def __init__(self):
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record):
        self.messages.append(f"{record.levelname}: {record.getMessage()}")


def error_text(e: BaseException) -> str:
    """OpenTau's own message: the innermost exception that draccus wrapped, on one line. A bare
    KeyError (an unknown `type`) says less than the error around it."""
    chain = [e]
    while (e := e.__cause__ or (None if e.__suppress_context__ else e.__context__)) and e not in chain:
        chain.append(e)
    if len(chain) > 1 and isinstance(chain[-1], KeyError):
        chain.pop()
    e = chain[-1]
    return f"{type(e).__name__}: {' '.join(str(e).split()) or repr(e)}"


def check(case: dict, parse, guards: BackendGuards) -> dict:
    result = {"id": case.get("id"), "ok": False, "stage": None, "error": None, "warnings": [], "backend": None}
    config = Path(case["config"]).resolve()
    yaml_path = Path(case["accelerate_config"]).resolve() if case.get("accelerate_config") else None
    workdir = tempfile.mkdtemp(prefix="opentau-check-")
    here, argv, root = os.getcwd(), sys.argv, logging.getLogger()
    collect, stderr = Collect(), io.StringIO()
    root.addHandler(collect)
    level = root.level
    root.setLevel(min(level, logging.WARNING))
    os.chdir(workdir)
    sys.argv = ["opentau-train", f"--config_path={config}", *case.get("args", [])]
    try:
        with warnings.catch_warnings(record=True) as warned, contextlib.redirect_stderr(stderr):
            warnings.simplefilter("always")
            try:
                result["stage"] = "parse"
                cfg = parse()
                result["stage"] = "validate"
                cfg.validate()
                if yaml_path:
                    result["stage"] = "backend"
                    accelerator = stand_in_accelerator(yaml_path)
                    result["backend"] = describe(accelerator)
                    guards.run(cfg, accelerator)
                result.update(ok=True, stage=None)
            except (Exception, SystemExit) as e:
                result["error"] = error_text(e)
                if isinstance(e, SystemExit):  # argparse (inside draccus) printed its usage and the reason
                    reasons = [line for line in stderr.getvalue().splitlines() if ": error: " in line]
                    result["error"] = (
                        "ArgumentError: " + reasons[-1].split(": error: ", 1)[1] if reasons else result["error"]
                    )
    finally:
        os.chdir(here)
        sys.argv = argv
        root.removeHandler(collect)
        root.setLevel(level)
        shutil.rmtree(workdir, ignore_errors=True)
    result["warnings"] = [
        *collect.messages,
        *(f"{w.category.__name__}: {w.message}" for w in warned),
        *(line for line in stderr.getvalue().splitlines() if line.startswith("WARNING: ")),  # OpenTau's warn()
    ]
    return result


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    # JSON lines go to the original stdout; anything the libraries print goes to stderr
    out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    if importlib.util.find_spec("torchvision") is None:
        sys.meta_path.insert(0, TorchvisionStandIn())
    try:
        from draccus.wrappers import docstring, field_wrapper
        from opentau.configs import parser
        from opentau.configs.train import TrainPipelineConfig
        from opentau.datasets import video_utils

        # draccus reads every field's help text from the source of every policy class on each parse
        # (0.6 s a config); the text cannot change within a process and parsing never reads it.
        docstring.get_attribute_docstring = functools.cache(docstring.get_attribute_docstring)
        # and the signature of each flag's argparse action, read again for every flag of every parse
        # (a third of a parse's time): one action class has one signature.
        field_wrapper.inspect = SimpleNamespace(getfullargspec=functools.cache(inspect.getfullargspec))

        register_policy_types()
        guards = BackendGuards()
        # Probe the host's video decoder now: the first config parsed would otherwise carry its
        # once-per-process "torchcodec is not installed ..." warning, which says nothing about the config.
        getattr(video_utils, "get_safe_default_codec", lambda: None)()
    except Exception as e:
        print(f"opentau_check.py: cannot load OpenTau: {type(e).__name__}: {e}", file=sys.stderr)
        return 2

    @parser.wrap()
    def parse(cfg: TrainPipelineConfig) -> TrainPipelineConfig:  # train()'s decorator, train()'s argument
        return cfg

    # read only now: a caller that pipes the cases in renders them while OpenTau imports
    cases = json.loads(sys.stdin.read() if sys.argv[1] == "-" else Path(sys.argv[1]).read_text())
    failed = 0
    for case in cases:
        result = check(case, parse, guards)
        failed += not result["ok"]
        print(json.dumps(result), file=out, flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
