"""Handing a run folder to a cluster's engine: `recipe run` with launch.launcher slurm, skypilot or
kubernetes writes the folder here, then submits it (sbatch, sky launch, kubectl apply); the
engine starts launch.sh on every node (docs/failure-modes.md §42, §43, §44)."""

from __future__ import annotations

import shutil
import subprocess
import sys

from registry.compose import Recipe
from registry.errors import Exit, RecipeError
from registry.resolve import Bundle, launch
from registry.resolve import kubernetes as pytorchjob
from registry.resolve import skypilot as sky
from registry.run import fresh_run_dir, write_bundle


def kubernetes(recipe: Recipe, bundle: Bundle, output_dir: str | None) -> int:
    """Write the run folder, then hand it to the cluster: the folder as the ConfigMap the pods
    mount, then the PyTorchJob (docs/failure-modes.md §43)."""
    if shutil.which("kubectl") is None:
        raise RecipeError(f"kubectl not found on PATH (hint: {pytorchjob.KUBECTL_HINT})", Exit.NOT_FOUND)
    folder = fresh_run_dir(recipe, output_dir)
    write_bundle(bundle, folder)
    print(f"recipe: {recipe.name} in {folder}, submitted to Kubernetes", file=sys.stderr)
    files = subprocess.run(pytorchjob.configmap_argv(recipe.data, str(folder)), capture_output=True, text=True)
    steps = [(files, "the ConfigMap")]
    if files.returncode == 0:
        steps.append((subprocess.run(["kubectl", "apply", "-f", "-"], input=files.stdout, text=True), "the ConfigMap"))
    if all(r.returncode == 0 for r, _ in steps):
        steps.append((subprocess.run(pytorchjob.apply_argv(str(folder / pytorchjob.MANIFEST))), "the job"))
    for result, what in steps:
        if result.returncode:
            said = (result.stderr or "").strip().splitlines()[-1:] if result.stderr else []
            raise RecipeError(
                f"kubectl could not make {what} (exit {result.returncode}{': ' + said[0] if said else ''});"
                f" the files are in {folder}"
            )
    print(f"recipe: follow it with: kubectl logs -f {pytorchjob.job_name(recipe.data)}-master-0", file=sys.stderr)
    return Exit.OK


def slurm(recipe: Recipe, bundle: Bundle, output_dir: str | None) -> int:
    """Write the run folder and sbatch slurm.sbatch from there: the job finds launch.sh beside the
    submitted file, and Slurm writes its output (slurm-JOBID.out) into the folder."""
    if shutil.which("sbatch") is None:
        raise RecipeError(
            "sbatch not found on PATH (hint: run this on the cluster's login node, or `recipe resolve` with"
            f" the same arguments and -o DIR, copy DIR there and sbatch DIR/{launch.SBATCH})",
            Exit.NOT_FOUND,
        )
    folder = fresh_run_dir(recipe, output_dir)
    write_bundle(bundle, folder)
    print(f"recipe: {recipe.name} in {folder}, submitted to Slurm", file=sys.stderr)
    return subprocess.run(["sbatch", launch.SBATCH], cwd=folder).returncode


def skypilot(recipe: Recipe, bundle: Bundle, output_dir: str | None) -> int:
    """Write the run folder and `sky launch` its task from there: SkyPilot syncs the folder to
    every node as the workdir (`workdir: .`)."""
    argv = sky.launch_argv()  # one line with the install command when sky is missing
    folder = fresh_run_dir(recipe, output_dir)
    write_bundle(bundle, folder)
    print(f"recipe: {recipe.name} in {folder}, launched with SkyPilot", file=sys.stderr)
    return subprocess.run(argv, cwd=folder).returncode


ENGINES = {"slurm": slurm, "skypilot": skypilot, "kubernetes": kubernetes}
