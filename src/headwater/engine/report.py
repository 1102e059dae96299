"""What a run produces and reports: DAG outputs, fan-in, pipeline outputs, every executor task.

Users see executor tasks only (`name`, `inner.name`, `name[2]`); control-flow tasks are
structure. A task that never ran because the DAG task around it stopped first (a condition that
failed to evaluate, a loop over no items) is still reported, in that DAG task's state and with
its error, so that nothing a failure touched goes unexplained.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any, NamedTuple

from headwater.engine.tree import DagRun, TaskRun
from headwater.errors import ParameterError
from headwater.spec.ir import ComponentSpec, PipelineIR, is_control_flow_task
from headwater.spec.types import coerce
from headwater.task import Outputs, TaskError, TaskState


class Reported(NamedTuple):
    """One executor task as a run reports it."""

    name: str
    state: TaskState
    #: The task, or None for one inside a DAG task that stopped before making it.
    task: TaskRun | None
    #: Why it failed (None unless `state` is FAILED).
    error: TaskError | None


def report(ir: PipelineIR, dag: DagRun) -> Iterator[Reported]:
    """Every executor task of `dag` and of the DAGs inside it, in IR order."""
    for task in dag.tasks.values():
        if task.is_executor:
            error = task.error if task.state is TaskState.FAILED else None
            yield Reported(task.name, task.state, task, error)
        elif task.children:
            for child in task.children:
                yield from report(ir, child)
        else:
            prefix = dag.prefix
            if not is_control_flow_task(task.spec.name):
                prefix = f"{prefix}{task.spec.name}."
            state = task.state
            if task.spec.iterator is not None and state is TaskState.SUCCEEDED:
                state = TaskState.SKIPPED  # a loop over no items: its body never ran
            error = task.first_error() if state is TaskState.FAILED else None
            yield from _never_made(ir, task.component, prefix, dag.suffix, state, error)


def _never_made(
    ir: PipelineIR,
    component: ComponentSpec,
    prefix: str,
    suffix: str,
    state: TaskState,
    error: TaskError | None,
) -> Iterator[Reported]:
    """The executor tasks inside a DAG task that never ran, all in the DAG task's state."""
    if component.dag is None:
        return
    for spec in component.dag.tasks.values():
        sub = ir.component(spec.component)
        if sub.executor_label is not None:
            yield Reported(f"{prefix}{spec.name}{suffix}", state, None, error)
        else:
            inner = prefix if is_control_flow_task(spec.name) else f"{prefix}{spec.name}."
            yield from _never_made(ir, sub, inner, suffix, state, error)


def collect(loop: TaskRun) -> Outputs:
    """Fan-in: each loop output is the list of its iterations' values, in order."""
    collected = Outputs()
    iface = loop.component.interface
    for name in iface.output_parameters:
        collected.parameters[name] = [
            c.outputs.parameters[name] for c in loop.children if name in c.outputs.parameters
        ]
    for name in iface.output_artifacts:
        collected.artifacts[name] = [
            a for c in loop.children for a in c.outputs.artifacts.get(name, [])
        ]
    return collected


def dag_outputs(dag: DagRun) -> Outputs:
    """A DAG's outputs from its tasks': the first producer that succeeded (`OneOf`)."""
    out = Outputs()
    spec_dag = dag.component.dag
    if spec_dag is None:
        return out
    for name, spec in spec_dag.output_parameters.items():
        selectors = []
        if "valueFromParameter" in spec:
            selectors = [spec["valueFromParameter"]]
        elif "valueFromOneof" in spec:
            selectors = list(spec["valueFromOneof"].get("parameterSelectors") or [])
        for sel in selectors:
            producer = dag.tasks.get(sel["producerSubtask"])
            if producer is not None and producer.state is TaskState.SUCCEEDED:
                key = sel["outputParameterKey"]
                if key in producer.outputs.parameters:
                    out.parameters[name] = producer.outputs.parameters[key]
                    break
    for name, spec in spec_dag.output_artifacts.items():
        for sel in spec.get("artifactSelectors") or []:
            producer = dag.tasks.get(sel["producerSubtask"])
            if producer is not None and producer.state is TaskState.SUCCEEDED:
                key = sel["outputArtifactKey"]
                if key in producer.outputs.artifacts:
                    out.artifacts[name] = producer.outputs.artifacts[key]
                    break
    return out


def run_error(tasks: Iterable[TaskRun]) -> TaskError | None:
    """Why a run failed: the error of the task that failed first (its cause, not its echoes)."""
    failed = [t for t in tasks if t.state is TaskState.FAILED and t.error is not None]
    if not failed:
        return None
    return min(failed, key=lambda t: t.finished_at or 0.0).error


def pipeline_outputs(ir: PipelineIR, outputs: Outputs) -> dict[str, Any]:
    """The pipeline's outputs: parameter values; artifacts as dicts (lists for lists).

    A value is given its declared type where it has one. Where it does not (KFP's compiler
    declares `dsl.Collected` over a task inside `dsl.If` a LIST, yet the value is the task's
    own), it is passed through as it is, as KFP's backend does: its driver type-checks the
    inputs of tasks, never the outputs of the pipeline.
    """
    result: dict[str, Any] = {}
    declared = ir.root.interface
    for name, value in outputs.parameters.items():
        pdef = declared.output_parameters.get(name)
        if pdef is None:
            result[name] = value
            continue
        try:
            result[name] = coerce(value, pdef.type, name=name)
        except ParameterError:
            result[name] = value
    for name, arts in outputs.artifacts.items():
        adef = declared.output_artifacts.get(name)
        shaped = [public_artifact(a) for a in arts]
        result[name] = shaped if (adef and adef.is_list) else (shaped[0] if shaped else None)
    return result


def public_artifact(artifact: Mapping[str, Any]) -> dict[str, Any]:
    """An artifact as the API shows it: name, type title, URI and metadata."""
    return {
        "name": artifact.get("name", ""),
        "type": (artifact.get("type") or {}).get("schemaTitle", "system.Artifact"),
        "uri": artifact.get("uri", ""),
        "metadata": artifact.get("metadata") or {},
    }
