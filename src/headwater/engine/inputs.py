"""Resolving a task's inputs from its DAG: pipeline inputs, upstream outputs, constants, statuses.

`resolve_inputs` fills `TaskRun.parameters` and `TaskRun.artifacts` the way KFP's driver does:
declared types are enforced, component defaults fill what the task leaves out, and an input whose
producer did not produce it raises `UnavailableError` (skipped upstream: the task is skipped too).
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Mapping
from typing import Any

from headwater.engine.tree import FINAL_STATUS, RunContext, TaskRun
from headwater.errors import EngineError, HeadwaterError, UserError
from headwater.spec.placeholders import resolve_value
from headwater.spec.types import coerce, protojson
from headwater.task import TaskState

_SELECTOR = re.compile(r"""\[\s*(?:"((?:[^"\\]|\\.)*)"|'([^']*)'|(\d+))\s*\]""")


class UnavailableError(HeadwaterError):
    """An input whose producer did not produce it (skipped, failed, or no such output).

    Internal to the state machine, which turns it into a skipped or failed task; it never
    reaches a caller.
    """

    def __init__(self, message: str, *, skipped: bool) -> None:
        super().__init__(message)
        self.skipped = skipped


def resolve_inputs(task: TaskRun, context: RunContext) -> None:
    """Resolve and type `task`'s input parameters and artifacts, storing them on the task.

    Raises:
        UnavailableError: A required input was not produced upstream.
        UserError: A value does not fit its declared type, or a selector selects nothing.
    """
    declared = task.component.interface
    params: dict[str, Any] = {}
    # Constants last: they may hold placeholders over the task's other inputs (f-strings,
    # `set_cpu_limit(param)` compile to `'{{$.inputs.parameters['pipelinechannel--x']}}'`).
    ordered = sorted(task.spec.parameter_inputs.items(), key=lambda i: "runtimeValue" in i[1])
    for name, sel in ordered:
        pdef = declared.input_parameters.get(name)
        try:
            value = _parameter(task, sel, params, context)
        except UnavailableError:
            if pdef is not None and (pdef.optional or pdef.has_default):
                continue
            raise
        if pdef is not None and pdef.type not in ("TASK_FINAL_STATUS", "TASK_CONFIG"):
            value = coerce(value, pdef.type, name=name, what=f"task {task.name!r} input")
        params[name] = value
    for name, pdef in declared.input_parameters.items():
        # KFP's driver fills inputs the task leaves out from the component's defaults.
        if name not in params and pdef.has_default:
            params[name] = coerce(protojson(pdef.default), pdef.type, name=name)
    artifacts: dict[str, list[dict[str, Any]]] = {}
    for name, sel in task.spec.artifact_inputs.items():
        adef = declared.input_artifacts.get(name)
        try:
            artifacts[name] = _artifact(task, sel)
        except UnavailableError:
            if adef is not None and adef.optional:
                continue
            raise
    task.parameters = params
    task.artifacts = artifacts


def loop_items(task: TaskRun) -> list[Any]:
    """The items a `ParallelFor` task iterates over (its inputs must be resolved).

    Raises:
        UserError: The items are not a list.
    """
    it = task.spec.iterator
    if it is None:
        raise EngineError(f"task {task.name!r} is not a loop but was asked for its items")
    if it.kind == "artifact":
        return list(task.artifacts.get(it.input_name or "", []))
    items = protojson(it.raw) if it.raw is not None else task.parameters.get(it.input_name or "")
    if isinstance(items, str):
        with contextlib.suppress(ValueError):
            items = json.loads(items)
    if not isinstance(items, list):
        raise UserError(f"ParallelFor over {it.input_name!r} needs a list, got {items!r:.80}")
    return list(items)


def _producer(task: TaskRun, name: str) -> TaskRun:
    producer = task.dag.tasks.get(name)
    if producer is None:
        raise UnavailableError(f"no task {name!r} in the DAG of {task.name!r}", skipped=False)
    if producer.state is not TaskState.SUCCEEDED:
        raise UnavailableError(
            f"task {task.name!r} needs an output of {producer.name!r}, which "
            f"{producer.state.value.lower()}",
            skipped=producer.state is TaskState.SKIPPED,
        )
    return producer


def parameter(task: TaskRun, sel: Mapping[str, Any], context: RunContext) -> Any:
    """Resolve one input selector in `task`'s DAG (the name of a kfp-kubernetes secret, say)."""
    return _parameter(task, sel, task.parameters, context)


def _parameter(
    task: TaskRun, sel: Mapping[str, Any], resolved: dict[str, Any], context: RunContext
) -> Any:
    if "runtimeValue" in sel:
        ctx = context.placeholders(task, {"inputs": {"parameterValues": resolved}})
        return resolve_value(protojson(sel["runtimeValue"].get("constant")), ctx)
    if "componentInputParameter" in sel:
        name = sel["componentInputParameter"]
        if name not in task.dag.parameters:
            raise UnavailableError(f"input {name!r} was not given", skipped=False)
        value = task.dag.parameters[name]
        if sel.get("parameterExpressionSelector"):
            value = select(value, sel["parameterExpressionSelector"], task.name)
        return value
    if "taskOutputParameter" in sel:
        ref = sel["taskOutputParameter"]
        producer = _producer(task, ref["producerTask"])
        key = ref["outputParameterKey"]
        if key not in producer.outputs.parameters:
            raise UnavailableError(
                f"task {producer.name!r} produced no output parameter {key!r}",
                skipped=not producer.is_executor,
            )
        value = producer.outputs.parameters[key]
        if sel.get("parameterExpressionSelector"):
            value = select(value, sel["parameterExpressionSelector"], task.name)
        return value
    if "taskFinalStatus" in sel:
        producer = task.dag.tasks[sel["taskFinalStatus"]["producerTask"]]
        status: dict[str, Any] = {
            "state": FINAL_STATUS.get(producer.state, producer.state.value),
            "pipelineJobResourceName": context.job_name,
            "pipelineTaskName": producer.name,
            "error": {},
        }
        if producer.state is TaskState.FAILED:
            err = producer.first_error()
            status["error"] = {"code": 1, "message": err.message if err else "failed"}
        return status
    raise UserError(f"task {task.name!r}: unsupported parameter input {dict(sel)!r:.120}")


def _artifact(task: TaskRun, sel: Mapping[str, Any]) -> list[dict[str, Any]]:
    if "componentInputArtifact" in sel:
        name = sel["componentInputArtifact"]
        if name not in task.dag.artifacts:
            raise UnavailableError(f"input artifact {name!r} was not given", skipped=False)
        return task.dag.artifacts[name]
    if "taskOutputArtifact" in sel:
        ref = sel["taskOutputArtifact"]
        producer = _producer(task, ref["producerTask"])
        key = ref["outputArtifactKey"]
        if key not in producer.outputs.artifacts:
            raise UnavailableError(
                f"task {producer.name!r} produced no output artifact {key!r}",
                skipped=not producer.is_executor,
            )
        return producer.outputs.artifacts[key]
    raise UserError(f"task {task.name!r}: unsupported artifact input {dict(sel)!r:.120}")


def select(value: Any, expression: str, task: str) -> Any:
    """Apply a `parameterExpressionSelector` such as `parseJson(string_value)["a"]`.

    Raises:
        UserError: The expression is not one KFP emits, or selects nothing in `value`.
    """
    text = expression.strip()
    if text.startswith("parseJson(string_value)"):
        rest = text[len("parseJson(string_value)") :]
        if isinstance(value, str):
            try:
                value = json.loads(value)
            except ValueError as exc:
                raise UserError(f"task {task!r}: {value!r:.60} is not JSON") from exc
    elif text.startswith("string_value"):
        rest = text[len("string_value") :]
    else:
        raise UserError(f"task {task!r}: unsupported parameterExpressionSelector {expression!r}")
    pos = 0
    for match in _SELECTOR.finditer(rest):
        if match.start() != pos:
            break
        key, alt, index = match.groups()
        try:
            value = (
                value[int(index)] if index is not None else value[key if key is not None else alt]
            )
        except (KeyError, IndexError, TypeError) as exc:
            raise UserError(
                f"task {task!r}: {expression!r} selects nothing in {value!r:.80}"
            ) from exc
        pos = match.end()
    if pos != len(rest):
        raise UserError(f"task {task!r}: unsupported parameterExpressionSelector {expression!r}")
    return value
