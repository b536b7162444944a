"""`launch.launcher: kubernetes`: a Kubeflow training-operator `PyTorchJob` (kubeflow.org/v1) that
runs `launch.sh` once per node, one pod per node.

The operator (v1.9, pkg/controller.v1/pytorch/envvar.go and master.go) gives every pod RANK (the
node's rank: Master 0, Worker i is i + 1), MASTER_ADDR (the Master pod's service,
`<job>-master-0`) and MASTER_PORT (the container port named `pytorchjob-port`), plus WORLD_SIZE
and PET_* copies for torchrun. The pod hands RANK, MASTER_ADDR and MASTER_PORT to launch.sh as
MACHINE_RANK, MAIN_PROCESS_IP and MAIN_PROCESS_PORT and unsets the rest: torchrun reads PET_*
as defaults for its flags, and launch.sh already passes every one explicitly.

The run folder's files reach the pods through a ConfigMap, `<job>-files`, made from the run folder
(`configmap_argv`); it is not written into the manifest, so the manifest can sit in the run folder
and recipe.lock.yaml can hash it without hashing itself.
"""

from __future__ import annotations

import hashlib
import re
import shlex

import yaml

from registry import view
from registry.errors import Exit, RecipeError
from registry.files import schema_documents
from registry.topology import nodes, processes_per_node

MANIFEST = "kubernetes.yaml"
API_VERSION = "kubeflow.org/v1"
KUBECTL_HINT = (
    "install kubectl (https://kubernetes.io/docs/tasks/tools/) and point it at a cluster running the "
    "Kubeflow training operator v1.9 (kubectl apply --server-side -k "
    '"github.com/kubeflow/training-operator.git/manifests/overlays/standalone?ref=v1.9.0")'
)
# the operator finds the rendezvous port and the training container by these names (pytorch_types.go)
CONTAINER = "pytorch"
PORT_NAME = "pytorchjob-port"
FILES_MOUNT = "/etc/recipe"  # the ConfigMap, read-only
RUN_DIR = "/recipe"  # an emptyDir: launch.sh writes each node's accelerate yaml beside itself
# /dev/shm per process on a node: DataLoader workers hand each batch to their rank through shared
# memory (num_workers x prefetch_factor batches in flight, camera frames make them large) and NCCL's
# SHM transport takes a few MiB per peer. A memory-medium emptyDir is a cap, not a reservation: pages
# count against the pod only once written; without a cap the tmpfs may grow to the node's memory.
SHM_PER_PROCESS_GI = 8
# declared once, in schemas/launch.schema.json (validation refuses them first); read here for the
# manifest's own check
_LAUNCH = schema_documents()["launch.schema.json"]["properties"]
QUANTITY = re.compile(_LAUNCH["kubernetes"]["properties"]["shm_size"]["pattern"])
IMAGE = re.compile(_LAUNCH["image"]["pattern"])  # [registry[:port]/]path[:tag][@sha256:digest]
# operator-set variables that must not reach the launchers (see the module's docstring)
OPERATOR_ENV = (
    "RANK",
    "WORLD_SIZE",
    "MASTER_ADDR",
    "MASTER_PORT",
    "PET_MASTER_ADDR",
    "PET_MASTER_PORT",
    "PET_NNODES",
    "PET_NODE_RANK",
    "PET_NPROC_PER_NODE",
)


def job_name(doc) -> str:
    """The recipe's name as a DNS-1035 label (the operator's webhook requires one), short enough that
    the pods' services, `<job>-worker-<i>`, are labels too (63 characters at most). The label folds
    names together (exp/a_b, exp/a.b and Exp/a-b are all exp-a-b, and long ones are cut), so a
    digest of the full name follows it: two recipes never share a job or a ConfigMap."""
    name = view.of(doc).recipe.name or "recipe"
    label = re.sub(r"-+", "-", re.sub(r"[^a-z0-9]", "-", name.lower())).strip("-")
    if not label[:1].isalpha():
        label = f"r-{label}".rstrip("-")
    digest = hashlib.sha256(name.encode()).hexdigest()[:8]
    room = 63 - len(f"-worker-{max(nodes(doc) - 2, 0)}") - len(f"-{digest}")
    return f"{label[:room].rstrip('-')}-{digest}"


def configmap_name(doc) -> str:
    return f"{job_name(doc)}-files"


def shm_size(doc) -> str:
    settings = view.of(doc).launch.get("kubernetes") or {}
    size = settings.get("shm_size")
    if size is None:
        return f"{SHM_PER_PROCESS_GI * processes_per_node(doc)}Gi"
    if not QUANTITY.match(str(size)):
        raise RecipeError(
            f"launch.kubernetes.shm_size must be a Kubernetes quantity such as 64Gi, not {size!r}", Exit.INVALID
        )
    return str(size)


def check_image(image) -> str:
    if not isinstance(image, str) or not IMAGE.match(image):
        raise RecipeError(
            f"launch.image must be a container image reference such as nvcr.io/nvidia/pytorch:25.01-py3, not {image!r}",
            Exit.INVALID,
        )
    return image


def pod_command(count: int) -> list[str]:
    """The container's argv: copy the run folder out of the read-only ConfigMap, then launch.sh
    with this node's rank and the Master's address."""
    script = [
        "set -euo pipefail",
        f"cp -L {FILES_MOUNT}/* {RUN_DIR}/",  # -L: ConfigMap keys are symlinks into ..data
    ]
    if count > 1:
        script.append('export MACHINE_RANK="$RANK" MAIN_PROCESS_IP="$MASTER_ADDR" MAIN_PROCESS_PORT="$MASTER_PORT"')
    script += [
        "unset " + " ".join(OPERATOR_ENV),
        f"exec bash {RUN_DIR}/launch.sh",
    ]
    return ["bash", "-c", "\n".join(script)]


def replica(doc, image: str, replicas: int) -> dict:
    recipe = view.of(doc)
    gpus = recipe.hardware.gpus_per_node or 0
    container = {
        "name": CONTAINER,
        "image": image,
        "command": pod_command(nodes(recipe)),
        "workingDir": RUN_DIR,
        "ports": [{"name": PORT_NAME, "containerPort": recipe.launch.main_process_port, "protocol": "TCP"}],
        "volumeMounts": [
            {"name": "files", "mountPath": FILES_MOUNT, "readOnly": True},
            {"name": "run", "mountPath": RUN_DIR},
            {"name": "dshm", "mountPath": "/dev/shm"},
        ],
    }
    if gpus:
        # extended resources are requested by their limit alone (requests default to it)
        container["resources"] = {"limits": {"nvidia.com/gpu": gpus}}
    return {
        "replicas": replicas,
        # static rendezvous: a node restarted alone cannot rejoin the others, so a failure ends the job
        "restartPolicy": "Never",
        "template": {
            "spec": {
                "containers": [container],
                "volumes": [
                    {"name": "files", "configMap": {"name": configmap_name(doc)}},
                    {"name": "run", "emptyDir": {}},
                    {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": shm_size(doc)}},
                ],
            }
        },
    }


def pytorchjob(doc, image: str) -> dict:
    """One Master pod (node rank 0) and nodes - 1 Workers (ranks 1..), the operator's form for N nodes."""
    image = check_image(image)
    recipe = view.of(doc)
    count = nodes(recipe)
    specs = {"Master": replica(doc, image, 1)}
    if count > 1:
        specs["Worker"] = replica(doc, image, count - 1)
    return {
        "apiVersion": API_VERSION,
        "kind": "PyTorchJob",
        "metadata": {"name": job_name(doc), "annotations": {"recipe/name": recipe.recipe.name or ""}},
        "spec": {
            # the operator's WORLD_SIZE is replicas x nprocPerNode; launch.sh starts this many per node
            "nprocPerNode": str(processes_per_node(recipe)),
            "pytorchReplicaSpecs": specs,
        },
    }


class _Dumper(yaml.SafeDumper):
    """Multi-line strings (the pod's script) as literal blocks, read as they run."""

    def represent_str(self, data: str):
        return self.represent_scalar("tag:yaml.org,2002:str", data, style="|" if "\n" in data else None)


_Dumper.add_representer(str, _Dumper.represent_str)


def manifest(doc, image: str) -> str:
    """kubernetes.yaml: the PyTorchJob, with how to submit it."""
    name = job_name(doc)
    header = [
        f"# {view.of(doc).recipe.name}: a Kubeflow PyTorchJob (training operator v1.9), one pod per node.",
        "# recipe run applies it; by hand, from the run folder:",
        f"#   kubectl create configmap {configmap_name(doc)} --from-file=. --dry-run=client -o yaml | kubectl apply -f -",
        f"#   kubectl apply -f {MANIFEST} && kubectl logs -f {name}-master-0",
    ]
    body = yaml.dump(pytorchjob(doc, image), Dumper=_Dumper, sort_keys=False, width=1000)
    return "\n".join(header) + "\n" + body


def configmap_argv(doc, run_dir: str) -> list[str]:
    """kubectl's argv printing the run folder as the ConfigMap the pods mount (pipe it to
    `kubectl apply -f -`: apply, unlike create, replaces an older one of the same name)."""
    return [
        "kubectl",
        "create",
        "configmap",
        configmap_name(doc),
        f"--from-file={run_dir}",
        "--dry-run=client",
        "-o",
        "yaml",
    ]


def apply_argv(path: str) -> list[str]:
    return ["kubectl", "apply", "-f", path]


def submit_lines(doc, run_dir: str) -> str:
    """The shell lines `recipe run --dry-run` can show."""
    cm = " ".join(shlex.quote(a) for a in configmap_argv(doc, run_dir))
    job = " ".join(shlex.quote(a) for a in apply_argv(f"{run_dir}/{MANIFEST}"))
    return f"{cm} | kubectl apply -f -\n{job}\n"
