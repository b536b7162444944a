"""Kubernetes (registry/resolve/kubernetes.py): the PyTorchJob of every valid bundled GPU cell, at 1, 2
and 4 nodes (the bundled parts), passes the PyTorchJob CRD's own OpenAPI schema (training operator
v1.9.0, vendored in tests/data/kubeflow/, made strict as `kubectl apply` is) and the operator's
admission webhook rules; and its pod command, run with the variables the operator sets in each pod,
starts launch.sh with that node's rank and the Master's address. Offline, no cluster."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import bundled_matrix, run_cli
from jsonschema import Draft7Validator
from stubs import write_launchers

from registry.compose import compose
from registry.errors import RecipeError
from registry.resolve import kubernetes, resolve

IMAGE = "nvcr.io/nvidia/pytorch:25.01-py3"
SCHEMA = Path(__file__).parent / "data" / "kubeflow" / "pytorchjob-v1.schema.json"
CELLS = [
    name
    for name, cell in sorted(bundled_matrix().items())
    if cell.report.exit_code == 0 and cell.recipe.data["hardware"]["gpu"]
]


def strict(node):
    """The CRD's schema as the API server applies it under kubectl's default --validate=strict: a field
    the schema does not declare is an error, not silently pruned (a typo'd field would vanish)."""
    if isinstance(node, list):
        return [strict(x) for x in node]
    if not isinstance(node, dict):
        return node
    out = {k: (v if k in ("properties", "required", "enum") else strict(v)) for k, v in node.items()}
    if "properties" in node:
        out["properties"] = {k: strict(v) for k, v in node["properties"].items()}
        if "additionalProperties" not in node and not node.get("x-kubernetes-preserve-unknown-fields"):
            out["additionalProperties"] = False
    return out


VALIDATOR = Draft7Validator(strict(json.loads(SCHEMA.read_text())))
DNS1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")


def operator_problems(job: dict) -> list[str]:
    """The training operator's admission webhook (pkg/webhooks/pytorch/pytorchjob_webhook.go, v1.9.0)
    and what the API server checks of metadata and pods that the CRD schema leaves open."""
    problems = []
    name = job["metadata"]["name"]
    specs = job["spec"]["pytorchReplicaSpecs"]
    if not DNS1035.match(name) or len(name) > 63:
        problems.append(f"metadata.name {name!r} is not a DNS-1035 label")
    for rtype, spec in specs.items():
        if rtype not in ("Master", "Worker"):
            problems.append(f"replica type {rtype} is not Master or Worker")
        if rtype == "Master" and spec.get("replicas") != 1:
            problems.append("Master replicas must be 1")
        if rtype == "Worker" and spec.get("replicas", 1) < 1:
            problems.append("Worker replicas must be at least 1")
        service = f"{name}-{rtype.lower()}-{spec.get('replicas', 1) - 1}"
        if len(service) > 63:
            problems.append(f"service {service} is longer than 63 characters")
        pod = spec["template"]["spec"]
        containers = {c["name"]: c for c in pod["containers"]}
        if "pytorch" not in containers or not all(c.get("image") for c in containers.values()):
            problems.append(f"{rtype}: no container named pytorch with an image")
            continue
        ports = [p for p in containers["pytorch"].get("ports", ()) if p.get("name") == "pytorchjob-port"]
        if len(ports) != 1:
            problems.append(f"{rtype}: the pytorch container has no pytorchjob-port (the operator's MASTER_PORT)")
        volumes = [v["name"] for v in pod.get("volumes", ())]
        mounts = [m["name"] for c in containers.values() for m in c.get("volumeMounts", ())]
        if len(set(volumes)) != len(volumes) or not set(mounts) <= set(volumes):
            problems.append(f"{rtype}: volumes {volumes} do not match the mounts {mounts}")
    return problems


def check(job: dict) -> list[str]:
    errors = [f"{'.'.join(map(str, e.absolute_path))}: {e.message}" for e in VALIDATOR.iter_errors(job)]
    return errors or operator_problems(job)


def recipe_problems(job: dict, doc: dict) -> list[str]:
    """Where the job disagrees with the recipe: pods per node count, GPUs, port, nproc, image."""
    hw, problems = doc["hardware"], []
    specs = job["spec"]["pytorchReplicaSpecs"]
    pods = sum(s["replicas"] for s in specs.values())
    if pods != hw["nodes"] or ("Worker" in specs) != (hw["nodes"] > 1):
        problems.append(f"{pods} pods for {hw['nodes']} nodes")
    if job["spec"]["nprocPerNode"] != str(hw.get("processes_per_node") or hw["gpus_per_node"]):
        problems.append(f"nprocPerNode {job['spec']['nprocPerNode']}")
    for rtype, spec in specs.items():
        pod = spec["template"]["spec"]
        (container,) = pod["containers"]
        if container["resources"]["limits"] != {"nvidia.com/gpu": hw["gpus_per_node"]}:
            problems.append(f"{rtype}: limits {container['resources']['limits']}")
        if container["image"] != IMAGE or container["ports"][0]["containerPort"] != doc["launch"]["main_process_port"]:
            problems.append(f"{rtype}: image or port")
        shm = [v for v in pod["volumes"] if v.get("emptyDir", {}).get("medium") == "Memory"]
        mounted = [m["name"] for m in container["volumeMounts"] if m["mountPath"] == "/dev/shm"]
        if [v["name"] for v in shm] != mounted:
            problems.append(f"{rtype}: /dev/shm is not a memory emptyDir")
    return problems


def job_of(recipe) -> dict:
    return yaml.safe_load(kubernetes.manifest(recipe.data, IMAGE))


# --- tests -----------------------------------------------------------------------------------
def test_cells_cover_one_two_and_four_nodes():
    counts = {bundled_matrix()[c].recipe.data["hardware"]["nodes"] for c in CELLS}
    assert {1, 2} <= counts and len(CELLS) > 100


def test_every_valid_gpu_cell_passes_the_crd_and_the_webhook():
    failed = {}
    for cell in CELLS:
        recipe = bundled_matrix()[cell].recipe
        job = job_of(recipe)
        problems = check(job) + recipe_problems(job, recipe.data)
        if problems:
            failed[cell] = problems
    assert failed == {}


@pytest.mark.parametrize(
    "path,value,says",
    [
        (("spec", "pytorchReplicaSpecs", "Master", "replicas"), "1", "is not of type 'integer'"),
        (
            ("spec", "pytorchReplicaSpecs", "Master", "template", "spec", "containers", 0, "ports", 0, "containerPort"),
            "29500",
            "is not of type 'integer'",
        ),
        (("spec", "pytorchReplicaSpecs", "Master", "template", "spec", "hostNetwrok"), True, "Additional properties"),
        (
            ("spec", "pytorchReplicaSpecs", "Worker", "template", "spec", "volumes", 2, "emptyDir", "sizeLimit"),
            "64GB",
            "does not match",
        ),
        (
            ("spec", "pytorchReplicaSpecs", "Worker", "template", "spec", "containers", 0, "name"),
            "trainer",
            "no container named pytorch",
        ),
        (("spec", "pytorchReplicaSpecs", "Master", "replicas"), 2, "Master replicas must be 1"),
        (("metadata", "name"), "Pi07/zero2", "is not a DNS-1035 label"),
    ],
)
def test_a_broken_field_fails_the_check(path, value, says):
    job = job_of(compose("pi07/zero2/2x8xH100"))
    assert check(job) == []
    node = job
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    problems = check(job)
    assert problems and says in problems[0], problems


def test_missing_replica_specs_fail_the_check():
    job = job_of(compose("pi07/zero2/8xH100"))
    del job["spec"]["pytorchReplicaSpecs"]
    assert check(job) == ["spec: 'pytorchReplicaSpecs' is a required property"]


# --- the pods, run: the operator's variables in, launch.sh's rank and rendezvous out ---------------


def operator_env(job: dict, rtype: str, index: int) -> dict[str, str]:
    """What the operator v1.9.0 sets in a pod (pkg/controller.v1/pytorch/envvar.go, master.go)."""
    name, spec = job["metadata"]["name"], job["spec"]
    specs = spec["pytorchReplicaSpecs"]
    port = str(specs["Master"]["template"]["spec"]["containers"][0]["ports"][0]["containerPort"])
    replicas = sum(s["replicas"] for s in specs.values())
    nproc = spec.get("nprocPerNode", "auto")
    rank = index + (rtype == "Worker")
    return {
        "PYTHONUNBUFFERED": "1",
        "MASTER_PORT": port,
        "PET_MASTER_PORT": port,
        "MASTER_ADDR": f"{name}-master-0",
        "PET_MASTER_ADDR": f"{name}-master-0",
        "WORLD_SIZE": str(replicas * (int(nproc) if nproc.isdigit() else 1)),
        "RANK": str(rank),
        "PET_NODE_RANK": str(rank),
        "PET_NPROC_PER_NODE": nproc,
        "PET_NNODES": str(replicas),
    }


@pytest.fixture(scope="module")
def stubs(tmp_path_factory):
    return write_launchers(tmp_path_factory.mktemp("stubs"))


def run_pod(tmp_path, stubs, job, files, rtype, index) -> str:
    """The pytorch container's command, its mounts moved under tmp_path: the ConfigMap's keys as the
    kubelet mounts them (symlinks into ..data), and an empty run folder."""
    mount, run = tmp_path / f"cm-{rtype}-{index}", tmp_path / f"run-{rtype}-{index}"
    (mount / "..data").mkdir(parents=True)
    run.mkdir()
    for name, text in files.items():
        (mount / "..data" / name).write_text(text)
        (mount / name).symlink_to(Path("..data") / name)
    (container,) = job["spec"]["pytorchReplicaSpecs"][rtype]["template"]["spec"]["containers"]
    argv = [
        a.replace(kubernetes.FILES_MOUNT, str(mount)).replace(kubernetes.RUN_DIR, str(run))
        for a in container["command"]
    ]
    env = {"PATH": f"{stubs}:/usr/bin:/bin", "HOME": str(tmp_path), **operator_env(job, rtype, index)}
    out = subprocess.run(argv, cwd=run, env=env, capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


@pytest.mark.parametrize(
    "cell", ["pi07/zero2/2x8xH100", "ref-1b/ddp/2x8xH100", "act/fsdp/2x8xH100", "pi07/zero2/8xH100"]
)
def test_each_pod_launches_with_its_node_rank(tmp_path, stubs, cell):
    recipe = bundled_matrix()[cell].recipe
    files = resolve(recipe).files
    job = job_of(recipe)
    name, port = job["metadata"]["name"], str(recipe.data["launch"]["main_process_port"])
    count = recipe.data["hardware"]["nodes"]
    pods = [("Master", 0)] + [("Worker", i) for i in range(count - 1)]
    # the stand-in's NAME NODE fields aside: RANK HOST PORT LEAKED
    records = [run_pod(tmp_path, stubs, job, files, rtype, i).split()[2:] for rtype, i in pods]
    if count == 1:  # one node takes no rank or rendezvous; still nothing of the operator's leaks
        assert len(records) == 1 and records[0][-1] == "-", records
    else:
        assert records == [[str(rank), f"{name}-master-0", port, "-"] for rank in range(count)]


# --- input ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("image", ["", "nvcr.io/nvidia/pytorch:25.01-py3 --privileged", "Ubuntu", None])
def test_a_bad_image_is_one_clear_line(image):
    with pytest.raises(RecipeError) as caught:
        kubernetes.manifest(compose("pi07/zero2/8xH100").data, image)
    assert "launch.image must be a container image reference" in str(caught.value)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(
    "image", ["ubuntu", "localhost:5000/team/train:v1", "ghcr.io/org/img@sha256:" + "0" * 64, IMAGE]
)
def test_image_references_are_taken(image):
    assert f"image: {image}" in kubernetes.manifest(compose("pi07/zero2/8xH100").data, image)


def test_shm_is_eight_gib_per_process_unless_set():
    doc = compose("pi07/zero2/2xH100").data
    assert kubernetes.shm_size(doc) == "16Gi"
    assert kubernetes.shm_size({**doc, "launch": {**doc["launch"], "kubernetes": {"shm_size": "100Gi"}}}) == "100Gi"
    with pytest.raises(RecipeError, match=re.escape("launch.kubernetes.shm_size must be a Kubernetes quantity")):
        kubernetes.shm_size({**doc, "launch": {**doc["launch"], "kubernetes": {"shm_size": "100GB"}}})


def test_long_names_stay_labels_and_apart():
    doc = compose("pi07/zero2/2x8xH100").data
    long = {**doc, "recipe": {**doc["recipe"], "name": "Team_A/" + "x" * 80 + "/8xH100"}}
    other = {**doc, "recipe": {**doc["recipe"], "name": "Team_A/" + "x" * 80 + "/8xH200"}}
    name = kubernetes.job_name(long)
    assert DNS1035.match(name) and len(f"{name}-worker-0") <= 63
    assert name != kubernetes.job_name(other)
    assert kubernetes.job_name(doc) == "pi07-zero2-2x8xh100-4fabab63"


def test_names_the_label_folds_together_get_jobs_and_configmaps_of_their_own():
    """exp/a_b and exp/a.b both became exp-a-b: one run's ConfigMap and job replaced the other's."""
    doc = compose("pi07/zero2/2x8xH100").data
    names = ["exp/a_b", "exp/a.b", "exp/a-b", "Exp/a_b", "exp/a/b", "exp-a-b"]
    docs = [{**doc, "recipe": {**doc["recipe"], "name": n}} for n in names]
    jobs = [kubernetes.job_name(d) for d in docs]
    assert len(set(jobs)) == len(names) and len({kubernetes.configmap_name(d) for d in docs}) == len(names), jobs
    for job in jobs:  # readable: the label first, then the hash of the full name
        assert DNS1035.match(job) and len(f"{job}-worker-0") <= 63 and re.fullmatch(r"exp-a-b-[0-9a-f]{8}", job)
    assert jobs == [kubernetes.job_name(d) for d in docs]  # stable: the same name, the same job


def test_manifest_is_deterministic_and_says_how_to_submit():
    doc = compose("pi07/zero2/2x8xH100").data
    text = kubernetes.manifest(doc, IMAGE)
    assert text == kubernetes.manifest(doc, IMAGE)
    assert "kubectl create configmap pi07-zero2-2x8xh100-4fabab63-files --from-file=." in text
    assert kubernetes.submit_lines(doc, "runs/x").splitlines() == [
        "kubectl create configmap pi07-zero2-2x8xh100-4fabab63-files --from-file=runs/x --dry-run=client -o yaml | kubectl apply -f -",
        "kubectl apply -f runs/x/kubernetes.yaml",
    ]
    assert os.path.basename(kubernetes.MANIFEST) == "kubernetes.yaml"


KUBECTL = """#!/usr/bin/env bash
echo "$*" >> "$KUBECTL_LOG"
if [ "$1" = create ]; then echo "kind: ConfigMap"; exit 0; fi
if [ "$1 $2 $3" = "apply -f -" ]; then cat > "$KUBECTL_LOG.stdin"; exit 0; fi
exit "${KUBECTL_EXIT:-0}"
"""


def test_recipe_run_submits_the_folder_and_the_job_with_kubectl(tmp_path):
    """`recipe run` with launcher kubernetes writes the run folder, applies it as the ConfigMap the
    pods mount, then applies the PyTorchJob; nothing trains on this host."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "kubectl").write_text(KUBECTL)
    (bin_dir / "kubectl").chmod(0o755)
    log, run_dir = tmp_path / "kubectl.log", tmp_path / "run"
    args = ["run", "pi07/zero2/2x8xH100", "launch.launcher=kubernetes", "launch.image=ghcr.io/team/train:1"]
    env = {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "KUBECTL_LOG": str(log)}
    r = run_cli(*args, "--output-dir", str(run_dir), env=env)
    assert r.returncode == 0, r.stderr
    calls = log.read_text().splitlines()
    assert calls[0].startswith("create configmap pi07-zero2-2x8xh100-4fabab63-files --from-file=" + str(run_dir))
    assert calls[1] == "apply -f -" and calls[2] == f"apply -f {run_dir / 'kubernetes.yaml'}"
    assert (tmp_path / "kubectl.log.stdin").read_text() == "kind: ConfigMap\n"
    assert "kubectl logs -f pi07-zero2-2x8xh100-4fabab63-master-0" in r.stderr
    refused = run_cli(*args, "--output-dir", str(tmp_path / "run2"), env={**env, "KUBECTL_EXIT": "1"})
    assert refused.returncode == 2 and "kubectl could not make the job (exit 1)" in refused.stderr
    bare = run_cli(*args, "--output-dir", str(tmp_path / "run3"), env={"PATH": os.path.dirname(sys.executable)})
    assert bare.returncode == 127 and "kubectl not found on PATH (hint: install kubectl" in bare.stderr
