"""The PipelineSpec IR as a typed, validated tree: components, DAGs, tasks and executors."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from headwater.errors import PipelineSpecError, UnsupportedFeatureError
from headwater.spec.cel import Condition, compile_condition
from headwater.spec.types import PARAMETER_TYPES

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

    def component(self, name: str) -> ComponentSpec:
        """The component called `name` (validated to exist)."""
        return self.components[name]


_CONTROL_FLOW_PREFIXES = ("condition-branches-", "condition-", "for-loop-", "exit-handler-")


def is_control_flow_task(task_name: str) -> bool:
    """True for the DAG groups the compiler makes (conditions, loops, exit handlers)."""
    number = task_name.rpartition("-")[2]
    return number.isdigit() and any(task_name.startswith(p) for p in _CONTROL_FLOW_PREFIXES)


def parse_pipeline(doc: Mapping[str, Any], platform: Mapping[str, Any] | None = None) -> PipelineIR:
    """Validate a PipelineSpec document (as from YAML/JSON) and build the typed tree.

    Raises:
        PipelineSpecError: The document is not a PipelineSpec or is internally inconsistent.
        UnsupportedFeatureError: It uses an executor kind Headwater does not run.
        ConditionError: A trigger condition is not valid CEL.
    """
    if not isinstance(doc, Mapping) or "root" not in doc or "pipelineInfo" not in doc:
        keys = ", ".join(sorted(doc)) if isinstance(doc, Mapping) else type(doc).__name__
        raise PipelineSpecError(
            f"not a KFP PipelineSpec (expected keys 'pipelineInfo', 'root', 'components', "
            f"'deploymentSpec'; got {keys or 'nothing'}): compile the pipeline with "
            "kfp.compiler.Compiler or pass the .py file"
        )
    name = str(_get(doc, "pipelineInfo", Mapping).get("name") or "pipeline")
    executors = _get(_get(doc, "deploymentSpec", Mapping, {}), "executors", Mapping, {})
    for label, executor in executors.items():
        _check_executor(label, executor)
    raw_components = _get(doc, "components", Mapping, {})
    components = {cname: _component(cname, c) for cname, c in raw_components.items()}
    root = _component("root", _get(doc, "root", Mapping))
    ir = PipelineIR(
        name=name,
        root=root,
        components=components,
        executors=executors,
        platform=platform or {},
        raw=doc,
        default_pipeline_root=str(doc.get("defaultPipelineRoot") or ""),
    )
    _check_references(ir)
    return ir


def _get(doc: Mapping[str, Any], key: str, kind: type, default: Any = ...) -> Any:
    if key not in doc:
        if default is ...:
            raise PipelineSpecError(f"malformed PipelineSpec: missing {key!r}")
        return default
    value = doc[key]
    if not isinstance(value, kind):
        raise PipelineSpecError(
            f"malformed PipelineSpec: {key!r} should be a {kind.__name__}, got {value!r:.80}"
        )
    return value


def _check_executor(label: str, executor: Mapping[str, Any]) -> None:
    if "container" in executor or "importer" in executor:
        return
    kind = next(iter(executor), "nothing")
    named = {
        "resolver": "a resolver (artifact query) executor",
        "customJob": "a Vertex AI custom job executor",
    }.get(kind, f"executor kind {kind!r}")
    raise UnsupportedFeatureError(
        f"executor {label!r} is {named}, which runs only on Vertex AI Pipelines; Headwater runs "
        "container, lightweight Python and importer executors"
    )


def _interface(raw: Mapping[str, Any]) -> Interface:
    ins = raw.get("inputDefinitions") or {}
    outs = raw.get("outputDefinitions") or {}
    return Interface(
        input_parameters=_parameters(ins.get("parameters") or {}),
        input_artifacts=_artifacts(ins.get("artifacts") or {}),
        output_parameters=_parameters(outs.get("parameters") or {}),
        output_artifacts=_artifacts(outs.get("artifacts") or {}),
    )


def _parameters(raw: Mapping[str, Any]) -> dict[str, ParameterDef]:
    params = {}
    for name, spec in raw.items():
        ptype = spec.get("parameterType", "STRING")
        if ptype not in PARAMETER_TYPES:
            raise PipelineSpecError(f"parameter {name!r} has unknown type {ptype!r}")
        params[name] = ParameterDef(
            name=name,
            type=ptype,
            optional=bool(spec.get("isOptional", False)),
            has_default="defaultValue" in spec,
            default=spec.get("defaultValue"),
        )
    return params


def _artifacts(raw: Mapping[str, Any]) -> dict[str, ArtifactDef]:
    artifacts = {}
    for name, spec in raw.items():
        type_ = spec.get("artifactType") or {}
        artifacts[name] = ArtifactDef(
            name=name,
            schema_title=str(type_.get("schemaTitle", "system.Artifact")),
            schema_version=str(type_.get("schemaVersion", "0.0.1")),
            is_list=bool(spec.get("isArtifactList", False)),
            optional=bool(spec.get("isOptional", False)),
        )
    return artifacts


def _component(name: str, raw: Mapping[str, Any]) -> ComponentSpec:
    if not isinstance(raw, Mapping):
        raise PipelineSpecError(f"malformed PipelineSpec: component {name!r} is not a mapping")
    interface = _interface(raw)
    if "dag" in raw:
        dag_raw = raw["dag"] or {}
        tasks = {t: _task(t, spec) for t, spec in (dag_raw.get("tasks") or {}).items()}
        outputs = dag_raw.get("outputs") or {}
        dag = DagSpec(
            tasks=tasks,
            output_parameters=outputs.get("parameters") or {},
            output_artifacts=outputs.get("artifacts") or {},
        )
        return ComponentSpec(name, interface, dag=dag)
    if "executorLabel" in raw:
        return ComponentSpec(name, interface, executor_label=str(raw["executorLabel"]))
    raise PipelineSpecError(f"component {name!r} has neither a 'dag' nor an 'executorLabel'")


def _duration(text: Any, default: float) -> float:
    if text in (None, ""):
        return default
    value = str(text).strip()
    try:
        return float(value[:-1]) if value.endswith("s") else float(value)
    except ValueError as exc:
        raise PipelineSpecError(f"bad duration {value!r}: expected seconds such as '30s'") from exc


def _task(name: str, raw: Mapping[str, Any]) -> TaskSpec:
    ref = (raw.get("componentRef") or {}).get("name")
    if not ref:
        raise PipelineSpecError(f"task {name!r} has no componentRef")
    inputs = raw.get("inputs") or {}
    trigger = raw.get("triggerPolicy") or {}
    condition = None
    if trigger.get("condition"):
        condition = compile_condition(str(trigger["condition"]), task=name)
    iterator = None
    if "parameterIterator" in raw:
        spec = raw["parameterIterator"]
        items = spec.get("items") or {}
        raw_items = None
        if "raw" in items:
            try:
                raw_items = json.loads(items["raw"])
            except ValueError as exc:
                raise PipelineSpecError(f"task {name!r}: loop items are not JSON") from exc
        iterator = Iterator(
            "parameter", spec["itemInput"], raw=raw_items, input_name=items.get("inputParameter")
        )
    elif "artifactIterator" in raw:
        spec = raw["artifactIterator"]
        iterator = Iterator(
            "artifact", spec["itemInput"], input_name=(spec.get("items") or {}).get("inputArtifact")
        )
    retry = None
    if "retryPolicy" in raw:
        rp = raw["retryPolicy"]
        retry = RetryPolicy(
            max_retries=int(rp.get("maxRetryCount", 0)),
            backoff=_duration(rp.get("backoffDuration"), 0.0),
            factor=float(rp.get("backoffFactor", 2.0)),
            max_backoff=_duration(rp.get("backoffMaxDuration"), 3600.0),
        )
    caching = raw.get("cachingOptions") or {}
    return TaskSpec(
        name=name,
        component=str(ref),
        dependencies=tuple(raw.get("dependentTasks") or ()),
        parameter_inputs=inputs.get("parameters") or {},
        artifact_inputs=inputs.get("artifacts") or {},
        condition=condition,
        all_upstream_completed=trigger.get("strategy") == ALL_UPSTREAM_TASKS_COMPLETED,
        iterator=iterator,
        parallelism=int((raw.get("iteratorPolicy") or {}).get("parallelismLimit", 0)),
        retry=retry,
        enable_cache=bool(caching.get("enableCache", False)),
        cache_key=str(caching.get("cacheKey", "")),
    )


def _check_references(ir: PipelineIR) -> None:
    for comp in [ir.root, *ir.components.values()]:
        if comp.executor_label is not None and comp.executor_label not in ir.executors:
            raise PipelineSpecError(
                f"component {comp.name!r} names executor {comp.executor_label!r}, "
                "which deploymentSpec.executors does not define"
            )
        if comp.dag is None:
            continue
        for task in comp.dag.tasks.values():
            if task.component not in ir.components:
                raise PipelineSpecError(
                    f"task {task.name!r} refers to component {task.component!r}, "
                    "which the PipelineSpec does not define"
                )
            for dep in task.dependencies:
                if dep not in comp.dag.tasks:
                    raise PipelineSpecError(
                        f"task {task.name!r} depends on {dep!r}, which is not in its DAG"
                    )
