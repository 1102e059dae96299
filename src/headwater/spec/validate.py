"""Whole-pipeline checks: references, cycles and placeholders, before anything runs or is recorded.

`parse_pipeline` checks the shape of each node; this module checks how the nodes fit together:
every task's component, producer and output key exists, no DAG (and no nesting of components)
is a cycle, every executor a component names exists, and every placeholder an executor or a
constant holds is one the engine can resolve. Each check is linear in the size of the IR.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from headwater.errors import PipelineSpecError
from headwater.spec.placeholders import PlaceholderNames, check_args, check_string, check_value

if TYPE_CHECKING:
    from headwater.spec.nodes import ComponentSpec, DagSpec, PipelineIR, TaskSpec


def check_pipeline(ir: PipelineIR) -> None:
    """Check that the parts of a parsed pipeline refer to each other consistently.

    Raises:
        PipelineSpecError: A dangling reference (component, executor, task, output key,
            component input), a cycle of tasks or of nested components, or a bad placeholder.
    """
    if ir.root.dag is None:
        raise PipelineSpecError(
            "malformed PipelineSpec at root: expected a 'dag' (the pipeline's tasks), got an "
            "executorLabel; compile a @dsl.pipeline, or a component with kfp.compiler.Compiler, "
            "which wraps it in a one-task DAG"
        )
    for comp, path in _components(ir):
        if comp.executor_label is not None and comp.executor_label not in ir.executors:
            labels = ", ".join(sorted(ir.executors)) or "none"
            raise PipelineSpecError(
                f"component {comp.name!r} names executor {comp.executor_label!r}, which "
                f"deploymentSpec.executors does not define (at {path}.executorLabel; "
                f"executors: {labels})"
            )
        if comp.dag is not None:
            _check_dag(ir, comp, comp.dag, path)
    _check_nesting(ir)
    _check_executor_placeholders(ir)


def _components(ir: PipelineIR) -> Iterable[tuple[ComponentSpec, str]]:
    yield ir.root, "root"
    for name, comp in ir.components.items():
        yield comp, f"components.{name}"


def _check_dag(ir: PipelineIR, comp: ComponentSpec, dag: DagSpec, path: str) -> None:
    tasks = dag.tasks
    declared = comp.interface
    waits_for: dict[str, list[str]] = {}
    for task in tasks.values():  # first, as outputs are looked up in producers' components
        if task.component not in ir.components:
            raise PipelineSpecError(
                f"task {task.name!r} refers to component {task.component!r}, which the "
                f"PipelineSpec does not define (at {path}.dag.tasks.{task.name}.componentRef.name)"
            )
    for task in tasks.values():
        where = f"{path}.dag.tasks.{task.name}"
        upstream = list(task.dependencies)
        for dep in task.dependencies:
            _need_task(tasks, dep, task, comp, f"{where}.dependentTasks")
        for name, sel in task.parameter_inputs.items():
            at = f"{where}.inputs.parameters.{name}"
            if "taskOutputParameter" in sel:
                ref = sel["taskOutputParameter"]
                producer = _need_task(tasks, ref["producerTask"], task, comp, at)
                _need_output(ir, producer, "parameter", ref["outputParameterKey"], at)
                upstream.append(producer.name)
            elif "taskFinalStatus" in sel:
                producer_name = sel["taskFinalStatus"]["producerTask"]
                upstream.append(_need_task(tasks, producer_name, task, comp, at).name)
            elif "componentInputParameter" in sel:
                _need_input(declared.input_parameters, sel["componentInputParameter"], comp, at)
            else:
                # Constants may hold placeholders over the task's other inputs (f-strings).
                names = _parameters_only(
                    frozenset(task.parameter_inputs)
                    | frozenset(ir.components[task.component].interface.input_parameters)
                )
                check_value(sel["runtimeValue"].get("constant"), f"{at}.runtimeValue", names)
        for name, sel in task.artifact_inputs.items():
            at = f"{where}.inputs.artifacts.{name}"
            if "taskOutputArtifact" in sel:
                ref = sel["taskOutputArtifact"]
                producer = _need_task(tasks, ref["producerTask"], task, comp, at)
                _need_output(ir, producer, "artifact", ref["outputArtifactKey"], at)
                upstream.append(producer.name)
            else:
                _need_input(declared.input_artifacts, sel["componentInputArtifact"], comp, at)
        _check_iterator(task, where)
        _check_required_inputs(ir.components[task.component], task, where)
        waits_for[task.name] = upstream
    cycle = find_cycle(waits_for)
    if cycle is not None:
        raise PipelineSpecError(
            f"the tasks of {_dag_name(comp)} form a cycle: {_ring(cycle[::-1])} (each must "
            "finish before the next starts, through dependentTasks or an input): remove one "
            "of these dependencies"
        )
    _check_dag_outputs(ir, comp, dag, path)


def _dag_name(comp: ComponentSpec) -> str:
    return "the pipeline's root DAG" if comp.name == "root" else f"DAG {comp.name!r}"


def _need_task(
    tasks: Mapping[str, TaskSpec], name: str, task: TaskSpec, comp: ComponentSpec, at: str
) -> TaskSpec:
    producer = tasks.get(name)
    if producer is None:
        raise PipelineSpecError(
            f"task {task.name!r} waits for task {name!r}, which is not in {_dag_name(comp)} "
            f"(at {at}; its tasks: {', '.join(sorted(tasks))})"
        )
    return producer


def _need_output(ir: PipelineIR, producer: TaskSpec, kind: str, key: str, at: str) -> None:
    iface = ir.components[producer.component].interface
    outputs = iface.output_parameters if kind == "parameter" else iface.output_artifacts
    if key not in outputs:
        raise PipelineSpecError(
            f"{at} takes output {kind} {key!r} of task {producer.name!r}, whose component "
            f"{producer.component!r} declares no such output (output {kind}s: "
            f"{', '.join(sorted(outputs)) or 'none'})"
        )


def _need_input(declared: Mapping[str, Any], name: str, comp: ComponentSpec, at: str) -> None:
    if name not in declared:
        raise PipelineSpecError(
            f"{at} takes input {name!r} of {_dag_name(comp)}, which declares no such input "
            f"(inputs: {', '.join(sorted(declared)) or 'none'})"
        )


def _check_iterator(task: TaskSpec, where: str) -> None:
    it = task.iterator
    if it is None or it.input_name is None:
        return
    inputs = task.parameter_inputs if it.kind == "parameter" else task.artifact_inputs
    if it.input_name not in inputs:
        kind = "inputParameter" if it.kind == "parameter" else "inputArtifact"
        raise PipelineSpecError(
            f"the loop of task {task.name!r} iterates over {it.input_name!r}, which is not one "
            f"of the task's inputs (at {where}.{it.kind}Iterator.items.{kind}; inputs: "
            f"{', '.join(sorted(inputs)) or 'none'})"
        )


def _check_required_inputs(comp: ComponentSpec, task: TaskSpec, where: str) -> None:
    """Every input the component needs (not optional, no default) has a value in the task."""
    item = task.iterator.item_input if task.iterator is not None else None
    iface = comp.interface
    for name, pdef in iface.input_parameters.items():
        if not (pdef.optional or pdef.has_default or name == item) and (
            name not in task.parameter_inputs
        ):
            _missing(task, comp, "parameter", name, where)
    for name, adef in iface.input_artifacts.items():
        if not (adef.optional or name == item) and name not in task.artifact_inputs:
            _missing(task, comp, "artifact", name, where)


def _missing(task: TaskSpec, comp: ComponentSpec, kind: str, name: str, where: str) -> None:
    raise PipelineSpecError(
        f"task {task.name!r} gives no value for input {kind} {name!r}, which its component "
        f"{comp.name!r} requires (at {where}.inputs.{kind}s): pass it to the task or make it "
        "optional"
    )


def _check_dag_outputs(ir: PipelineIR, comp: ComponentSpec, dag: DagSpec, path: str) -> None:
    tasks = dag.tasks
    for name, spec in dag.output_parameters.items():
        selectors = (
            [spec["valueFromParameter"]]
            if "valueFromParameter" in spec
            else list(spec["valueFromOneof"].get("parameterSelectors") or [])
        )
        for sel in selectors:
            at = f"{path}.dag.outputs.parameters.{name}"
            producer = _need_subtask(tasks, sel["producerSubtask"], comp, at)
            _need_output(ir, producer, "parameter", sel["outputParameterKey"], at)
    for name, spec in dag.output_artifacts.items():
        for sel in spec.get("artifactSelectors") or []:
            at = f"{path}.dag.outputs.artifacts.{name}"
            producer = _need_subtask(tasks, sel["producerSubtask"], comp, at)
            _need_output(ir, producer, "artifact", sel["outputArtifactKey"], at)


def _need_subtask(
    tasks: Mapping[str, TaskSpec], name: str, comp: ComponentSpec, at: str
) -> TaskSpec:
    producer = tasks.get(name)
    if producer is None:
        raise PipelineSpecError(
            f"{at} selects an output of task {name!r}, which is not in {_dag_name(comp)} "
            f"(its tasks: {', '.join(sorted(tasks)) or 'none'})"
        )
    return producer


def _check_nesting(ir: PipelineIR) -> None:
    """A component whose DAG contains itself, directly or not, would expand forever."""
    uses = {
        name: sorted({t.component for t in comp.dag.tasks.values()})
        for name, comp in ir.components.items()
        if comp.dag is not None
    }
    cycle = find_cycle(uses)
    if cycle is not None:
        raise PipelineSpecError(
            f"components contain each other in a cycle: {_ring(cycle)}; a pipeline "
            "cannot contain itself"
        )


def _ring(cycle: list[str]) -> str:
    """`[b, c, a, b]` as "a -> b -> c -> a": the same cycle, from its first name in order."""
    nodes = cycle[:-1]
    start = nodes.index(min(nodes))
    nodes = nodes[start:] + nodes[:start]
    return " -> ".join([*nodes, nodes[0]])


def find_cycle(graph: Mapping[str, Iterable[str]]) -> list[str] | None:
    """A cycle of `graph` (node -> the nodes it points to) as [a, b, ..., a], or None.

    Iterative depth-first search, linear in nodes plus edges; edges to nodes outside the
    graph are ignored (dangling references are reported elsewhere).
    """
    state: dict[str, int] = {}  # absent: unseen, 1: on the current path, 2: done
    for start in graph:
        if start in state:
            continue
        path = [start]
        stack = [iter(graph[start])]
        state[start] = 1
        while stack:
            for nxt in stack[-1]:
                seen = state.get(nxt)
                if seen == 1:
                    return [*path[path.index(nxt) :], nxt]
                if seen is None and nxt in graph:
                    state[nxt] = 1
                    path.append(nxt)
                    stack.append(iter(graph[nxt]))
                    break
            else:
                state[path.pop()] = 2
                stack.pop()
    return None


_ANY = PlaceholderNames()


def _names_something(container: Mapping[str, Any]) -> bool:
    """True if a placeholder of the container may name an input or output."""
    strings = [*(container.get("command") or ()), *(container.get("args") or ())]
    strings += [str(env.get("value") or "") for env in container.get("env") or ()]
    strings += [str(v) for v in (container.get("resources") or {}).values()]
    return any("{{$." in text or "IfPresent" in text for text in strings)


def _parameters_only(parameters: frozenset[str] | None) -> PlaceholderNames:
    """Names for strings resolved against input parameters alone (constants, importers)."""
    none: frozenset[str] = frozenset()
    return PlaceholderNames(parameters, none, none, none)


def _check_executor_placeholders(ir: PipelineIR) -> None:
    """Placeholders of each executor, checked against what the components using it declare."""
    users: dict[str, list[ComponentSpec]] = {}
    for comp in ir.components.values():
        if comp.executor_label is not None:
            users.setdefault(comp.executor_label, []).append(comp)
    task_inputs: dict[str, tuple[set[str], set[str]]] = {}
    for comp, _ in _components(ir):
        for task in comp.dag.tasks.values() if comp.dag is not None else ():
            params, artifacts = task_inputs.setdefault(task.component, (set(), set()))
            params.update(task.parameter_inputs)
            artifacts.update(task.artifact_inputs)
    for label, executor in ir.executors.items():
        path = f"deploymentSpec.executors.{label}"
        # Names matter only to placeholders that name something: `{{$}}` alone (every
        # lightweight Python component) is checked by form.
        needs_names = "container" not in executor or _names_something(executor["container"])
        names = _executor_names(users.get(label, []), task_inputs) if needs_names else _ANY
        if "container" in executor:
            container = executor["container"]
            path += ".container"
            check_args(container.get("command") or [], f"{path}.command", names)
            check_args(container.get("args") or [], f"{path}.args", names)
            for index, env in enumerate(container.get("env") or []):
                check_string(env.get("value") or "", f"{path}.env[{index}].value", names)
            check_value(container.get("resources") or {}, f"{path}.resources", names)
        else:
            importer = executor["importer"]
            path += ".importer"
            importer_names = _parameters_only(names.input_parameters)
            check_value((importer.get("artifactUri") or {}).get("constant"), path, importer_names)
            check_value(importer.get("metadata") or {}, f"{path}.metadata", importer_names)


def _executor_names(
    comps: list[ComponentSpec], task_inputs: Mapping[str, tuple[set[str], set[str]]]
) -> PlaceholderNames:
    """Names an executor's placeholders may use: its components' inputs and outputs, plus
    inputs their tasks add (`set_cpu_limit(param)` adds `pipelinechannel--param`)."""
    if not comps:  # an executor no component uses never runs: check forms only
        return PlaceholderNames()
    in_params: set[str] = set()
    in_arts: set[str] = set()
    out_params: set[str] = set()
    out_arts: set[str] = set()
    for comp in comps:
        in_params.update(comp.interface.input_parameters)
        in_arts.update(comp.interface.input_artifacts)
        out_params.update(comp.interface.output_parameters)
        out_arts.update(comp.interface.output_artifacts)
        params, artifacts = task_inputs.get(comp.name, ((), ()))
        in_params.update(params)
        in_arts.update(artifacts)
    return PlaceholderNames(
        frozenset(in_params), frozenset(in_arts), frozenset(out_params), frozenset(out_arts)
    )
