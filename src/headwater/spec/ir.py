"""The PipelineSpec IR as a typed, validated tree: components, DAGs, tasks and executors."""

from __future__ import annotations

import json
import warnings
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from headwater.errors import (
    ParameterError,
    PipelineSpecError,
    SpecVersionWarning,
    UnsupportedFeatureError,
)
from headwater.spec import _read as read
from headwater.spec import selectors
from headwater.spec.cel import compile_condition
from headwater.spec.nodes import (
    ALL_UPSTREAM_TASKS_COMPLETED,
    ArtifactDef,
    ComponentSpec,
    DagSpec,
    Interface,
    Iterator,
    ParameterDef,
    PipelineIR,
    RetryPolicy,
    TaskSpec,
    is_control_flow_task,
)
from headwater.spec.types import PARAMETER_TYPES, coerce, protojson
from headwater.spec.validate import check_pipeline

if TYPE_CHECKING:
    from headwater.platform.kubernetes import ExecutorSettings

__all__ = [
    "ALL_UPSTREAM_TASKS_COMPLETED",
    "SUPPORTED_SCHEMA",
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
    "parse_pipeline",
]

#: The newest IR schema this engine understands. A newer minor version loads with a warning
#: (KFP adds fields compatibly within a major version); a newer major version is refused.
SUPPORTED_SCHEMA = (2, 1)


def parse_pipeline(doc: Mapping[str, Any], platform: Mapping[str, Any] | None = None) -> PipelineIR:
    """Validate a PipelineSpec document (as from YAML/JSON) and build the typed tree.

    Everything the engine reads later is checked here, so a pipeline that loads cannot fail
    at run time for the shape of its IR: wrong types (named by JSON path), references to
    tasks, components, executors or outputs that do not exist, cycles, and placeholders.

    Raises:
        PipelineSpecError: The document is not a PipelineSpec or is internally inconsistent.
        UnsupportedFeatureError: It uses an executor kind Headwater does not run.
        ConditionError: A trigger condition is not valid CEL.
    """
    try:
        return _parse(doc, platform)
    except RecursionError as exc:  # the checks recurse into constants and placeholders
        raise PipelineSpecError(
            "the PipelineSpec nests values too deeply to check (Python's recursion limit was "
            "reached): flatten the deeply nested constant or metadata"
        ) from exc


def _parse(doc: Mapping[str, Any], platform: Mapping[str, Any] | None) -> PipelineIR:
    if not isinstance(doc, Mapping) or "root" not in doc or "pipelineInfo" not in doc:
        keys = ", ".join(sorted(map(str, doc))) if isinstance(doc, Mapping) else type(doc).__name__
        raise PipelineSpecError(
            f"not a KFP PipelineSpec (expected keys 'pipelineInfo', 'root', 'components', "
            f"'deploymentSpec'; got {keys or 'nothing'}): compile the pipeline with "
            "kfp.compiler.Compiler or pass the .py file"
        )
    _check_schema_version(doc.get("schemaVersion"))
    info = read.mapping(doc["pipelineInfo"], "pipelineInfo")
    name = read.text(info.get("name"), "pipelineInfo.name") or "pipeline"
    deployment = read.mapping(doc.get("deploymentSpec"), "deploymentSpec")
    executors = read.named(deployment.get("executors"), "deploymentSpec.executors")
    for label, executor in executors.items():
        _check_executor(label, read.mapping(executor, f"deploymentSpec.executors.{label}"))
    raw_components = read.named(doc.get("components"), "components")
    components = {
        cname: _component(cname, c, f"components.{cname}") for cname, c in raw_components.items()
    }
    root = _component("root", doc["root"], "root")
    # The platform document travels inside `raw` too, so a run resumed from the store has it.
    platform = read.mapping(doc.get("platforms") if platform is None else platform, "platforms")
    ir = PipelineIR(
        name=name,
        root=root,
        components=components,
        executors=executors,
        platform=platform,
        raw={**doc, "platforms": platform} if platform else doc,
        default_pipeline_root=read.text(doc.get("defaultPipelineRoot"), "defaultPipelineRoot"),
        kubernetes=_kubernetes(platform, executors),
    )
    check_pipeline(ir)
    return ir


def _kubernetes(
    platform: Mapping[str, Any], executors: Mapping[str, Any]
) -> dict[str, ExecutorSettings]:
    """kfp-kubernetes settings, parsed only when there are any (CreatePVC has none but is one)."""
    stubs = (str((e.get("container") or {}).get("image", "")) for e in executors.values())
    if not platform and not any(image.startswith("argostub/") for image in stubs):
        return {}
    from headwater.platform.kubernetes import parse_settings

    return parse_settings(platform, executors)


def _check_schema_version(value: Any) -> None:
    if value is None:  # hand-written IR often leaves it out
        return
    version = read.text(value, "schemaVersion")
    parts = version.split(".")
    if not (2 <= len(parts) <= 3 and all(p.isdigit() for p in parts)):
        read.malformed("schemaVersion", "a version such as '2.1.0'", value)
    major, minor = int(parts[0]), int(parts[1])
    supported = ".".join(map(str, SUPPORTED_SCHEMA))
    if major != SUPPORTED_SCHEMA[0]:
        newer = "newer" if major > SUPPORTED_SCHEMA[0] else "older"
        raise PipelineSpecError(
            f"IR schemaVersion {version} is {newer} than Headwater supports "
            f"({SUPPORTED_SCHEMA[0]}.x, up to {supported}): compile the pipeline with a KFP SDK "
            "that writes PipelineSpec 2.x (kfp 2.x), or upgrade headwater"
        )
    if minor > SUPPORTED_SCHEMA[1]:
        warnings.warn(
            f"IR schemaVersion {version} is newer than Headwater knows ({supported}); "
            "running it anyway, but fields added since are ignored",
            SpecVersionWarning,
            stacklevel=4,
        )


def _check_executor(label: str, executor: Mapping[str, Any]) -> None:
    path = f"deploymentSpec.executors.{label}"
    if "container" in executor:
        _check_container(read.node(executor["container"], path, "container"), path)
        return
    if "importer" in executor:
        _check_importer(read.node(executor["importer"], path, "importer"), path)
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


def _check_container(container: Mapping[str, Any], path: str) -> None:
    path = f"{path}.container"
    read.text(container.get("image"), path, "image")
    read.strings(container.get("command"), path, "command")
    read.strings(container.get("args"), path, "args")
    for index, env in enumerate(read.sequence(container.get("env"), path, "env")):
        where = f"{path}.env[{index}]"
        env = read.mapping(env, where)
        if not read.text(read.required(env, "name", where), where, "name"):
            read.malformed(f"{where}.name", "a variable name", env["name"])
        read.text(env.get("value"), where, "value")
    resources = read.mapping(container.get("resources"), path, "resources")
    for key, value in resources.items():
        where = f"{path}.resources.{key}"
        if key == "accelerator":
            for akey, avalue in read.mapping(value, where).items():
                if akey == "count":
                    read.integer(avalue, f"{where}.{akey}")
                elif isinstance(avalue, bool) or not isinstance(avalue, str | int):
                    read.malformed(f"{where}.{akey}", "a string", avalue)
        elif key.startswith("resource"):  # resourceCpuLimit & co: strings, maybe placeholders
            read.text(value, where)
        else:  # cpuLimit, memoryLimit & co: numbers (cores, GB)
            read.number(value, where)


def _check_importer(importer: Mapping[str, Any], path: str) -> None:
    path = f"{path}.importer"
    uri = read.mapping(importer.get("artifactUri"), path, "artifactUri")
    if "constant" in uri:
        read.text(uri["constant"], path, "artifactUri.constant")
    elif "runtimeParameter" in uri:
        read.text(uri["runtimeParameter"], path, "artifactUri.runtimeParameter")
    type_ = read.mapping(importer.get("typeSchema"), path, "typeSchema")
    read.text(type_.get("schemaTitle"), path, "typeSchema.schemaTitle")
    read.text(type_.get("schemaVersion"), path, "typeSchema.schemaVersion")
    read.mapping(importer.get("metadata"), path, "metadata")
    read.flag(importer.get("reimport"), path, "reimport")


def _interface(raw: Mapping[str, Any], path: str) -> Interface:
    ins = read.mapping(raw.get("inputDefinitions"), path, "inputDefinitions")
    outs = read.mapping(raw.get("outputDefinitions"), path, "outputDefinitions")
    return Interface(
        input_parameters=_parameters(ins.get("parameters"), f"{path}.inputDefinitions.parameters"),
        input_artifacts=_artifacts(ins.get("artifacts"), f"{path}.inputDefinitions.artifacts"),
        output_parameters=_parameters(
            outs.get("parameters"), f"{path}.outputDefinitions.parameters"
        ),
        output_artifacts=_artifacts(outs.get("artifacts"), f"{path}.outputDefinitions.artifacts"),
    )


def _parameters(raw: Any, path: str) -> dict[str, ParameterDef]:
    params = {}
    for name, spec in read.named(raw, path).items():
        where = f"{path}.{name}"
        spec = read.mapping(spec, where)
        ptype = read.text(spec.get("parameterType"), where, "parameterType", "STRING")
        if ptype not in PARAMETER_TYPES:
            raise PipelineSpecError(
                f"parameter {name!r} has unknown type {ptype!r} (at {where}.parameterType; "
                f"known types: {', '.join(PARAMETER_TYPES)})"
            )
        default = spec.get("defaultValue")
        if default is not None and ptype not in ("TASK_FINAL_STATUS", "TASK_CONFIG"):
            try:  # the engine coerces defaults when a run starts or a task needs one
                coerce(protojson(default), ptype, name=name, what="the default of parameter")
            except ParameterError as exc:
                raise PipelineSpecError(f"{exc} (at {where}.defaultValue)") from exc
        params[name] = ParameterDef(
            name=name,
            type=ptype,
            optional=read.flag(spec.get("isOptional"), where, "isOptional"),
            has_default="defaultValue" in spec,
            default=default,
        )
    return params


def _artifacts(raw: Any, path: str) -> dict[str, ArtifactDef]:
    artifacts = {}
    for name, spec in read.named(raw, path).items():
        where = f"{path}.{name}"
        spec = read.mapping(spec, where)
        type_ = read.mapping(spec.get("artifactType"), where, "artifactType")
        artifacts[name] = ArtifactDef(
            name=name,
            schema_title=read.text(
                type_.get("schemaTitle"), where, "artifactType.schemaTitle", "system.Artifact"
            ),
            schema_version=read.text(
                type_.get("schemaVersion"), where, "artifactType.schemaVersion", "0.0.1"
            ),
            is_list=read.flag(spec.get("isArtifactList"), where, "isArtifactList"),
            optional=read.flag(spec.get("isOptional"), where, "isOptional"),
        )
    return artifacts


def _component(name: str, raw: Any, path: str) -> ComponentSpec:
    raw = read.mapping(raw, path)
    interface = _interface(raw, path)
    if "dag" in raw:
        dag_raw = read.mapping(raw["dag"], path, "dag")
        tasks_path = f"{path}.dag.tasks"
        tasks = {
            t: _task(t, spec, f"{tasks_path}.{t}")
            for t, spec in read.named(dag_raw.get("tasks"), tasks_path).items()
        }
        outputs = read.mapping(dag_raw.get("outputs"), path, "dag.outputs")
        dag = DagSpec(
            tasks=tasks,
            output_parameters=selectors.dag_output_parameters(
                outputs.get("parameters"), f"{path}.dag.outputs.parameters"
            ),
            output_artifacts=selectors.dag_output_artifacts(
                outputs.get("artifacts"), f"{path}.dag.outputs.artifacts"
            ),
        )
        return ComponentSpec(name, interface, dag=dag)
    if "executorLabel" in raw:
        label = read.text(raw["executorLabel"], path, "executorLabel")
        return ComponentSpec(name, interface, executor_label=label)
    raise PipelineSpecError(
        f"component {name!r} has neither a 'dag' nor an 'executorLabel' (at {path})"
    )


def _duration(value: Any, default: float, path: str) -> float:
    if value in (None, ""):
        return default
    text = read.text(value, path).strip()
    try:
        return float(text[:-1]) if text.endswith("s") else float(text)
    except ValueError as exc:
        raise PipelineSpecError(
            f"bad duration {text!r} at {path}: expected seconds such as '30s'"
        ) from exc


def _task(name: str, raw: Any, path: str) -> TaskSpec:
    raw = read.mapping(raw, path)
    ref_raw = read.mapping(raw.get("componentRef"), path, "componentRef")
    ref = read.text(ref_raw.get("name"), path, "componentRef.name")
    if not ref:
        raise PipelineSpecError(f"task {name!r} has no componentRef (at {path}.componentRef)")
    inputs = read.mapping(raw.get("inputs"), path, "inputs")
    trigger = read.mapping(raw.get("triggerPolicy"), path, "triggerPolicy")
    condition = None
    expression = read.text(trigger.get("condition"), path, "triggerPolicy.condition")
    if expression:
        condition = compile_condition(expression, task=name)
    strategy = read.text(trigger.get("strategy"), path, "triggerPolicy.strategy")
    retry = None
    if "retryPolicy" in raw:
        rp = read.mapping(raw["retryPolicy"], path, "retryPolicy")
        retry = RetryPolicy(
            max_retries=read.integer(rp.get("maxRetryCount"), path, "retryPolicy.maxRetryCount"),
            backoff=_duration(
                rp.get("backoffDuration"), 0.0, f"{path}.retryPolicy.backoffDuration"
            ),
            factor=read.number(rp.get("backoffFactor"), path, "retryPolicy.backoffFactor", 2.0),
            max_backoff=_duration(
                rp.get("backoffMaxDuration"), 3600.0, f"{path}.retryPolicy.backoffMaxDuration"
            ),
        )
    caching = read.mapping(raw.get("cachingOptions"), path, "cachingOptions")
    policy = read.mapping(raw.get("iteratorPolicy"), path, "iteratorPolicy")
    return TaskSpec(
        name=name,
        component=ref,
        dependencies=tuple(read.strings(raw.get("dependentTasks"), path, "dependentTasks")),
        parameter_inputs=selectors.parameter_inputs(
            inputs.get("parameters"), f"{path}.inputs.parameters"
        ),
        artifact_inputs=selectors.artifact_inputs(
            inputs.get("artifacts"), f"{path}.inputs.artifacts"
        ),
        condition=condition,
        all_upstream_completed=strategy == ALL_UPSTREAM_TASKS_COMPLETED,
        iterator=_iterator(name, raw, path),
        parallelism=read.integer(
            policy.get("parallelismLimit"), path, "iteratorPolicy.parallelismLimit"
        ),
        retry=retry,
        enable_cache=read.flag(caching.get("enableCache"), path, "cachingOptions.enableCache"),
        cache_key=read.text(caching.get("cacheKey"), path, "cachingOptions.cacheKey"),
    )


def _iterator(name: str, raw: Mapping[str, Any], path: str) -> Iterator | None:
    if "parameterIterator" in raw:
        where = f"{path}.parameterIterator"
        spec = read.mapping(raw["parameterIterator"], where)
        items = read.mapping(spec.get("items"), where, "items")
        raw_items = None
        if "raw" in items:
            try:
                raw_items = json.loads(read.text(items["raw"], where, "items.raw"))
            except (ValueError, RecursionError) as exc:
                raise PipelineSpecError(
                    f"task {name!r}: loop items are not JSON (at {where}.items.raw)"
                ) from exc
            if not isinstance(raw_items, list):
                read.malformed(f"{where}.items.raw", "a JSON list", raw_items)
        input_name = read.text(items.get("inputParameter"), where, "items.inputParameter")
        if raw_items is None and not input_name:
            read.malformed(f"{where}.items", "'raw' or 'inputParameter'", dict(items))
        item_input = read.text(read.required(spec, "itemInput", where), where, "itemInput")
        return Iterator("parameter", item_input, raw=raw_items, input_name=input_name or None)
    if "artifactIterator" in raw:
        where = f"{path}.artifactIterator"
        spec = read.mapping(raw["artifactIterator"], where)
        items = read.mapping(spec.get("items"), where, "items")
        input_name = read.text(
            read.required(items, "inputArtifact", f"{where}.items"), where, "items.inputArtifact"
        )
        item_input = read.text(read.required(spec, "itemInput", where), where, "itemInput")
        return Iterator("artifact", item_input, input_name=input_name)
    return None
