"""Ask LeRobot itself whether it reads a `lerobot-train` command line the way the registry meant it.

The registry writes lerobot-train flags but cannot import LeRobot (Python >= 3.12, torch, its own
pins), so this script runs in LeRobot's environment instead and never imports `registry`. For each
case it sets sys.argv, parses through `lerobot.configs.parser.wrap()` over TrainPipelineConfig (the
decorator lerobot-train's `train()` uses, so `--policy.path`, `--config_path` and plugin flags take
the same route), then calls `cfg.validate()`, the first thing `train()` does with the config. No
dataset, policy, optimizer or Accelerator is built and the Hub is forced offline.

    python3 lerobot_check.py CASES.json [-o OUT.json] [--isolate]

CASES.json (or - for stdin): [{"id": "act-ddp", "args": ["--policy.type=act", "--dataset.repo_id=x/y", ...]}].
Without --output_dir or --config_path the checker adds --output_dir=<fresh temp path> (validate() rejects
an existing one); a case may add "inject_output_dir": false to stop that.
Output: a JSON list, one object per case, in order:
    id, ok, stage (where it stopped: "parse", "validate", "dispatch" for --job.target runs, "harness"
    when an --isolate child died, or "done"), error ("<Type>: <message>" or null; draccus and argparse
    errors come as "SystemExit: exit N: <what they printed>"),
    cause (the chained exception under error, e.g. a policy's __post_init__ ValueError),
    warnings (log records and Python warnings at WARNING and above), stderr, injected (flags the
    checker added), lerobot (the installed version) and config (draccus.encode of the config as
    validate left it, or as parsed when validate failed; null if parsing failed).
Exit status: 0 once every case has a result (whatever each one says), 2 for bad input, 3 when
LeRobot cannot be imported.
"""

# No `from __future__ import annotations` here: parser.wrap() reads the parameter's annotation as a
# class through inspect, and a string annotation would break it.

import argparse
import contextlib
import functools
import inspect
import io
import json
import logging
import os
import subprocess
import sys
import tempfile
import types
import warnings
from pathlib import Path
from typing import Any


def _offline_env() -> None:
    """The check must never reach a network; huggingface_hub reads these once, at import."""
    for name in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE"):
        os.environ[name] = "1"
    os.environ.setdefault("WANDB_MODE", "disabled")


def _load() -> dict[str, Any]:
    """Import LeRobot the way lerobot-train does, so every policy/env/optimizer choice is registered."""
    _offline_env()
    import draccus
    import lerobot
    from draccus.wrappers import docstring, field_wrapper

    # draccus builds each field's help text from its class's source on every parse (its own cache on
    # get_attribute_docstring is commented out): most of a parse's time, and help text only, so one
    # reading per field serves every case; what a command line parses to, or why it fails, is unchanged
    docstring.get_attribute_docstring = functools.cache(docstring.get_attribute_docstring)
    # Likewise each flag's argparse action: its constructor's signature, read again for every flag
    # of every parse (a third of a parse's time); the same action class has the same signature.
    field_wrapper.inspect = types.SimpleNamespace(getfullargspec=functools.cache(inspect.getfullargspec))
    from lerobot.configs import parser
    from lerobot.configs.policies import PreTrainedConfig
    from lerobot.configs.train import TrainPipelineConfig
    from lerobot.scripts import lerobot_train  # noqa: F401  (registers every choice lerobot-train sees)
    from lerobot.utils.import_utils import register_third_party_plugins

    register_third_party_plugins()  # what lerobot_train.main() does before train()

    @parser.wrap()
    def parse(cfg: TrainPipelineConfig) -> TrainPipelineConfig:
        return cfg

    return {
        "draccus": draccus,
        "parser": parser,
        "parse": parse,
        "policies": PreTrainedConfig,
        "version": lerobot.__version__,
    }


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def _cause(exc: BaseException) -> str | None:
    """draccus wraps __post_init__ errors in ParsingError; the real reason is further down the chain."""
    seen, parts, inner = {id(exc)}, [], exc.__cause__ or exc.__context__
    while isinstance(inner, Exception) and id(inner) not in seen:
        seen.add(id(inner))
        parts.append(_describe(inner))
        inner = inner.__cause__
    return " <- ".join(parts) or None


def _exit_message(code: Any, stderr: str) -> str:
    """argparse and parser.wrap() report by printing then exiting; keep the lines that say why."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    start = max((i for i, line in enumerate(lines) if "error:" in line), default=max(len(lines) - 1, 0))
    return f"SystemExit: exit {code}: {' '.join(lines[start:])}".rstrip()


def _policy_cause(lr: dict[str, Any]) -> str | None:
    """Why a policy config refused its flags: draccus's union decoding keeps only "Couldn't instantiate".

    Re-decodes the --policy.* flags (read with LeRobot's own helpers) straight into the chosen class,
    as lerobot does for --policy.path, so that the __post_init__ error comes back with its message.
    """
    parser = lr["parser"]
    choice = parser.get_type_arg("policy")
    if not choice:
        return None
    try:
        cls = lr["policies"].get_choice_class(choice)
        lr["draccus"].parse(cls, args=parser.get_cli_overrides("policy") or [])
    except SystemExit:
        return None
    except Exception as exc:
        return _cause(exc) or _describe(exc)
    return None


def _jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))


class _Records(logging.Handler):
    """Keeps what LeRobot logs while parsing (device fall-backs, deactivated AMP, video backend)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(f"{record.levelname} {record.name}: {record.getMessage()}")


def _has_flag(args: list[str], name: str) -> bool:
    return any(a == f"--{name}" or a.startswith(f"--{name}=") for a in args)


def check_case(lr: dict[str, Any], case: dict[str, Any], scratch: Path) -> dict[str, Any]:
    """One case: parse as lerobot-train would, then validate; report instead of raising."""
    args = [str(a) for a in case.get("args", [])]
    injected: list[str] = []
    if case.get("inject_output_dir", True) and not any(_has_flag(args, f) for f in ("output_dir", "config_path")):
        # validate() refuses an existing output_dir unless resuming, so give it a fresh path (never made).
        # A --config_path brings its own output_dir, which a resume must keep.
        injected.append(f"--output_dir={scratch / 'out'}")
    argv = ["lerobot-train", *args, *injected]
    result: dict[str, Any] = {
        "id": case.get("id"),
        "ok": False,
        "stage": "parse",
        "error": None,
        "cause": None,
        "warnings": [],
        "stderr": "",
        "injected": injected,
        "lerobot": lr["version"],
        "config": None,
    }
    # parser.wrap() keeps `path` fields read from a --config_path file in module globals; start clean.
    for name in ("_config_path_args", "_config_yaml_overrides"):
        store = getattr(lr["parser"], name, None)
        if isinstance(store, dict):
            store.clear()

    records, root = _Records(), logging.getLogger()
    old_level, old_argv, old_handlers, stderr = root.level, sys.argv, root.handlers[:], io.StringIO()
    root.handlers[:] = [records]  # the case's records go to its result, not to our stderr
    root.setLevel(min(old_level or logging.WARNING, logging.WARNING))
    cfg = None
    try:
        # validate() re-reads sys.argv (--policy.path, --config_path, --output_dir), so keep it set.
        sys.argv = argv
        with warnings.catch_warnings(record=True) as caught, contextlib.redirect_stderr(stderr):
            warnings.simplefilter("always")
            try:
                cfg = lr["parse"]()
                if cfg.job.is_remote:
                    # train() hands a remote job to HF Jobs before it validates anything locally.
                    result["stage"], result["error"] = "dispatch", "RemoteJob: --job.target sends the run to HF Jobs"
                else:
                    result["stage"] = "validate"
                    cfg.validate()
                    result["stage"], result["ok"] = "done", True
            except SystemExit as exc:
                result["error"] = _exit_message(exc.code, stderr.getvalue())
            except Exception as exc:
                result["error"], result["cause"] = _describe(exc), _cause(exc)
            if result["error"] and "Couldn't instantiate class" in result["error"]:
                result["cause"] = _policy_cause(lr)
        result["warnings"] = records.lines + [f"{w.category.__name__}: {w.message}" for w in caught]
    finally:
        sys.argv = old_argv
        root.handlers[:] = old_handlers
        root.setLevel(old_level)
    result["stderr"] = stderr.getvalue()[-4000:]
    if cfg is not None:
        try:
            result["config"] = _jsonable(lr["draccus"].encode(cfg))
        except Exception as exc:  # report, don't lose the verdict
            result["warnings"].append(f"config not encodable: {_describe(exc)}")
    return result


def _read_cases(source: str) -> list[dict[str, Any]]:
    text = sys.stdin.read() if source == "-" else Path(source).read_text()
    cases = json.loads(text)
    if not isinstance(cases, list) or not all(isinstance(c, dict) and isinstance(c.get("args"), list) for c in cases):
        raise ValueError('expected a JSON list of {"id": ..., "args": [...]}')
    return cases


def _isolated(cases: list[dict[str, Any]], scratch: Path) -> list[dict[str, Any]]:
    """One fresh interpreter per case, for when a case may leave state behind in LeRobot's modules."""
    results = []
    for index, case in enumerate(cases):
        single, out = scratch / f"case{index}.json", scratch / f"result{index}.json"
        single.write_text(json.dumps([case]))
        proc = subprocess.run(
            [sys.executable, __file__, str(single), "-o", str(out)], capture_output=True, text=True, check=False
        )
        if proc.returncode == 0 and out.exists():
            results.extend(json.loads(out.read_text()))
        else:
            failed = {"id": case.get("id"), "ok": False, "stage": "harness", "cause": None, "config": None}
            failed.update(error=f"checker exited {proc.returncode}", stderr=proc.stderr[-4000:], warnings=[])
            failed.update(injected=[], lerobot=None)
            results.append(failed)
    return results


def main(argv: list[str] | None = None) -> int:
    cli = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    cli.add_argument("cases", help="JSON file of cases, or - for stdin")
    cli.add_argument("-o", "--output", help="write results here instead of stdout")
    cli.add_argument("--isolate", action="store_true", help="run each case in its own interpreter")
    opts = cli.parse_args(argv)
    try:
        cases = _read_cases(opts.cases)
    except (OSError, ValueError) as exc:
        print(f"lerobot_check: {_describe(exc)}", file=sys.stderr)
        return 2

    with tempfile.TemporaryDirectory(prefix="lerobot_check_") as tmp:
        scratch = Path(tmp)
        if opts.isolate:
            results = _isolated(cases, scratch)
        else:
            try:
                lr = _load()
            except Exception as exc:
                print(f"lerobot_check: cannot import LeRobot: {_describe(exc)}", file=sys.stderr)
                return 3
            results = [check_case(lr, case, scratch / f"case{i}") for i, case in enumerate(cases)]

    text = json.dumps(results, indent=2)
    if opts.output:
        Path(opts.output).write_text(text + "\n")
    else:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
