"""Malformed IR is one PipelineSpecError, never a KeyError/TypeError deep inside a run.

Each test takes a compiled pipeline that uses most of the IR (loops over constants and inputs,
conditions, OneOf, fan-in, nested pipelines, exit handlers, retries, caching, importers,
container placeholders), swaps the value at every JSON path for values of other types (or
deletes it), and checks that `parse_pipeline` either refuses the document with a `UserError`
or accepts a document the engine can then drive to the end without an exception of ours
escaping: the class "malformed IR shape" is closed at load time, not input by input.
"""

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kfp import dsl
from kfp.dsl import Dataset, Input, Output

from headwater.engine.runner import bind_arguments
from headwater.engine.state import RunContext, RunStateMachine
from headwater.errors import HeadwaterError, UserError
from headwater.spec.ir import PipelineIR, parse_pipeline
from headwater.spec.loader import ir_from_component
from headwater.spec.placeholders import resolve_args
from headwater.task import Launch, Outputs, TaskResult

IMAGE = "python:3.11"


@dsl.component(base_image=IMAGE)
def add(a: int, b: int = 1) -> int:
    return a + b


@dsl.component(base_image=IMAGE)
def total(values: list[int]) -> int:
    return sum(values)


@dsl.component(base_image=IMAGE)
def make_data(text: str, data: Output[Dataset]) -> None:
    with open(data.path, "w") as f:
        f.write(text)


@dsl.component(base_image=IMAGE)
def report(status: dsl.PipelineTaskFinalStatus) -> str:
    return status.state


@dsl.container_component
def shout(data: Input[Dataset], out: dsl.OutputPath(str), suffix: str = "") -> dsl.ContainerSpec:  # type: ignore[valid-type]
    return dsl.ContainerSpec(
        image="alpine",
        command=["sh", "-c", 'cat "$0" > "$1"'],
        args=[
            data.path,
            dsl.ConcatPlaceholder(["--out=", out]),
            dsl.IfPresentPlaceholder(input_name="suffix", then=["--suffix", suffix]),
        ],
    )


@dsl.pipeline
def inner(n: int) -> int:
    return add(a=n).output


@dsl.pipeline
def everything(x: int = 2, items: list = [1, 2]) -> int:  # noqa: B006 - KFP default
    first = add(a=x, b=1).set_retry(num_retries=1).set_caching_options(enable_caching=True)
    with dsl.If(first.output > 1):
        one = add(a=first.output)
    with dsl.Else():
        two = add(a=2)
    picked = add(a=dsl.OneOf(one.output, two.output))
    final = report()
    with dsl.ExitHandler(final):
        with dsl.ParallelFor(items, parallelism=1) as item:
            looped = add(a=item)
        total(values=dsl.Collected(looped.output))
        with dsl.ParallelFor([3, 4]) as constant:
            inner(n=constant)
        data = make_data(text="hi")
        shout(data=data.outputs["data"], suffix="!")
        imported = dsl.importer(
            artifact_uri="gs://bucket/data", artifact_class=Dataset, metadata={"k": "v"}
        )
        shout(data=imported.output)
    return picked.output


@pytest.fixture(scope="module")
def compiled() -> dict[str, Any]:
    return dict(ir_from_component(everything).raw)


def paths(node: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every path into `node` (dict keys and list indexes), parents before children."""
    children = node.items() if isinstance(node, dict) else enumerate(node)
    for key, value in children:
        yield (*prefix, key)
        if isinstance(value, dict | list):
            yield from paths(value, (*prefix, key))


_DELETE = object()


def replacements(value: Any) -> list[Any]:
    """Values of other JSON types than `value` and deletion; for a string, a name that is
    nowhere else in the document (a dangling reference, an unknown type or placeholder)."""
    others: list[Any] = [None, "text", 7, True, [1], {"k": 1}, _DELETE]
    swapped = [o for o in others if type(o) is not type(value)]
    if isinstance(value, str):
        swapped += ["nowhere", "{{$.nowhere}}", value + "{{$.inputs.parameters['nowhere']}}"]
    return swapped


def mutated(doc: dict[str, Any], path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    """`doc` with `value` at `path`: only the nodes along the path are copied (the test checks
    that nothing changes the shared rest)."""
    top = copy.copy(doc)
    node: Any = top
    for key in path[:-1]:
        node[key] = copy.copy(node[key])
        node = node[key]
    if value is _DELETE:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return top


def fake_result(launch: Launch) -> TaskResult:
    """What a task process would report: a value of each declared output type."""
    values = {
        "STRING": "s",
        "NUMBER_INTEGER": 1,
        "NUMBER_DOUBLE": 1.5,
        "BOOLEAN": True,
        "LIST": [1],
        "STRUCT": {"k": 1},
    }
    parameters = {name: values.get(t, "s") for name, t in launch.output_types.items()}
    artifacts = {
        name: list(spec["artifacts"])
        for name, spec in launch.executor_input["outputs"]["artifacts"].items()
    }
    return TaskResult(launch.task_id, outputs=Outputs(parameters=parameters, artifacts=artifacts))


def drive(ir: PipelineIR, tmp_path: Path) -> None:
    """Run a parsed pipeline to its end with fake task processes, as the engine would."""
    try:
        arguments = bind_arguments(ir, {})
    except UserError:
        return  # refused before a run starts: the CLI prints it as one line
    context = RunContext(
        run_id="run",
        job_name="job",
        pipeline_root=str(tmp_path / "root"),
        run_dir=tmp_path / "run",
        create_time_utc="2024-01-02T03:04:05Z",
    )
    machine = RunStateMachine(ir, arguments, context)
    for _ in range(200):
        if machine.done:
            return
        launches = machine.ready()
        assert launches, "the run stalled"
        for launch in launches:
            for part in ("command", "args"):
                resolve_args(launch.container.get(part) or [], launch.placeholders)
            machine.finish(fake_result(launch))
    raise AssertionError("the run did not end")


def test_the_unmutated_pipeline_runs(compiled: dict[str, Any], tmp_path: Path) -> None:
    drive(parse_pipeline(compiled), tmp_path)


def test_every_type_swap_is_refused_or_runs(compiled: dict[str, Any], tmp_path: Path) -> None:
    crashes = []
    pristine = copy.deepcopy(compiled)
    all_paths = list(paths(compiled))
    assert len(all_paths) > 300  # the corpus covers most of the IR
    for path in all_paths:
        node: Any = compiled
        for key in path:
            node = node[key]
        for value in replacements(node):
            doc = mutated(compiled, path, value)
            try:
                ir = parse_pipeline(doc)
            except HeadwaterError:
                continue
            except Exception as exc:  # the defect class under test: collect, report all
                crashes.append(f"parse {path} = {value!r}: {type(exc).__name__}: {exc}")
                continue
            try:
                drive(ir, tmp_path)
            except Exception as exc:
                crashes.append(f"run {path} = {value!r}: {type(exc).__name__}: {exc}")
    assert not crashes, f"{len(crashes)} crashes, first ones:\n" + "\n".join(crashes[:15])
    assert compiled == pristine, "parsing or running a document changed it"
