"""What one attempt of one task gets from its kfp-kubernetes settings, and the pod it emulates.

`TaskPlatform` is the plan the engine builds (`ExecutorSettings.plan`) and the task process
applies (`headwater.platform.apply`); it holds names and paths, never a secret's value.
`pod_metadata` and `field_value` answer the Downward API field paths a task asks for, as
Kubernetes would for the task's pod.
"""

from __future__ import annotations

import re
import socket
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from headwater.platform.secrets import SECRET, LocalSecretStore

#: What KFP's backend puts on every task pod (argocompiler and the API server).
KFP_LABELS = {"pipelines.kubeflow.org/v2_component": "true"}
KFP_ANNOTATIONS = {"pipelines.kubeflow.org/v2_component": "true"}
NAMESPACE = "default"
SERVICE_ACCOUNT = "pipeline-runner"  # KFP's default runner service account

_SUBSCRIPT = re.compile(r"metadata\.(labels|annotations)\['([^']*)'\]\Z")
FIELD_PATHS = {
    "metadata.name",
    "metadata.namespace",
    "metadata.uid",
    "spec.nodeName",
    "spec.serviceAccountName",
    "status.hostIP",
    "status.hostIPs",
    "status.podIP",
    "status.podIPs",
}


@dataclass(frozen=True)
class EnvFile:
    """An environment variable whose value is in a file the task process reads."""

    env: str
    path: str
    optional: bool
    what: str


@dataclass(frozen=True)
class Mount:
    """A directory the task sees at `target`: `source` bound there, or a fresh tmpfs."""

    target: str
    source: str = ""  # "" means a fresh, empty tmpfs
    read_only: bool = False
    what: str = ""
    size: str = ""
    fresh: bool = False  # empty `source` first (scratch directories start empty every attempt)
    owned: bool = False  # Headwater's own directory, so mount points may be made inside it

    def to_payload(self) -> dict[str, Any]:
        """A JSON-able form for the task process."""
        return dict(vars(self))


@dataclass(frozen=True)
class TaskPlatform:
    """What one attempt of one task gets from its kfp-kubernetes settings.

    Carried by the `Launch`; the task process applies it (`headwater.platform.apply`) before
    the component starts. It never holds a secret's value.
    """

    env: Mapping[str, str] = field(default_factory=dict)
    env_files: tuple[EnvFile, ...] = ()
    mounts: tuple[Mount, ...] = ()
    pod: Mapping[str, Any] = field(default_factory=dict)
    timeout: int = 0
    operation: Mapping[str, str] | None = None
    warnings: tuple[str, ...] = ()
    settings: Mapping[str, Any] = field(default_factory=dict)
    #: (kind, name, store root, keys or None for all) of every object read, for the cache key.
    sources: tuple[tuple[str, str, str, tuple[str, ...] | None], ...] = ()
    #: The names of the volumes (PVCs) mounted, for the cache key.
    volumes: tuple[str, ...] = ()

    def to_payload(self) -> dict[str, Any]:
        """A JSON-able form for the task process."""
        return {
            "env": dict(self.env),
            "env_files": [vars(f) for f in self.env_files],
            "mounts": [m.to_payload() for m in self.mounts],
            "pod": dict(self.pod),
            "timeout": self.timeout,
            "operation": dict(self.operation) if self.operation else None,
            "warnings": list(self.warnings),
            "masked": self.masked(),
        }

    def masked(self) -> list[str]:
        """Where the values of the secrets the task is given are: files of single keys, or
        a secret's directory when all its keys are given. The task masks those values in
        its output (`headwater.platform.masking`); config maps are not secret."""
        paths = []
        for kind, name, root, keys in self.sources:
            if kind != SECRET:
                continue
            where = Path(root) / name
            paths += [str(where)] if keys is None else [str(where / key) for key in keys]
        return paths

    def cache_material(self) -> dict[str, Any]:
        """What the settings add to the task's cache key.

        The settings as written (which secrets, keys, paths and labels); a keyed digest of
        each secret's and config map's values, so a changed value is a cache miss while
        nothing about the value can be learned from the key; and the names of the volumes
        mounted, so a task reading a volume that CreatePVC made in this run runs again.
        Field path values (the pod name holds the run id) are left out: they would make
        every run a miss. Volume contents are left out too, as KFP does: a volume is shared,
        mutable state. CreatePVC and DeletePVC are never served from the cache, since their
        effect is on the machine.
        """
        if self.operation is not None:
            return {"operation": self.operation["kind"], "nonce": uuid.uuid4().hex}
        digests = {
            f"{kind}/{name}": LocalSecretStore(Path(root), kind).digest(name, keys)
            for kind, name, root, keys in self.sources
        }
        return {"settings": self.settings, "values": digests, "volumes": list(self.volumes)}


def pod_metadata(
    labels: Mapping[str, str],
    annotations: Mapping[str, str],
    *,
    run_id: str,
    task_id: int,
    attempt: int,
) -> dict[str, Any]:
    """The metadata of the pod a task attempt would have had on KFP.

    Its name is the task's id in the run (`{{$.pipeline_task_uuid}}`), its uid one per
    attempt; the labels and annotations are the task's own plus those KFP puts on every pod.
    """
    return {
        "name": f"{run_id}-{task_id}",
        "namespace": NAMESPACE,
        "uid": str(uuid.uuid5(uuid.NAMESPACE_URL, f"headwater:{run_id}/{task_id}/{attempt}")),
        "labels": {**labels, **KFP_LABELS, "pipeline/runid": run_id},
        "annotations": {**annotations, **KFP_ANNOTATIONS},
        "nodeName": socket.gethostname(),
    }


def field_value(path: str, pod: Mapping[str, Any]) -> str:
    """The value of a Downward API field path for a pod (a missing label is '')."""
    match = _SUBSCRIPT.match(path)
    if match:
        return str(pod[match.group(1)].get(match.group(2), ""))
    if path.startswith("metadata."):
        return str(pod[path.removeprefix("metadata.")])
    return {
        "spec.nodeName": str(pod["nodeName"]),
        "spec.serviceAccountName": SERVICE_ACCOUNT,
    }.get(path, "127.0.0.1")  # status.hostIP(s), status.podIP(s): one machine, one address


def is_field_path(path: str) -> bool:
    """True for a field path Kubernetes can expose as an environment variable."""
    return path in FIELD_PATHS or bool(_SUBSCRIPT.match(path))
