"""The opentau.json, accelerate.yaml and deepspeed.json the registry writes, checked with OpenTau's own
parser, validate() and train()'s backend guards (registry/validate/checkers/opentau_check.py), in a venv of their
own: bash tests/upstream/opentau_env.sh.

Every valid bundled OpenTau cell must load without error and without a warning (each one OpenTau emits
while loading says it changed or ignored part of the file, e.g. "Overriding policy.chunk_size=10 with
action_chunk=50"). For each OpenTau rule the registry mirrors, a broken recipe must be rejected by both
and its fixed twin accepted by both: a rule on one side only means a run the registry lets through dies
at start-up, or a recipe it refuses would have trained. Everything goes to OpenTau in one batch: one
import of OpenTau (about 5 s) for the module."""

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from conftest import ROOT, USER_ENV, side_venv_python

from registry.compose import compose
from registry.resolve import resolve
from registry.validate.report import validate_target

pytestmark = pytest.mark.upstream

CHECKERS = ROOT / "registry" / "validate" / "checkers"
BUILD = "bash tests/upstream/opentau_env.sh"
# conftest removes RECIPE_* from the environment the registry sees; this one is for the tests
VENV = Path(USER_ENV.get("RECIPE_OPENTAU_VENV") or ROOT / ".venv-opentau")


@dataclass(frozen=True)
class Pair:
    """A recipe that breaks `rule` (a bundled cell + overrides) and its fixed twin."""

    rule: str
    stage: str  # where OpenTau rejects the broken one: parse, validate or backend; or "warning": it warns
    says: str  # a piece of OpenTau's message
    cell: str
    broken: tuple[str, ...]
    fixed: tuple[str, ...]
    fixed_cell: str = ""  # the twin's cell when the fix is another backend

    @property
    def id(self) -> str:
        return f"{self.rule}@{self.cell.split('/')[1]}"


PAIRS = [
    Pair(
        "obs-history",
        "validate",
        "!= dataset_mixture.n_obs_history",
        "pi07/zero2/8xA100",
        ("dataset.n_obs_history=4",),
        ("dataset.n_obs_history=4", "policy.n_obs_steps=4"),
    ),
    Pair(
        "batch-size-product",
        "parse",
        "`batch_size` must be equal to `dataloader_batch_size * gradient_accumulation_steps`",
        "pi07/zero2/8xA100",
        ("train.batch_size=40",),  # micro batch 20 x 1
        ("train.batch_size=40", "train.gradient_accumulation_steps=2"),
    ),
    Pair(
        "image-resolution",
        "validate",
        "policy.resize_imgs_with_padding=(224, 224) != resolution=(448, 448)",
        "pi07/zero2/8xA100",
        ("policy.resize_imgs_with_padding=[224,224]",),
        ("policy.resize_imgs_with_padding=[224,224]", "dataset.resolution=[224,224]"),
    ),
    Pair(
        "zero3-torch-checkpointing",
        "backend",
        "gradient_checkpointing=True is not supported under DeepSpeed ZeRO stage 3",
        "pi07/zero3/8xA100",  # the cell composes with it off (the rule's fix); the user turns it on
        ("policy.gradient_checkpointing=true",),
        (),
    ),
    Pair(
        "zero-loss-weight-sharded",
        "backend",
        "A zero entry in loss_weighting",
        "pi05/zero3/8xA100",
        ("train.loss_weights.CE=0",),
        ("train.loss_weights.CE=0",),
        fixed_cell="pi05/zero2/8xA100",  # ZeRO-2 keeps whole parameters: both allow it
    ),
    Pair(
        "zero-loss-weight-sharded",
        "backend",
        "A zero entry in loss_weighting",
        "pi07/fsdp/8xA100",
        ("train.loss_weights.CE=0",),
        ("train.loss_weights.CE=0.5",),
    ),
    Pair(  # policy.options against the fields of OpenTau's own config (schemas/trainers.upstream.schema.json)
        "key-name",
        "parse",
        "The fields `dropoutt` are not valid for PI07LowLevelConfig",
        "pi07/zero2/8xA100",
        ("policy.options.dropoutt=0.1",),
        ("policy.options.dropout=0.1",),
    ),
    Pair(  # a warning on both sides: OpenTau drops the flag and trains uncompiled
        "compile-sharded",
        "warning",
        "use_torch_compile=True is not supported under DeepSpeed ZeRO stage 3",
        "pi05/zero3/8xA100",
        ("policy.use_torch_compile=true",),
        ("policy.use_torch_compile=true",),
        fixed_cell="pi05/zero2/8xA100",
    ),
    Pair(
        "sim-eval-sharded",
        "backend",
        "In-training simulation eval",
        "pi05/zero3/8xA100",
        ("train.eval.env=libero", "train.eval.every=1000"),
        ("train.eval.env=libero", "train.eval.every=0"),
    ),
]


def venv_python() -> Path:
    return side_venv_python(VENV, "OpenTau", BUILD, "RECIPE_OPENTAU_VENV")


def opentau_cells(matrix) -> list[str]:
    """Bundled cells the registry accepts whose trainer is OpenTau."""
    return sorted(
        name
        for name, cell in matrix.items()
        if not cell.report.failure and not cell.report.errors and cell.recipe.data["trainer"]["kind"] == "opentau"
    )


def case(case_id: str, folder: Path, files: dict[str, str]) -> dict:
    """Writes a recipe's files into `folder`; the case that checks them."""
    folder.mkdir()
    for name, text in files.items():
        (folder / name).write_text(text)
    return {
        "id": case_id,
        "config": str(folder / "opentau.json"),
        "accelerate_config": str(folder / "accelerate.yaml") if "accelerate.yaml" in files else None,
        "args": [],
    }


@pytest.fixture(scope="module")
def upstream(matrix, tmp_path_factory) -> dict:
    """{case id: OpenTau's result}, or {case id: 'render failed: ...'} for a recipe the registry could not
    render. Ids: the cell name for bundled cells, '<pair id>/broken' and '<pair id>/fixed'."""
    python, root = venv_python(), tmp_path_factory.mktemp("opentau")
    # started first: OpenTau imports while the recipes resolve, and reads the cases from stdin after
    proc = subprocess.Popen(
        [str(python), "-I", str(CHECKERS / "opentau_check.py"), "-"],
        cwd=root,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        cases, results = render(matrix, root)
        out, err = proc.communicate(json.dumps(cases), timeout=600)
    finally:
        if proc.returncode is None:
            proc.kill()
            proc.wait()
    if proc.returncode not in (0, 1):
        pytest.fail(f"opentau_check.py exited {proc.returncode}:\n{err[-3000:]}", pytrace=False)
    for line in out.splitlines():
        result = json.loads(line)
        results[result["id"]] = result
    missing = [c["id"] for c in cases if c["id"] not in results]
    assert not missing, f"opentau_check.py gave no result for {missing}:\n{err[-3000:]}"
    return results


def render(matrix, root: Path) -> tuple[list[dict], dict[str, str]]:
    """The cases for OpenTau, and the recipes the registry could not even render."""
    cases = [case(name, root / f"cell{n}", matrix[name].bundle.files) for n, name in enumerate(opentau_cells(matrix))]
    for entry in corpus_entries():  # the teams' own files, as they are
        folder = CORPUS / entry["id"]
        cases.append(
            {
                "id": f"corpus/{entry['id']}",
                "config": str(folder / entry["trainer_config"]),
                "accelerate_config": str(folder / entry["files"][0]),
                "args": [],
            }
        )
    failed = {}
    for n, pair in enumerate(PAIRS):
        for side, cell, overrides in (
            ("broken", pair.cell, pair.broken),
            ("fixed", pair.fixed_cell or pair.cell, pair.fixed),
        ):
            try:  # past the registry's validation: resolve() renders what it is given
                files = resolve(compose(cell, list(overrides))).files
            except Exception as e:
                failed[f"{pair.id}/{side}"] = f"render failed: {type(e).__name__}: {e}"
                continue
            cases.append(case(f"{pair.id}/{side}", root / f"pair{n}-{side}", files))
    return cases, failed


CORPUS = ROOT / "tests" / "data" / "corpus"


def corpus_entries() -> list[dict]:
    """The corpus's OpenTau configurations (tests/test_corpus.py)."""
    entries = yaml.safe_load((CORPUS / "manifest.yaml").read_text())["entries"]
    return [e for e in entries if e.get("trainer") == "opentau"]


def verdict(result) -> str:
    """One line: 'ok', or where and why OpenTau refused or changed the file."""
    if isinstance(result, str):
        return result
    if not result["ok"]:
        return f"{result['stage']}: {result['error']}"
    if result["warnings"]:
        return "ok, but OpenTau warned: " + " | ".join(result["warnings"])
    return "ok"


def test_valid_cells_load_in_opentau_unchanged(upstream, matrix):
    cells = opentau_cells(matrix)
    assert len(cells) >= 40, f"only {len(cells)} valid OpenTau cells"
    bad: dict[str, list[str]] = {}  # verdict -> cells [backend]
    for name in cells:
        if (why := verdict(upstream[name])) != "ok":
            bad.setdefault(why, []).append(f"{name} [{upstream[name]['backend']}]")
    assert not bad, f"{sum(map(len, bad.values()))} of {len(cells)} valid OpenTau cells fail or warn in OpenTau:\n" + (
        "\n".join(f"- {why}\n    {', '.join(names)}" for why, names in bad.items())
    )


def registry_rules(cell: str, overrides: tuple[str, ...]) -> dict[str, str]:
    """{rule id: 'error' or 'warning'} of what `recipe validate CELL OVERRIDES` reports."""
    report = validate_target(cell, list(overrides))
    assert not report.failure, report.lines()
    return {p.rule: "error" if p.is_error else "warning" for p in report.problems}


@pytest.mark.parametrize("pair", PAIRS, ids=lambda p: p.id)
def test_broken_recipe_flagged_by_both(upstream, pair):
    problems = []
    want = "warning" if pair.stage == "warning" else "error"
    if (rules := registry_rules(pair.cell, pair.broken)).get(pair.rule) != want:
        problems.append(f"recipe validate: no {pair.rule} {want} (reported: {rules or 'nothing'})")
    result = upstream[f"{pair.id}/broken"]
    if isinstance(result, str):
        flagged = False
    elif pair.stage == "warning":
        flagged = result["ok"] and any(pair.says in w for w in result["warnings"])
    else:
        flagged = not result["ok"] and result["stage"] == pair.stage and pair.says in result["error"]
    if not flagged:
        problems.append(f"OpenTau: expected {pair.stage}: ...{pair.says}..., got {verdict(result)}")
    assert not problems, f"{pair.cell} {' '.join(pair.broken)}:\n  " + "\n  ".join(problems)


@pytest.mark.parametrize("pair", PAIRS, ids=lambda p: p.id)
def test_fixed_twin_passes_both(upstream, pair):
    cell = pair.fixed_cell or pair.cell
    problems = []
    rules = registry_rules(cell, pair.fixed)
    if pair.rule in rules or "error" in rules.values():
        problems.append(f"recipe validate: {rules}")
    if verdict(result := upstream[f"{pair.id}/fixed"]) != "ok":
        problems.append(f"OpenTau: {verdict(result)}")
    assert not problems, f"{cell} {' '.join(pair.fixed)}:\n  " + "\n  ".join(problems)


LIBRARIES = json.loads((CORPUS / "verdicts.json").read_text())


@pytest.mark.parametrize(
    "entry", [e for e in corpus_entries() if LIBRARIES[e["id"]]["accepted"]], ids=lambda e: e["id"]
)
def test_corpus_trainer_verdicts_are_opentaus(upstream, entry):
    """Where the corpus records that OpenTau refuses a team's configuration (tests/test_corpus.py
    then wants a registry error), OpenTau's own code refuses it; everywhere else it accepts it.
    Entries accelerate or DeepSpeed refuse already are theirs to judge, not OpenTau's."""
    result = upstream[f"corpus/{entry['id']}"]
    recorded = entry.get("trainer_verdict", {"accepted": True})
    assert result["ok"] == recorded["accepted"], verdict(result)
    if not recorded["accepted"]:
        assert recorded["error"] in result["error"]
