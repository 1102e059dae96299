"""The typed tree of a PipelineSpec: components, DAGs, tasks and their interfaces.

`spec.ir.parse_pipeline` builds it (and `spec.validate` checks it); both import the types from
here, so neither imports the other's module for them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from headwater.spec.cel import Condition

if TYPE_CHECKING:
    from headwater.platform.kubernetes import ExecutorSettings

__all__ = [
    "ALL_UPSTREAM_TASKS_COMPLETED",
    "ArtifactDef",
    "ComponentSpec",
    "DagSpec",
    "Interface",
    "Iterator",
    "ParameterDef",
    "PipelineIR",
    "RetryPolicy",
    "TaskSpec",
    "is_control_flow_task",
]

ALL_UPSTREAM_TASKS_COMPLETED = "ALL_UPSTREAM_TASKS_COMPLETED"


@dataclass(frozen=True)
class ParameterDef:
    """An input or output parameter a component declares."""

    name: str
    type: str
    optional: bool = False
    has_default: bool = False
    default: Any = None


@dataclass(frozen=True)
class ArtifactDef:
    """An input or output artifact a component declares."""

    name: str
    schema_title: str
    schema_version: str = "0.0.1"
    is_list: bool = False
    optional: bool = False


@dataclass(frozen=True)
class Interface:
    """The inputs and outputs of a component (a DAG or an executor)."""

    input_parameters: Mapping[str, ParameterDef]
    input_artifacts: Mapping[str, ArtifactDef]
    output_parameters: Mapping[str, ParameterDef]
    output_artifacts: Mapping[str, ArtifactDef]


@dataclass(frozen=True)
class RetryPolicy:
    """`set_retry`: attempts after the first, and the backoff between them in seconds."""

    max_retries: int
    backoff: float = 0.0
    factor: float = 2.0
    max_backoff: float = 3600.0

    def delay(self, attempt: int) -> float:
        """Seconds to wait before retry number `attempt` (1-based)."""
        return float(min(self.backoff * self.factor ** (attempt - 1), self.max_backoff))


@dataclass(frozen=True)
class Iterator:
    """A ParallelFor: the items and the DAG input that receives each one."""

    kind: str  # "parameter" | "artifact"
    item_input: str
    raw: list[Any] | None = None  # constant items
    input_name: str | None = None  # the task input holding the items


@dataclass(frozen=True)
class TaskSpec:
    """One task of a DAG, with its inputs as the raw IR selectors."""

    name: str
    component: str
    dependencies: tuple[str, ...]
    parameter_inputs: Mapping[str, Mapping[str, Any]]
    artifact_inputs: Mapping[str, Mapping[str, Any]]
    condition: Condition | None = None
    all_upstream_completed: bool = False
    iterator: Iterator | None = None
    parallelism: int = 0
    retry: RetryPolicy | None = None
    enable_cache: bool = False
    cache_key: str = ""


@dataclass(frozen=True)
class DagSpec:
    """The tasks of a DAG component and how its outputs are selected."""

    tasks: Mapping[str, TaskSpec]
    output_parameters: Mapping[str, Mapping[str, Any]]
    output_artifacts: Mapping[str, Mapping[str, Any]]


@dataclass(frozen=True)
class ComponentSpec:
    """A component: an interface plus either a DAG or an executor label."""

    name: str
    interface: Interface
    dag: DagSpec | None = None
    executor_label: str | None = None


@dataclass(frozen=True)
class PipelineIR:
    """A whole validated pipeline."""

    name: str
    root: ComponentSpec
    components: Mapping[str, ComponentSpec]
    executors: Mapping[str, Mapping[str, Any]]
    platform: Mapping[str, Any] = field(default_factory=dict)
    raw: Mapping[str, Any] = field(default_factory=dict)
    default_pipeline_root: str = ""
    #: kfp-kubernetes settings by executor label (`headwater.platform.kubernetes`).
    kubernetes: Mapping[str, ExecutorSettings] = field(default_factory=dict)

    def component(self, name: str) -> ComponentSpec:
        """The component called `name` (validated to exist)."""
        return self.components[name]


_CONTROL_FLOW_PREFIXES = ("condition-branches-", "condition-", "for-loop-", "exit-handler-")


def is_control_flow_task(task_name: str) -> bool:
    """True for the DAG groups the compiler makes (conditions, loops, exit handlers)."""
    number = task_name.rpartition("-")[2]
    return number.isdigit() and any(task_name.startswith(p) for p in _CONTROL_FLOW_PREFIXES)
