"""`recipe resolve` and `recipe run`: validate, resolve into a directory, check the machine,
launch, stream the output, pass the exit code through, and stop every rank on Ctrl-C/SIGTERM."""

from __future__ import annotations

import os
import shutil
import sys
import time
from pathlib import Path

from registry import view
from registry.compose import Recipe, compose
from registry.errors import Exit, RecipeError
from registry.files import write_atomic
from registry.resolve import LOCK, Bundle, resolve
from registry.run import environment, envlock, machine
from registry.run import resume as resume_
from registry.run.supervise import hold, supervise
from registry.topology import nodes
from registry.train import LAUNCHED_AT, RESUME, TERMINAL
from registry.validate import validate


def checked(target: str, overrides: list[str]) -> tuple[Recipe, Bundle]:
    """Compose, validate (problems go to stderr) and resolve; RecipeError if invalid."""
    recipe = compose(target, overrides)
    problems = validate(recipe.data, recipe.origins)
    for p in problems:
        print(p.render(), file=sys.stderr)
    errors = sum(p.is_error for p in problems)
    if errors:
        raise RecipeError(
            f"{recipe.name}: invalid ({errors} error{'s' if errors > 1 else ''}); nothing was resolved", 1
        )
    return recipe, resolve(recipe)


def write_bundle(bundle: Bundle, folder: Path) -> None:
    if folder.exists() and not folder.is_dir():
        raise RecipeError(f"{folder}: is a file, not a folder (hint: -o names the folder to write into)")
    try:
        for name, text in bundle.files.items():
            write_atomic(folder / name, text, 0o755 if name.endswith(".sh") else 0o644)
    except OSError as e:
        raise RecipeError(f"{folder}: cannot write the resolved files: {e.strerror or e}") from None


def _write_lock(folder: Path, text: str) -> None:
    _write_file(folder, LOCK, text)


def _write_file(folder: Path, name: str, text: str) -> None:
    try:
        write_atomic(folder / name, text)
    except OSError as e:
        raise RecipeError(f"{folder}: cannot write {name}: {e.strerror or e}") from None


def fresh_run_dir(recipe: Recipe, output_dir: str | None, base: Path = Path("runs")) -> Path:
    """A new run folder, claimed with an exclusive mkdir so that two runs started in the same
    second never share one."""
    if output_dir:
        folder = Path(output_dir)
        if folder.exists() and not folder.is_dir():
            raise RecipeError(f"{folder}: is a file, not a folder (hint: pick a new --output-dir)")
        if folder.exists() and any(folder.iterdir()):
            raise RecipeError(f"{folder}: exists and is not empty (hint: pick a new --output-dir, or --resume later)")
        _mkdir(folder, exist_ok=True)
        return folder
    return claim(resume_.runs_of(recipe, base))


def claim(base: Path) -> Path:
    """base/<timestamp>[-n], made with an exclusive mkdir: two runs started in the same second
    never share a folder."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    _mkdir(base, exist_ok=True)
    for n in range(1, 10_000):
        folder = base / (stamp if n == 1 else f"{stamp}-{n}")
        try:
            folder.mkdir()
            return folder
        except FileExistsError:
            continue
    raise RecipeError(f"{base}: no free run folder for {stamp} (hint: --output-dir)")


def _mkdir(folder: Path, exist_ok: bool) -> None:
    try:
        folder.mkdir(parents=True, exist_ok=exist_ok)
    except OSError as e:
        raise RecipeError(f"{folder}: cannot create the run folder: {e.strerror or e}") from None


def launch_env(bundle: Bundle) -> dict[str, str]:
    env = dict(os.environ)
    if bundle.same_python:
        env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    elif bundle.python:  # launch.sh does the same: the trainer's environment first
        env["PATH"] = os.pathsep.join([str(Path(bundle.python).parent), env.get("PATH", "")])
    return env


def find_program(program: str, env: dict[str, str]) -> bool:
    if "/" in program:
        return Path(program).is_file() and os.access(program, os.X_OK)
    return shutil.which(program, path=env.get("PATH")) is not None


def launch_in(
    recipe: Recipe, bundle: Bundle, base: Path, echo: bool, env: dict[str, str] | None = None
) -> tuple[int, Path]:
    """A fresh run folder under `base` with the bundle, every local node's launch.sh started and
    waited for (recipe bench, recipe tune, benchmarks/grid.py): the exit code and the folder."""
    folder = fresh_run_dir(recipe, None, base=base)
    write_bundle(bundle, folder)
    code = start_nodes(recipe.data, ["bash", "launch.sh"], {**launch_env(bundle), **(env or {})}, folder, echo=echo)
    return code, folder


def start_nodes(doc: dict, command: list[str], env: dict[str, str], folder: Path, **supervising) -> int:
    """`command` once per node this host plays (local_nodes), supervised until every one exits.
    Each carries the launch time, from which the trainer's start-up timeline counts the
    launcher's share."""
    env = {**env, LAUNCHED_AT: repr(time.time())}
    return supervise([(command, node) for node in local_nodes(doc, env)], folder, **supervising)


def show(bundle: Bundle) -> None:
    # escaped, so that a `\r` or an escape sequence in a value cannot hide a line from the reviewer
    from registry.errors import printable

    for name, text in bundle.files.items():
        print(f"==> {printable(name, keep='')} <==")
        text = printable(text)
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
        print()
    print(f"==> command <==\n{printable(str(bundle.command))}")


def run(
    target: str,
    overrides: list[str],
    *,
    dry_run: bool,
    output_dir: str | None,
    allow_mismatch: bool,
    resume: str | None = None,
    require_same_env: bool = False,
    waive: list[str] | None = None,
    extra_env: dict[str, str] | None = None,
    summary: bool = True,
) -> int:
    """extra_env: set for the trainer beside this environment (a rehearsal's offline cache and
    rank probe); summary: False when the caller reports the run itself."""
    from registry.run import preflight

    waived = preflight.waivers(waive)
    host_gpus = machine.gpus_soon()  # nvidia-smi answers while the recipe composes and resolves
    recipe, bundle = checked(target, overrides)
    if dry_run:
        show(bundle)
        return Exit.OK
    engine = view.of(recipe.data).launch.launcher
    if engine in CLUSTER_ENGINES:  # the cluster runs it, not this host
        if resume is not None:
            raise RecipeError(
                f"--resume drives runs on this host, not {engine} jobs (hint: submit the run folder again)"
            )
        from registry.run import submit

        base = Path(output_dir) if output_dir else Path.cwd()
        # the job runs in --output-dir, else in a run folder it makes new (docs/preflight.md)
        folder = Path(output_dir) if output_dir else None
        _preflight(preflight.check(recipe, bundle, base, dict(os.environ), folder, host=False), waived)
        return submit.ENGINES[engine](recipe, bundle, output_dir)
    _this_host_starts_every_node(recipe)
    host = host_gpus()
    why = machine.mismatch(recipe.data, host)
    if why and not allow_mismatch:
        raise RecipeError(
            f"{why} (hint: run on matching hardware, swap it with hardware=..., or pass --allow-hardware-mismatch)", 1
        )
    env = {**launch_env(bundle), **(extra_env or {})}
    trainer_env = view.of(recipe.data).trainer.env
    if not bundle.python and not find_program(bundle.program, env):
        raise RecipeError(f"{bundle.program} not found on PATH (hint: {bundle.install_hint})", Exit.NOT_FOUND)
    environment.report(environment.check(bundle, env, trainer_env))
    if view.of(recipe.data).backend.kind == "deepspeed":
        environment.report(environment.stale_build_locks(env))
    if bundle.python and not find_program(bundle.program, env):
        raise RecipeError(
            f"trainer.env {trainer_env}: no {bundle.program} (hint: {bundle.install_hint})", Exit.NOT_FOUND
        )
    # the GPUs, the trainer's environment and build locks were checked above, each its own way
    where = Path(output_dir) if output_dir else resume_.folder_of(recipe, resume) if resume is not None else None
    output = where or resume_.runs_of(recipe, Path("runs"))
    done = preflight.check(
        recipe,
        bundle,
        output,
        env,
        where,  # the folder the trainer runs in; None: a run folder made new (docs/preflight.md)
        skip=("host-gpus", "host-trainer-env", "host-build-locks"),
        gpus=host,
    )
    kept = _preflight(done, waived)
    command = ["bash", "launch.sh"]
    if resume is not None:
        folder = resume_.folder_of(recipe, resume)
        log = hold(folder)
        try:
            plan = resume_.plan(recipe, folder, resume)
            if plan.step is not None and plan.step >= view.of(recipe.data).train.steps:
                log.close()
                return _finished(recipe, plan)
            current = envlock.collect(bundle, recipe.data, folder, host, env)
            earlier, relock = envlock.on_resume(plan.lock, current, folder / LOCK, require_same_env)
            if plan.changed:  # only fields a resume may change (resume.MAY_CHANGE): the run continues with them
                write_bundle(envlock.recorded(bundle, current, earlier), folder)
                print(f"recipe: resuming with {', '.join(plan.changed)} changed", file=sys.stderr)
                scheduler = view.of(recipe.data).train.scheduler
                if "train.steps" in plan.changed and scheduler.type != "constant" and not scheduler.decay_steps:
                    print(
                        "recipe: warning: train.scheduler.decay_steps follows train.steps, so the learning rate"
                        " now decays over the new length (hint: set train.scheduler.decay_steps to keep one schedule)",
                        file=sys.stderr,
                    )
            elif relock:  # the recipe as before, the environment not: the lock says both
                _write_lock(folder, envlock.relocked(plan.lock, current, earlier))
        except BaseException:
            log.close()
            raise
        env[RESUME] = plan.checkpoint or "checkpoints/last"  # the built-in trainer reads it; LeRobot takes flags
        command += list(bundle.resume_args or ())
        at = f" from step {plan.step}" if plan.step is not None else ""
        print(f"recipe: resuming {recipe.name} in {folder}{at}", file=sys.stderr)
    else:
        folder = fresh_run_dir(recipe, output_dir)
        log = hold(folder)
        write_bundle(envlock.recorded(bundle, envlock.collect(bundle, recipe.data, folder, host, env)), folder)
        print(f"recipe: {recipe.name} in {folder}", file=sys.stderr)
    if kept:
        _write_file(folder, preflight.RECORD, kept)
    if sys.stdout.isatty():  # the ranks write into a pipe; rank 0 draws its bar for our terminal
        env[TERMINAL] = str(shutil.get_terminal_size().columns)
    started = time.monotonic()
    code = start_nodes(recipe.data, command, env, folder, log=log)
    if summary:
        _summary(recipe, target, overrides, folder, code, time.monotonic() - started, waived)
    return code


CLUSTER_ENGINES = ("slurm", "skypilot", "kubernetes")  # recipe run submits these (registry/run/submit.py)


def _preflight(report, waived: dict[str, str]) -> str | None:
    """Print the pre-flight's findings and notes; refuse (exit 1) over an error not waived. The
    record for the run folder where there is anything to keep, else None."""
    from registry.run import preflight

    blocking, lines = preflight.verdict(report, waived)
    for line in lines:
        print(line, file=sys.stderr)
    if blocking:
        rules = sorted({p.rule for p in blocking})
        raise RecipeError(
            f"pre-flight: {len(blocking)} error{'s' if len(blocking) > 1 else ''}; nothing was launched (hint: fix"
            f" {'them' if len(blocking) > 1 else 'it'}, or launch anyway with "
            + " ".join(f"--waive {r}='why it is fine'" for r in rules)
            + ")",
            Exit.INVALID,
        )
    return preflight.record(report, waived) if report.problems or waived else None


def _this_host_starts_every_node(recipe: Recipe) -> None:
    """A multi-node recipe without an engine: `recipe run` starts this host's launcher only, and
    its rendezvous would wait for nodes nobody starts (docs/failure-modes.md §44). Runs on
    loopback play every node here; a rank (MACHINE_RANK or SLURM_NODEID) and a rendezvous host
    (MAIN_PROCESS_IP) in the environment mean the user starts each node's `recipe run` themselves."""
    count = nodes(recipe.data)
    if count == 1 or machine.nodes_here(recipe.data) == count:
        return
    rank = os.environ.get("MACHINE_RANK") or os.environ.get("SLURM_NODEID")
    if rank and os.environ.get("MAIN_PROCESS_IP", "127.0.0.1") not in machine.LOOPBACK:
        return
    launcher = view.of(recipe.data).launch.launcher
    raise RecipeError(
        f"{recipe.name}: {count} nodes, and with launch.launcher {launcher} recipe run starts this host's"
        f" processes only: the rendezvous would wait for the other {count - 1} node(s)"
        " (hint: launch.launcher=slurm, skypilot or kubernetes to have the cluster start every node;"
        " launch.main_process_ip=127.0.0.1 to play every node on this host; or run it on each node"
        " yourself with MACHINE_RANK and MAIN_PROCESS_IP, the first node's address, set)",
        Exit.INVALID,
    )


def _finished(recipe: Recipe, plan: resume_.Plan) -> int:
    steps = view.of(recipe.data).train.steps
    if plan.step > steps:
        raise RecipeError(
            f"{plan.folder}: its checkpoint is at step {plan.step}, past train.steps={steps}"
            f" (hint: resume with train.steps above {plan.step})"
        )
    print(
        f"recipe: {recipe.name} in {plan.folder} finished at step {steps}; nothing to resume"
        f" (hint: add train.steps=N with N > {steps} to train on)",
        file=sys.stderr,
    )
    return Exit.OK


def _summary(
    recipe: Recipe,
    target: str,
    overrides: list[str],
    folder: Path,
    code: int,
    seconds: float,
    waived: dict[str, str],
) -> None:
    """How the run ended and where its output went (registry/run/summary.py); the resume command
    carries this launch's waivers (the resume's pre-flight finds what this one found)."""
    from registry.run import summary

    try:
        print("\n".join(summary.lines(recipe, target, overrides, folder, code, seconds, waived)), file=sys.stderr)
    except OSError:
        pass  # the terminal went away with the run


def local_nodes(doc: dict, env: dict[str, str]) -> list[dict[str, str]]:
    """One launcher, or one per node when every node is this host (hardware.nodes > 1 with a
    loopback rendezvous): multi-node without a cluster. Each node launcher gets its own GPUs, as
    a node of a cluster would (else every node's local rank 0 takes the same device)."""
    count = machine.nodes_here(doc)
    if count == 1:
        return [env]
    per = view.of(doc).hardware.gpus_per_node
    visible = [v.strip() for v in env.get("CUDA_VISIBLE_DEVICES", "").split(",") if v.strip()]
    if per and "CUDA_VISIBLE_DEVICES" not in env:
        visible = [str(i) for i in range(count * per)]
    if per and len(visible) < count * per:
        raise RecipeError(
            f"{count} nodes x {per} GPUs on this host need {count * per} GPUs, and CUDA_VISIBLE_DEVICES"
            f" leaves {len(visible)} (hint: make {count * per} visible, or pick a hardware part with fewer)"
        )
    launchers = []
    for rank in range(count):
        node = {**env, "MACHINE_RANK": str(rank)}
        if per:
            node["CUDA_VISIBLE_DEVICES"] = ",".join(visible[rank * per : (rank + 1) * per])
        launchers.append(node)
    return launchers
