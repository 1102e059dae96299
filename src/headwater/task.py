"""The task vocabulary: what an engine hands an executor and gets back.

Launches, outputs, results, task states, resource requests and the task error record. It sits
below `engine/`, `executors/` and `caching/`, which all speak it, so none of them imports upward.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from headwater.spec.placeholders import PlaceholderContext

if TYPE_CHECKING:
    from headwater.platform.pod import TaskPlatform
    from headwater.sandbox.policy import SandboxPolicy


class TaskState(str, enum.Enum):
    """Where a task is in its life. The last four are final."""

    PENDING = "PENDING"
    READY = "READY"
    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    SKIPPED = "SKIPPED"
    CANCELED = "CANCELED"

    @property
    def final(self) -> bool:
        """True once the task will not change again."""
        return self in _FINAL


_FINAL = {TaskState.SUCCEEDED, TaskState.FAILED, TaskState.SKIPPED, TaskState.CANCELED}

#: The iteration indices at the end of a task's name: `add[3]`, `train[1][0]`.
_ITERATIONS = re.compile(r"((?:\[\d+\])+)$")


def iteration_name(name: str, index: int) -> str:
    """The name of iteration `index` of a loop's task `name` (`add[3]`): the one place the
    form is written; `split_iterations` reads it back."""
    return f"{name}[{index}]"


def split_iterations(name: str) -> tuple[str, tuple[int, ...]]:
    """A task name and the loop iterations it belongs to, outermost first:
    `split_iterations("inner.add[1][0]") == ("inner.add", (1, 0))`; `(name, ())` outside
    a loop."""
    match = _ITERATIONS.search(name)
    if match is None or match.start() == 0:
        return name, ()
    indices = tuple(int(i) for i in re.findall(r"\d+", match.group(1)))
    return name[: match.start()], indices


@dataclass
class TaskError:
    """Structured record of why a task failed (a record, not an exception).

    Reported back from the task process, or made by the engine when a task cannot start.
    """

    task: str
    error_type: str
    message: str
    traceback: str = ""
    exit_code: int | None = None
    log_path: str | None = None


@dataclass
class Outputs:
    """A task's outputs: parameter values and, per output name, a list of artifact dicts.

    An artifact dict has KFP's runtime shape: `{"name", "type": {"schemaTitle",
    "schemaVersion"}, "uri", "metadata"}`.
    """

    parameters: dict[str, Any] = field(default_factory=dict)
    artifacts: dict[str, list[dict[str, Any]]] = field(default_factory=dict)


@dataclass(frozen=True)
class ResourceRequest:
    """What a task asks of the machine. `cpu`/`memory` of 0 mean "not requested"."""

    cpu: float = 0.0
    memory: float = 0.0  # bytes
    accelerators: int = 0
    accelerator_type: str = ""


@dataclass(frozen=True)
class InImage:
    """How one task runs in its container image, by a container runtime (Podman or Docker).

    The engine decides it (`headwater.executors.containers`); a launch without one runs on
    the host.
    """

    #: The runtime's program: a name found on PATH (`podman`, `docker`) or a path.
    runtime: str
    #: The image the component names.
    image: str
    #: What to run: the image id the engine resolved, or `image` when it could not (the
    #: task pulls it where it runs, by `pull`).
    ref: str
    #: The image's id (sha256 of its config) when resolved; part of the task's cache key.
    digest: str = ""
    #: kfp-kubernetes' image pull policy: IfNotPresent, Always or Never.
    pull: str = "IfNotPresent"
    #: A lightweight Python component, run by KFP's executor inside (`containers: always`).
    python: bool = False
    #: More arguments for the runtime's `run` (`HEADWATER_CONTAINER_ARGS`).
    args: tuple[str, ...] = ()
    #: The container's cpu (cores) and memory (bytes) limits; 0 for none.
    cpu_limit: float = 0.0
    memory_limit: float = 0.0

    def record(self) -> dict[str, str]:
        """What the run's record keeps of it, per task."""
        return {"runtime": self.runtime, "image": self.image, "digest": self.digest}


@dataclass(frozen=True)
class Launch:
    """Everything an executor needs to run one attempt of one executor task.

    Built once, by the engine, when the attempt becomes ready; nothing changes it afterwards.
    What the scheduler decides later travels beside it: the engine keeps the task's cache key,
    and a task given devices is handed a copy with them (`dataclasses.replace`).
    """

    task_id: int
    name: str
    component: str
    executor_label: str
    container: dict[str, Any]
    executor_input: dict[str, Any]
    placeholders: PlaceholderContext
    workdir: Path
    log_path: Path
    env: dict[str, str]
    resources: ResourceRequest
    output_types: dict[str, str]
    attempt: int = 1
    cache_enabled: bool = False
    cache_key: str = ""
    #: Directories of installed `packages_to_install`, put on the task's import path.
    python_path: tuple[str, ...] = ()
    #: The devices the scheduler gave the task (CUDA_VISIBLE_DEVICES); not part of the task's
    #: identity, so not of its cache key.
    device_env: dict[str, str] = field(default_factory=dict)
    #: What the task's kfp-kubernetes settings give it (env, secret files, mounts); None if none.
    platform: TaskPlatform | None = None
    #: The task's own directory under the pipeline root, where its output artifacts go (and
    #: the logs of executors that run it elsewhere).
    task_root: str = ""
    #: The most bytes the attempt's log keeps (see `headwater.logs`); None for no cap.
    log_limit: int | None = None
    #: The container image it runs in, and how; None to run on the host.
    in_image: InImage | None = None
    #: How it is isolated (`headwater.sandbox`): on the host, in a sandbox of its own; in its
    #: image, with only its own paths mounted. None: as it is.
    sandbox: SandboxPolicy | None = None
    #: Its cpu (cores) and memory (bytes) limits, 0 for none: enforced in a sandbox or an image.
    limits: tuple[float, float] = (0.0, 0.0)


@dataclass
class TaskResult:
    """How one attempt ended: outputs on success, a structured error otherwise."""

    task_id: int
    outputs: Outputs | None = None
    error: TaskError | None = None
    cached: bool = False
    #: False when another attempt cannot help (the machine can never satisfy the request).
    retryable: bool = True
    #: For a cached result, the execution whose outputs were reused.
    cached_from: int | None = None
    #: True when the result was reused from the run being resumed.
    resumed: bool = False
    #: For a cached result, the metadata store's ids of its artifacts by URI.
    artifact_ids: dict[str, int] = field(default_factory=dict)
    #: Why the attempt's outcome is a failure though it succeeded (the task said so, see
    #: `headwater.outcome`): its outputs flow on, but the cache never reuses them.
    failed_outcome: str | None = None
    #: Which worker ran the attempt (a host name, or a Dask worker's address).
    worker: str | None = None
    #: Where the attempt's log went, when not at its launch's `log_path` (a URI).
    log_uri: str | None = None
    #: The attempt's log itself, when it ran elsewhere and the log is small enough to travel
    #: with the result (saves the engine fetching it from `log_uri`).
    log_bytes: bytes | None = None
    #: The container it ran in, `{"runtime", "image", "digest"}`; None when on the host.
    container: dict[str, str] | None = None
    #: The sandbox it ran in, and what it enforced (`sandbox.join.RECORD_FILE`); None: none.
    sandbox: dict[str, Any] | None = None
    #: What the sandboxed task asked the engine to do for it (`config.TASK_REQUESTS_ENV`).
    requests: list[dict[str, Any]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when the attempt succeeded."""
        return self.error is None
