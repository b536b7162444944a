"""Schemas generated from the libraries' own definitions (docs/rules.md, "Schemas from the
libraries"): the DeepSpeed JSON's blocks from DeepSpeed's pydantic config models, accelerate's yaml
keys from its ClusterConfig dataclass, the keys of policy.options from each OpenTau and LeRobot policy
config (read by the trainer's own interpreter: policy_fields.py). The output is data in schemas/, read by `validate` like any
other schema; this module imports the libraries and is run by hand when a pin moves, never by
`validate`:

    python -m registry.validate.upstream            write schemas/*.upstream.schema.json
    python -m registry.validate.upstream --check    exit 1 if they differ from what is committed

tests/test_upstream_schemas.py regenerates them and fails on drift, and checks the block schemas
against the models themselves, both ways."""

from __future__ import annotations

import dataclasses
import enum
import importlib
import json
import sys
import types
import typing
from pathlib import Path

from registry.files import SCHEMA_DIR

DEEPSPEED_FILE = SCHEMA_DIR / "deepspeed.upstream.schema.json"
ACCELERATE_FILE = SCHEMA_DIR / "accelerate.upstream.schema.json"
TRAINERS_FILE = SCHEMA_DIR / "trainers.upstream.schema.json"

# Each top-level key of the DeepSpeed JSON that DeepSpeed hands to a config model, and the model
# (read from deepspeed/runtime/config.py and the get_*_config functions it calls).
DEEPSPEED_BLOCKS = {
    "zero_optimization": "deepspeed.runtime.zero.config:DeepSpeedZeroConfig",
    "bf16": "deepspeed.runtime.precision_config:DeepSpeedBF16Config",
    "bfloat16": "deepspeed.runtime.precision_config:DeepSpeedBF16Config",  # its legacy name
    "fp16": "deepspeed.runtime.precision_config:DeepSpeedFP16Config",
    "comms_logger": "deepspeed.comm.config:CommsLoggerConfig",
    "compile": "deepspeed.compile.config:CompileConfig",
    "tensor_parallel": "deepspeed.runtime.tensor_parallel.config:TPTrainingConfig",
    "hybrid_engine": "deepspeed.runtime.config:HybridEngineConfig",
    "tensorboard": "deepspeed.monitor.config:TensorBoardConfig",
    "wandb": "deepspeed.monitor.config:WandbConfig",
    "csv_monitor": "deepspeed.monitor.config:CSVConfig",
    "comet": "deepspeed.monitor.config:CometConfig",
}
AUTO = {"const": "auto"}  # DeepSpeed's models drop "auto" values before validating (not strict)
# pydantic's lax mode, which DeepSpeed's models validate in: what each type also takes
# (https://docs.pydantic.dev/latest/concepts/conversion_table/)
_TRUTHY = ["0", "off", "f", "false", "n", "no", "1", "on", "t", "true", "y", "yes"]
LAX_BOOLEAN = {
    "x-expected": "a boolean",
    "anyOf": [
        {"type": "boolean"},
        {"type": "integer", "enum": [0, 1]},
        {"type": "string", "pattern": "^(?i:" + "|".join(_TRUTHY) + ")$"},
    ],
}
_INT_TEXT = r"^\s*[+-]?[0-9]+(_[0-9]+)*\s*$"
_NUMBER_TEXT = r"^\s*[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+)?\s*$"


def _model(path: str):
    module, _, name = path.partition(":")
    return getattr(importlib.import_module(module), name)


def field_schema(annotation, field=None) -> dict:
    """A JSON schema for one pydantic field as DeepSpeed's lax models read it: nested models
    inlined, enums by value, bounds from the field's constraints; types it cannot say are left open."""
    from pydantic import BaseModel

    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Annotated:
        return field_schema(args[0], field)
    if origin in (typing.Union, types.UnionType):
        options = [field_schema(a) for a in args]
        return {} if {} in options else {"anyOf": options}
    if origin is typing.Literal:
        return {"enum": list(args)}
    if isinstance(annotation, type):
        if issubclass(annotation, BaseModel):
            return {} if _rewrites_input(annotation) else model_schema(annotation)
        if issubclass(annotation, enum.Enum):
            values = [m.value for m in annotation]
            ints = [v for v in values if isinstance(v, int) and not isinstance(v, bool)]
            flags = [b for b in (False, True) if int(b) in ints]
            return {"enum": values + [str(v) for v in ints] + flags}  # lax: the number's text, a boolean
        if annotation is bool:
            return LAX_BOOLEAN
        if issubclass(annotation, int):
            return _lax(_bounded({"type": "integer"}, field), _INT_TEXT)
        if annotation is float:
            return _lax(_bounded({"type": "number"}, field), _NUMBER_TEXT)
        if annotation is str:
            return {"type": "string"}
        if annotation is type(None):
            return {"type": "null"}
    if origin in (list, tuple) or annotation in (list, tuple):
        return {"type": "array"}
    if origin is dict or annotation is dict:
        return {"type": "object"}
    return {}


def _lax(number: dict, text: str) -> dict:
    """A number as lax pydantic takes it: the number (an integer also as an integral float), a
    boolean within the bounds (False is 0, True 1), or its text (its bounds unchecked: a bound
    on a string would be a false alarm either way)."""
    bounds = {k: v for k, v in number.items() if k != "type"}
    options = [number]
    if number["type"] == "integer":
        options.append({"type": "number", "multipleOf": 1, **bounds})
    booleans = [b for b in (False, True) if _within(int(b), bounds)]
    if booleans:
        options.append({"type": "boolean", "enum": booleans})
    kind = "an integer" if number["type"] == "integer" else "a number"
    limits = [f"{_SAID[k]} {v:g}" for k, v in bounds.items()]
    expected = kind + (f" {' and '.join(limits)}" if limits else "")
    return {"x-expected": expected, "anyOf": [*options, {"type": "string", "pattern": text}]}


_SAID = {"minimum": ">=", "maximum": "<=", "exclusiveMinimum": ">", "exclusiveMaximum": "<"}


def _within(value: int, bounds: dict) -> bool:
    return (
        value >= bounds.get("minimum", value)
        and value <= bounds.get("maximum", value)
        and ("exclusiveMinimum" not in bounds or value > bounds["exclusiveMinimum"])
        and ("exclusiveMaximum" not in bounds or value < bounds["exclusiveMaximum"])
    )


def _bounded(schema: dict, field) -> dict:
    for constraint in getattr(field, "metadata", []) or []:
        for attr, key in (("ge", "minimum"), ("gt", "exclusiveMinimum"), ("le", "maximum"), ("lt", "exclusiveMaximum")):
            value = getattr(constraint, attr, None)
            if value is not None:
                schema[key] = value
    return schema


def model_schema(model) -> dict:
    """Every name the model takes (field names and aliases: DeepSpeed's models populate by name
    too), none other (extra="forbid"), "auto" allowed for each."""
    properties = {}
    rewritten = _rewritten_fields(model)
    for name, field in model.model_fields.items():
        schema = {} if name in rewritten else field_schema(field.annotation, field)
        extra = field.json_schema_extra if isinstance(field.json_schema_extra, dict) else {}
        if extra.get("deprecated"):
            schema = {**schema, "deprecated": True}
            if extra.get("new_param"):
                schema["x-replaced-by"] = extra["new_param"]
        # "auto" passes, anything else is the field's own (its message, not one about "auto")
        schema = {"if": AUTO, "else": schema} if schema else {}
        for key in {name, field.alias or name}:
            properties[key] = schema
    closed = model.model_config.get("extra") == "forbid"
    return {"type": "object", "properties": dict(sorted(properties.items())), "additionalProperties": not closed}


def _rewrites_input(model) -> bool:
    """A model whose "before" validator may turn any input into a valid one: left open."""
    decorators = model.__pydantic_decorators__
    return any(d.info.mode in ("before", "wrap") for d in decorators.model_validators.values())


def _rewritten_fields(model) -> set[str]:
    """Fields a "before" or "wrap" field validator sees first: their input is open too."""
    names = set()
    for d in model.__pydantic_decorators__.field_validators.values():
        if d.info.mode in ("before", "wrap", "plain"):
            names |= set(model.model_fields) if "*" in d.info.fields else set(d.info.fields)
    return names


def deepspeed_schema() -> dict:
    import deepspeed

    blocks = {key: model_schema(_model(path)) for key, path in DEEPSPEED_BLOCKS.items()}
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "DeepSpeed JSON blocks, as DeepSpeed's config models take them",
        "description": f"generated from DeepSpeed {deepspeed.__version__} by python -m registry.validate.upstream",
        "x-generated-from": {"deepspeed": deepspeed.__version__},
        "type": "object",
        "properties": {key: {"$ref": f"#/$defs/{key}"} for key in blocks},
        "$defs": blocks,
    }


def accelerate_schema() -> dict:
    """The keys accelerate's config loader takes: ClusterConfig's fields, and the legacy keys its
    process_config converts before it refuses unknown ones."""
    import accelerate
    from accelerate.commands.config.config_args import ClusterConfig

    fields = {f.name for f in dataclasses.fields(ClusterConfig)}
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "accelerate config yaml keys",
        "description": f"generated from accelerate {accelerate.__version__} by python -m registry.validate.upstream",
        "x-generated-from": {"accelerate": accelerate.__version__},
        "x-expected": f"a key accelerate {accelerate.__version__}'s config loader takes",
        "enum": sorted(fields | set(_converted_keys(ClusterConfig))),
    }


def _converted_keys(config_class) -> list[str]:
    """String keys process_config reads from the dict: the spellings it converts."""
    import ast
    import inspect
    import textwrap

    tree = ast.parse(textwrap.dedent(inspect.getsource(config_class.process_config)))
    return sorted(
        {
            n.value
            for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value.isidentifier()
        }
        & _literal_keys(tree)
    )


def _literal_keys(tree) -> set[str]:
    """Strings used as dict keys (`d["x"]`, `"x" in d`, `d.pop("x")`, `d.get("x")`)."""
    import ast

    found = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Subscript) and isinstance(n.slice, ast.Constant):
            found.add(n.slice.value)
        elif isinstance(n, ast.Compare) and isinstance(n.left, ast.Constant) and isinstance(n.ops[0], ast.In):
            found.add(n.left.value)
        elif isinstance(n, ast.Call) and getattr(n.func, "attr", "") in ("pop", "get") and n.args[:1]:
            found.add(getattr(n.args[0], "value", None))
    return {k for k in found if isinstance(k, str)}


def trainer_python(trainer: str) -> Path:
    """The trainer's own interpreter, as the tests find it: RECIPE_OPENTAU_VENV / RECIPE_LEROBOT_PYTHON,
    else the checkout's side venv (tests/upstream/*_env.sh builds it)."""
    import os

    root = SCHEMA_DIR.parent
    if trainer == "opentau":
        return Path(os.environ.get("RECIPE_OPENTAU_VENV") or root / ".venv-opentau") / "bin" / "python"
    return Path(os.environ.get("RECIPE_LEROBOT_PYTHON") or root / ".venv-lerobot" / "bin" / "python")


def trainers_schema() -> dict:
    """policy.options of an OpenTau or LeRobot recipe against the fields of its policy type's config
    in the trainer's own code: the trainer's parser (draccus) refuses any other top-level key."""
    import subprocess

    found, clauses = {}, []
    for trainer in ("opentau", "lerobot"):
        python = trainer_python(trainer)
        if not python.exists():
            raise SystemExit(f"no {trainer} interpreter at {python} (bash tests/upstream/{trainer}_env.sh)")
        script = Path(__file__).with_name("policy_fields.py")
        done = subprocess.run([str(python), str(script), trainer], capture_output=True, text=True, timeout=600)
        if done.returncode:
            raise SystemExit(f"{python} {script.name} {trainer}: {done.stderr.strip()[-2000:]}")
        answer = json.loads(done.stdout)
        found[trainer] = answer["version"]
        for policy_type, fields in answer["types"].items():
            clauses.append(
                {
                    "if": {
                        "properties": {
                            "trainer": {"properties": {"kind": {"const": trainer}}, "required": ["kind"]},
                            "policy": {"properties": {"type": {"const": policy_type}}, "required": ["type"]},
                        },
                        "required": ["trainer", "policy"],
                    },
                    "then": {
                        "properties": {
                            "policy": {
                                "properties": {
                                    "options": {
                                        "propertyNames": {
                                            "x-expected": f"a field of {trainer} {answer['version']}'s {policy_type} config",
                                            "enum": fields,
                                        }
                                    }
                                }
                            }
                        }
                    },
                }
            )
    versions = ", ".join(f"{t} {v}" for t, v in found.items())
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "policy.options keys, as each trainer's policy config takes them",
        "description": f"generated from {versions} by python -m registry.validate.upstream",
        "x-generated-from": found,
        "allOf": clauses,
    }


def generated() -> dict[Path, str]:
    return {
        path: json.dumps(schema(), indent=2) + "\n"
        for path, schema in (
            (DEEPSPEED_FILE, deepspeed_schema),
            (ACCELERATE_FILE, accelerate_schema),
            (TRAINERS_FILE, trainers_schema),
        )
    }


def main(argv: list[str]) -> int:
    import contextlib
    import logging
    import warnings

    logging.getLogger("DeepSpeed").setLevel(logging.ERROR)
    with contextlib.redirect_stdout(sys.stderr), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        files = generated()
    stale = [p for p, text in files.items() if not p.exists() or p.read_text(encoding="utf-8") != text]
    if "--check" in argv:
        for p in stale:
            print(f"{p.name}: differs from what the installed library says (python -m registry.validate.upstream)")
        return 1 if stale else 0
    from registry.files import write_atomic

    for p in stale:
        write_atomic(p, files[p])
        print(f"wrote {p}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
