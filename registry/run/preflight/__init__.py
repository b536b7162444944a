"""Pre-flight: a recipe that is valid in itself, checked against the dataset it points at and the
host it lands on before a GPU-hour is spent (docs/preflight.md). `recipe doctor` prints the
report; `recipe run` refuses a launch over an error unless the rule is waived with a reason.

The rules are data (schemas/preflight.json, registry/run/preflight/rules.py); the checks are
registry/run/preflight/data.py (the dataset's metadata) and registry/run/preflight/hostchecks.py
(HostFacts, gathered by registry/run/preflight/host.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from registry import view
from registry.errors import Exit, Problem, RecipeError, printable
from registry.run.preflight import data, hostchecks, metadata, rules
from registry.run.preflight.host import HostFacts
from registry.run.preflight.metadata import DatasetMeta

RECORD = "preflight.json"  # what a run folder keeps of the pre-flight that let it launch


@dataclass
class Report:
    problems: list[Problem] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what was not checked, and why: never an error
    datasets: list[DatasetMeta] = field(default_factory=list)
    facts: HostFacts | None = None

    @property
    def errors(self) -> list[Problem]:
        return [p for p in self.problems if p.is_error]


def dataset_entries(doc: dict) -> list[dict]:
    """The datasets the trainer reads, each as {repo_id, root, revision}: OpenTau's mixture, member
    by member, as its adapter writes it; the recipe's one dataset for LeRobot and a command
    trainer; none for the built-in trainer, which makes its own."""
    recipe = view.of(doc)
    if recipe.trainer.kind == "builtin":
        return []
    if recipe.trainer.kind == "opentau":
        from registry.trainers import opentau

        members = (opentau.train_config(doc).get("dataset_mixture") or {}).get("datasets") or []
        return [m for m in members if isinstance(m, dict)]
    data_ = recipe.dataset
    return [{"repo_id": data_.repo_id, "root": data_.root, "revision": data_.revision}]


def check_dataset(doc: dict, origins: dict, base: Path | None, env: dict[str, str], report: Report) -> None:
    """Every dataset rule over every dataset the trainer reads whose metadata is on this disk;
    one note for each that is not."""
    recipe = view.of(doc)
    entries = dataset_entries(doc)
    if not entries:
        return
    try:
        pretrained = metadata.pretrained_features(recipe.policy.pretrained_path, base, env)
    except metadata.Unreadable as e:
        pretrained = None
        report.notes.append(f"pretrained checkpoint not checked: {e}")
    policy = data.policy_of(recipe, pretrained)
    for entry in entries:
        try:
            meta = metadata.find(entry, base, env)
        except metadata.Unreadable as e:
            report.notes.append(f"dataset not checked: {e}")
            continue
        report.datasets.append(meta)
        for rule in rules.rules().values():
            check = data.CHECKS.get(rule["compute"])
            for finding in check(meta, policy) if check else ():
                report.problems.append(rules.problem(rule["id"], finding, origins))


def check_host(doc: dict, origins: dict, facts: HostFacts, run: hostchecks.Run, report: Report, skip=()) -> None:
    """Every host rule but those in `skip` against the facts."""
    recipe = view.of(doc)
    report.facts = facts
    report.notes.extend(facts.notes)
    for rule in rules.rules().values():
        check = hostchecks.CHECKS.get(rule["compute"])
        if check and rule["id"] not in skip:
            for finding in check(recipe, facts, run):
                report.problems.append(rules.problem(rule["id"], finding, origins))


# --- waivers --------------------------------------------------------------------------------------
def waivers(given: list[str] | None) -> dict[str, str]:
    """`RULE=REASON` items (recipe run --waive) as {rule: reason}: a known pre-flight rule and a
    reason that says something, else a usage error."""
    out = {}
    known = rules.rules()
    for item in given or ():
        rule, _, reason = item.partition("=")
        rule, reason = rule.strip(), reason.strip()
        if rule not in known:
            raise RecipeError(
                f"--waive {item}: {rule!r} is not a pre-flight rule (known: {', '.join(known)})", Exit.USAGE
            )
        if not reason:
            raise RecipeError(f"--waive {rule}: give the reason, as --waive {rule}='why it is fine'", Exit.USAGE)
        out[rule] = reason
    return out


def waived_line(problem: Problem, reason: str) -> str:
    return f"{problem.render()} [waived: {reason}]"


def verdict(report: Report, waived: dict[str, str]) -> tuple[list[Problem], list[str]]:
    """The errors that stop a launch, and every line to show: each problem (a waived error with
    its reason) and each note."""
    lines, blocking = [], []
    for p in report.problems:
        if p.is_error and p.rule in waived:
            lines.append(waived_line(p, waived[p.rule]))
        else:
            lines.append(p.render())
            if p.is_error:
                blocking.append(p)
    # a note quotes paths and what files hold: one line each, no terminal control characters
    lines += [f"recipe: note: {printable(note, keep='')}" for note in report.notes]
    return blocking, lines


# --- one pass ----------------------------------------------------------------------------------
def check(
    recipe,
    bundle,
    output: Path,
    env: dict[str, str],
    base: Path | None,
    *,
    host: bool = True,
    use_torch: bool = False,
    skip: tuple[str, ...] = (),
    gpus: list | None = None,
) -> Report:
    """The dataset rules, then (with `host`) the host rules but `skip`, for a composed recipe
    (data, origins) whose trainer is `bundle` (None where it did not resolve), writing under
    `output`; a relative dataset.root is read from `base`, the folder the trainer runs in (None: one
    the run makes new, where a relative root cannot be).
    `gpus`: the host's GPUs where the caller asked nvidia-smi already (recipe run, before its
    launch: each question costs tens of milliseconds)."""
    from registry.run.preflight.host import gather

    report = Report()
    check_dataset(recipe.data, recipe.origins, base, env, report)
    if host:
        facts = gather(recipe.data, bundle, output, env, use_torch, gpus=gpus)
        run = hostchecks.Run(recipe.data, bundle, tuple(report.datasets), view.of(recipe.data).trainer.env)
        check_host(recipe.data, recipe.origins, facts, run, report, skip)
    return report


def record(report: Report, waived: dict[str, str]) -> str:
    """What a run folder keeps of its pre-flight (preflight.json): every problem, the waivers with
    their reasons, the notes."""
    import json

    from registry.commands.validate import problem_json

    return (
        json.dumps(
            {
                "problems": [problem_json(p) for p in report.problems],
                "waived": waived,
                "notes": report.notes,
                "datasets": [str(m.path) for m in report.datasets],
            },
            indent=2,
        )
        + "\n"
    )
