"""Tests for RunStateMachine, driven by plain calls: no processes, no executors.

Pipelines are real `@dsl.pipeline` functions compiled by the KFP SDK. A fake executor stands in
for the task process: it computes a task's outputs from its ExecutorInput with a small Python
function per component (`FAKES`), and hands back the output artifacts the launch allocated.
"""

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from kfp import dsl
from kfp.dsl import Dataset, Input, Output

from headwater.engine.runner import bind_arguments
from headwater.engine.state import RunContext, RunStateMachine, TaskRun, task_dir
from headwater.spec.ir import PipelineIR, parse_pipeline
from headwater.spec.loader import ir_from_component
from headwater.task import Launch, Outputs, TaskError, TaskResult, TaskState

IMAGE = "python:3.11"

# -- components -------------------------------------------------------------------------------


@dsl.component(base_image=IMAGE)
def add(a: int, b: int) -> int:
    return a + b


@dsl.component(base_image=IMAGE)
def double(x: int) -> int:
    return 2 * x


@dsl.component(base_image=IMAGE)
def total(values: list[int]) -> int:
    return sum(values)


@dsl.component(base_image=IMAGE)
def nested_total(values: list[list[int]]) -> int:
    return sum(sum(inner) for inner in values)


@dsl.component(base_image=IMAGE)
def make_list(n: int) -> list[int]:
    return list(range(n))


@dsl.component(base_image=IMAGE)
def echo(text: str) -> str:
    return text


@dsl.component(base_image=IMAGE)
def work(fail: bool) -> str:
    if fail:
        raise RuntimeError("work failed")
    return "worked"


@dsl.component(base_image=IMAGE)
def report(status: dsl.PipelineTaskFinalStatus) -> str:
    return status.state


@dsl.component(base_image=IMAGE)
def make_data(text: str, data: Output[Dataset]):
    with open(data.path, "w") as f:
        f.write(text)


@dsl.component(base_image=IMAGE)
def read_data(data: Input[Dataset]) -> str:
    with open(data.path) as f:
        return f.read()


@dsl.component(base_image=IMAGE)
def join_data(parts: Input[list[Dataset]]) -> str:
    return "|".join(p.uri for p in parts)


@dsl.component(base_image=IMAGE)
def flaky() -> str:
    return "ok"


# -- the fake executor ------------------------------------------------------------------------

Fake = Callable[[dict[str, Any]], dict[str, Any]]

#: Output parameters per component function, computed from its input parameters.
FAKES: dict[str, Fake] = {
    "add": lambda p: {"Output": p["a"] + p["b"]},
    "double": lambda p: {"Output": 2 * p["x"]},
    "total": lambda p: {"Output": sum(p["values"])},
    "nested_total": lambda p: {"Output": sum(sum(inner) for inner in p["values"])},
    "make_list": lambda p: {"Output": list(range(p["n"]))},
    "echo": lambda p: {"Output": p["text"]},
    "work": lambda p: _raise("work failed") if p["fail"] else {"Output": "worked"},
    "report": lambda p: {"Output": p["status"]["state"]},
    "make_data": lambda p: {},
    "read_data": lambda p: {"Output": "read"},
    "join_data": lambda p: {"Output": "joined"},
    "flaky": lambda p: {"Output": "ok"},
}


def _raise(message: str) -> dict[str, Any]:
    raise RuntimeError(message)


def function_name(launch: Launch) -> str:
    """The Python function a lightweight component's launch would run."""
    args = launch.container["args"]
    return str(args[args.index("--function_to_execute") + 1])


def execute(launch: Launch, fakes: dict[str, Fake]) -> TaskResult:
    """Stand in for the task process: outputs on success, a TaskError when the fake raises."""
    params = launch.executor_input["inputs"]["parameterValues"]
    try:
        parameters = fakes[function_name(launch)](params)
    except RuntimeError as exc:
        return TaskResult(launch.task_id, error=TaskError(launch.name, "RuntimeError", str(exc)))
    artifacts = {
        name: [{**a, "metadata": {"producer": launch.name}} for a in spec["artifacts"]]
        for name, spec in launch.executor_input["outputs"]["artifacts"].items()
    }
    return TaskResult(launch.task_id, outputs=Outputs(parameters=parameters, artifacts=artifacts))


def failure(launch: Launch, message: str = "boom") -> TaskResult:
    return TaskResult(launch.task_id, error=TaskError(launch.name, "RuntimeError", message))


def run_all(m: RunStateMachine, fakes: dict[str, Fake] = FAKES) -> list[list[str]]:
    """Run every ready launch, batch by batch, until the run is done; return the batches."""
    batches: list[list[str]] = []
    for _ in range(100):
        if m.done:
            return batches
        launches = m.ready()
        assert launches, f"run stalled with nothing ready: {states(m)}"
        batches.append(sorted(launch.name for launch in launches))
        for launch in launches:
            m.finish(execute(launch, fakes))
    raise AssertionError(f"run did not finish: {states(m)}")


def states(m: RunStateMachine) -> dict[str, str]:
    """Every executor task's display name and state."""
    return {name: state.value for name, state, _ in m.executor_tasks()}


def task_named(m: RunStateMachine, name: str) -> TaskRun:
    """The executor task with this display name (it must have been made)."""
    runs = {n: task for n, _, task in m.executor_tasks() if task is not None}
    return runs[name]


def params_of(launch: Launch) -> dict[str, Any]:
    return dict(launch.executor_input["inputs"]["parameterValues"])


class FakeClock:
    """A monotonic clock that moves only when the test says so."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


# -- fixtures ---------------------------------------------------------------------------------


@pytest.fixture
def context(tmp_path: Path) -> RunContext:
    return RunContext(
        run_id="run-1",
        job_name="job-1",
        pipeline_root=str(tmp_path / "root"),
        run_dir=tmp_path / "run",
        create_time_utc="2024-01-02T03:04:05Z",
    )


MachineFactory = Callable[..., RunStateMachine]


@pytest.fixture
def make_machine(context: RunContext) -> MachineFactory:
    """Build a state machine for a `@dsl.pipeline`, binding arguments as `headwater.run` does."""

    def make(
        pipeline: Any,
        arguments: dict[str, Any] | None = None,
        *,
        clock: Callable[[], float] | None = None,
    ) -> RunStateMachine:
        ir = ir_from_component(pipeline)
        bound = bind_arguments(ir, arguments or {})
        if clock is None:
            return RunStateMachine(ir, bound, context)
        return RunStateMachine(ir, bound, context, clock=clock)

    return make


# -- ordering ---------------------------------------------------------------------------------


@dsl.pipeline
def chain(x: int = 1) -> int:
    first = add(a=x, b=2)
    second = double(x=first.output)
    return add(a=second.output, b=10).output


def test_chain_runs_in_dependency_order(make_machine: MachineFactory) -> None:
    m = make_machine(chain, {"x": 1})
    first = m.ready()
    assert [launch.name for launch in first] == ["add"]
    assert m.ready() == []  # double waits for add to finish
    assert states(m) == {"add": "READY", "double": "PENDING", "add-2": "PENDING"}
    m.started(first[0].task_id)  # the executor took it
    assert states(m) == {"add": "RUNNING", "double": "PENDING", "add-2": "PENDING"}

    m.finish(execute(first[0], FAKES))
    second = m.ready()
    assert [launch.name for launch in second] == ["double"]
    assert params_of(second[0]) == {"x": 3}
    assert m.ready() == []  # add-2 waits for double
    m.finish(execute(second[0], FAKES))
    assert [launch.name for launch in m.ready()] == ["add-2"]


def test_chain_results_flow_downstream(make_machine: MachineFactory) -> None:
    m = make_machine(chain, {"x": 5})
    assert run_all(m) == [["add"], ["double"], ["add-2"]]
    assert m.state is TaskState.SUCCEEDED
    assert m.done
    assert m.outputs() == {"Output": 24}  # (5 + 2) * 2 + 10


@dsl.pipeline
def fan_in() -> int:
    left = add(a=1, b=2)
    right = add(a=10, b=20)
    both = add(a=left.output, b=right.output)
    return double(x=both.output).output


def test_independent_tasks_are_ready_together(make_machine: MachineFactory) -> None:
    m = make_machine(fan_in)
    assert run_all(m) == [["add", "add-2"], ["add-3"], ["double"]]
    assert m.outputs() == {"Output": 66}


def test_state_is_running_until_the_last_task_finishes(make_machine: MachineFactory) -> None:
    m = make_machine(fan_in)
    launches = m.ready()
    for launch in launches:
        m.started(launch.task_id)
    m.finish(execute(launches[0], FAKES))
    assert not m.done
    assert m.state is TaskState.RUNNING
    assert states(m)[launches[0].name] == "SUCCEEDED"
    assert states(m)[launches[1].name] == "RUNNING"


# -- conditions -------------------------------------------------------------------------------


@dsl.pipeline
def branches(x: int) -> str:
    with dsl.If(x > 5):
        high = echo(text="high")
    with dsl.Elif(x > 0):
        mid = echo(text="mid")
    with dsl.Else():
        low = echo(text="low")
    return dsl.OneOf(high.output, mid.output, low.output)


@pytest.mark.parametrize(
    ("x", "taken"),
    [(9, "echo"), (3, "echo-2"), (-1, "echo-3")],
    ids=["if", "elif", "else"],
)
def test_if_elif_else_runs_one_branch(make_machine: MachineFactory, x: int, taken: str) -> None:
    m = make_machine(branches, {"x": x})
    assert run_all(m) == [[taken]]
    expected = {name: "SKIPPED" for name in ("echo", "echo-2", "echo-3")}
    expected[taken] = "SUCCEEDED"
    assert states(m) == expected
    assert m.state is TaskState.SUCCEEDED


@pytest.mark.parametrize(
    ("x", "value"), [(9, "high"), (3, "mid"), (-1, "low")], ids=["if", "elif", "else"]
)
def test_oneof_takes_the_branch_that_ran(make_machine: MachineFactory, x: int, value: str) -> None:
    m = make_machine(branches, {"x": x})
    run_all(m)
    assert m.outputs() == {"Output": value}


@dsl.pipeline
def oneof_artifact(x: int) -> Dataset:
    with dsl.If(x > 0):
        positive = make_data(text="pos")
    with dsl.Else():
        negative = make_data(text="neg")
    return dsl.OneOf(positive.outputs["data"], negative.outputs["data"])


@pytest.mark.parametrize(
    ("x", "producer"), [(1, "make-data"), (-1, "make-data-2")], ids=["if", "else"]
)
def test_oneof_artifact_output(make_machine: MachineFactory, x: int, producer: str) -> None:
    m = make_machine(oneof_artifact, {"x": x})
    assert run_all(m) == [[producer]]
    assert m.outputs()["Output"]["metadata"] == {"producer": producer}
    assert m.outputs()["Output"]["uri"].endswith(f"/{producer}/data")


@dsl.pipeline
def branch_on_output(text: str):
    said = echo(text=text)
    with dsl.If(said.output == "go"):
        double(x=1)
    with dsl.Else():
        add(a=1, b=1)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("go", {"echo": "SUCCEEDED", "double": "SUCCEEDED", "add": "SKIPPED"}),
        ("stop", {"echo": "SUCCEEDED", "double": "SKIPPED", "add": "SUCCEEDED"}),
    ],
    ids=["taken", "untaken"],
)
def test_condition_on_upstream_output(
    make_machine: MachineFactory, text: str, expected: dict[str, str]
) -> None:
    m = make_machine(branch_on_output, {"text": text})
    batches = run_all(m)
    assert batches[0] == ["echo"]  # the condition waits for its operand's producer
    assert states(m) == expected


@dsl.pipeline
def skipped_nested(x: int):
    with dsl.If(x > 0), dsl.If(x > 10):
        chain(x=x)


def test_untaken_nested_tasks_report_skipped(make_machine: MachineFactory) -> None:
    m = make_machine(skipped_nested, {"x": 0})
    assert m.done
    assert m.ready() == []
    assert states(m) == {
        "chain.add": "SKIPPED",
        "chain.double": "SKIPPED",
        "chain.add-2": "SKIPPED",
    }
    assert m.state is TaskState.SUCCEEDED


# -- loops ------------------------------------------------------------------------------------


@dsl.pipeline
def loop_constants(offset: int = 100) -> list[int]:
    with dsl.ParallelFor([1, 2, 3]) as item:
        summed = add(a=item, b=offset)
    return dsl.Collected(summed.output)


def test_parallel_for_over_constants(make_machine: MachineFactory) -> None:
    m = make_machine(loop_constants)
    launches = m.ready()
    assert sorted(launch.name for launch in launches) == ["add[0]", "add[1]", "add[2]"]
    assert [params_of(launch) for launch in launches] == [
        {"a": 1, "b": 100},
        {"a": 2, "b": 100},
        {"a": 3, "b": 100},
    ]
    for launch in launches:
        m.finish(execute(launch, FAKES))
    assert m.outputs() == {"Output": [101, 102, 103]}


@dsl.pipeline
def loop_input(items: list) -> int:
    with dsl.ParallelFor(items) as item:
        doubled = double(x=item)
    return total(values=dsl.Collected(doubled.output)).output


def test_parallel_for_over_pipeline_input(make_machine: MachineFactory) -> None:
    m = make_machine(loop_input, {"items": [3, 4, 5]})
    assert run_all(m) == [["double[0]", "double[1]", "double[2]"], ["total"]]
    assert m.outputs() == {"Output": 24}


@dsl.pipeline
def loop_upstream(n: int) -> int:
    made = make_list(n=n)
    with dsl.ParallelFor(made.output) as item:
        doubled = double(x=item)
    return total(values=dsl.Collected(doubled.output)).output


def test_parallel_for_over_upstream_output(make_machine: MachineFactory) -> None:
    m = make_machine(loop_upstream, {"n": 4})
    assert run_all(m) == [
        ["make-list"],
        ["double[0]", "double[1]", "double[2]", "double[3]"],
        ["total"],
    ]
    assert m.outputs() == {"Output": 12}  # 2 * (0 + 1 + 2 + 3)


def test_parallel_for_over_empty_list_collects_empty_list(make_machine: MachineFactory) -> None:
    m = make_machine(loop_upstream, {"n": 0})
    assert run_all(m) == [["make-list"], ["total"]]
    assert m.outputs() == {"Output": 0}


@dsl.pipeline
def loop_dicts() -> list[int]:
    with dsl.ParallelFor([{"a": 1, "b": 2}, {"a": 10, "b": 20}]) as item:
        summed = add(a=item.a, b=item.b)
    return dsl.Collected(summed.output)


def test_parallel_for_over_dicts_selects_fields(make_machine: MachineFactory) -> None:
    m = make_machine(loop_dicts)
    launches = m.ready()
    assert [params_of(launch) for launch in launches] == [{"a": 1, "b": 2}, {"a": 10, "b": 20}]
    for launch in launches:
        m.finish(execute(launch, FAKES))
    assert m.outputs() == {"Output": [3, 30]}


class GridOut(NamedTuple):
    grid: list[list[int]]
    grid_total: int


@dsl.pipeline
def loop_nested() -> GridOut:
    with dsl.ParallelFor([1, 2]) as outer, dsl.ParallelFor([10, 20, 30]) as inner:
        summed = add(a=outer, b=inner)
    grand = nested_total(values=dsl.Collected(summed.output))
    return GridOut(grid=dsl.Collected(summed.output), grid_total=grand.output)


def test_nested_parallel_for(make_machine: MachineFactory) -> None:
    m = make_machine(loop_nested)
    launches = m.ready()
    assert {launch.name: params_of(launch) for launch in launches} == {
        "add[0][0]": {"a": 1, "b": 10},
        "add[0][1]": {"a": 1, "b": 20},
        "add[0][2]": {"a": 1, "b": 30},
        "add[1][0]": {"a": 2, "b": 10},
        "add[1][1]": {"a": 2, "b": 20},
        "add[1][2]": {"a": 2, "b": 30},
    }
    for launch in reversed(launches):
        m.finish(execute(launch, FAKES))
    assert run_all(m) == [["nested-total"]]
    assert m.outputs() == {"grid": [[11, 21, 31], [12, 22, 32]], "grid_total": 129}


@dsl.pipeline
def loop_limited() -> list[int]:
    with dsl.ParallelFor([1, 2, 3, 4, 5], parallelism=2) as item:
        first = double(x=item)
        second = add(a=first.output, b=1)
    return dsl.Collected(second.output)


def test_parallelism_bounds_concurrent_iterations(make_machine: MachineFactory) -> None:
    m = make_machine(loop_limited)
    running: list[Launch] = []
    most = 0
    started: list[str] = []
    while not m.done:
        new = m.ready()
        started += [launch.name for launch in new]
        running += new
        iterations = {launch.name.partition("[")[2] for launch in running}
        most = max(most, len(iterations))
        assert len(iterations) <= 2, f"iterations running at once: {sorted(iterations)}"
        assert running, "stalled"
        m.finish(execute(running.pop(0), FAKES))
    assert most == 2
    assert started[:2] == ["double[0]", "double[1]"]
    assert m.outputs() == {"Output": [3, 5, 7, 9, 11]}


def test_collected_keeps_iteration_order(make_machine: MachineFactory) -> None:
    m = make_machine(loop_constants)
    launches = m.ready()
    order = [launches[2], launches[0], launches[1]]
    for launch in order:
        m.finish(execute(launch, FAKES))
    assert m.outputs() == {"Output": [101, 102, 103]}


@dsl.pipeline
def loop_artifacts() -> list[Dataset]:
    with dsl.ParallelFor(["x", "y", "z"]) as text:
        made = make_data(text=text)
    join_data(parts=dsl.Collected(made.outputs["data"]))
    return dsl.Collected(made.outputs["data"])


def test_collected_artifacts_keep_iteration_order(make_machine: MachineFactory) -> None:
    m = make_machine(loop_artifacts)
    launches = m.ready()
    for launch in reversed(launches):
        m.finish(execute(launch, FAKES))
    (join,) = m.ready()
    parts = join.executor_input["inputs"]["artifacts"]["parts"]["artifacts"]
    assert [p["metadata"]["producer"] for p in parts] == [
        "make-data[0]",
        "make-data[1]",
        "make-data[2]",
    ]
    m.finish(execute(join, FAKES))
    outputs = m.outputs()["Output"]
    assert [a["metadata"]["producer"] for a in outputs] == [
        "make-data[0]",
        "make-data[1]",
        "make-data[2]",
    ]
    assert all(a["type"] == "system.Dataset" for a in outputs)


@dsl.pipeline
def make_parts(texts: list) -> list[Dataset]:
    with dsl.ParallelFor(texts) as text:
        made = make_data(text=text)
    return dsl.Collected(made.outputs["data"])


@dsl.pipeline
def loop_over_artifacts() -> list[str]:
    parts = make_parts(texts=["a", "b"])
    with dsl.ParallelFor(parts.output) as part:
        read = read_data(data=part)
    return dsl.Collected(read.output)


def test_parallel_for_over_artifact_list(make_machine: MachineFactory) -> None:
    m = make_machine(loop_over_artifacts)
    made = m.ready()
    assert [launch.name for launch in made] == [
        "make-parts.make-data[0]",
        "make-parts.make-data[1]",
    ]
    for launch in reversed(made):
        m.finish(execute(launch, FAKES))
    reads = m.ready()
    assert [launch.name for launch in reads] == ["read-data[0]", "read-data[1]"]
    producers = [
        launch.executor_input["inputs"]["artifacts"]["data"]["artifacts"][0]["metadata"]
        for launch in reads
    ]
    assert producers == [
        {"producer": "make-parts.make-data[0]"},
        {"producer": "make-parts.make-data[1]"},
    ]
    for launch in reads:
        m.finish(execute(launch, FAKES))
    assert m.outputs() == {"Output": ["read", "read"]}


@dsl.pipeline
def loop_with_condition():
    with dsl.ParallelFor([1, 5, 10]) as item, dsl.If(item > 3):
        double(x=item)


def test_condition_inside_loop_is_per_iteration(make_machine: MachineFactory) -> None:
    m = make_machine(loop_with_condition)
    assert run_all(m) == [["double[1]", "double[2]"]]
    assert states(m) == {"double[0]": "SKIPPED", "double[1]": "SUCCEEDED", "double[2]": "SUCCEEDED"}


def test_failed_iteration_fails_the_loop_and_cancels_the_rest(
    make_machine: MachineFactory,
) -> None:
    m = make_machine(loop_limited)
    first, second = m.ready()
    m.finish(failure(first))
    assert m.ready() == []  # no new iteration starts once the loop is failing
    m.finish(execute(second, FAKES))
    assert m.ready() == []
    assert m.done
    assert states(m) == {
        "double[0]": "FAILED",
        "add[0]": "CANCELED",
        "double[1]": "SUCCEEDED",
        "add[1]": "CANCELED",
        "double[2]": "CANCELED",
        "add[2]": "CANCELED",
        "double[3]": "CANCELED",
        "add[3]": "CANCELED",
        "double[4]": "CANCELED",
        "add[4]": "CANCELED",
    }
    assert m.state is TaskState.FAILED


@dsl.pipeline
def loop_over_item_field(
    items: list = [{"name": "a", "vals": [1, 2]}, {"name": "b", "vals": [3]}],  # noqa: B006
) -> list[list[int]]:
    with dsl.ParallelFor(items) as item, dsl.ParallelFor(item.vals) as value:
        doubled = double(x=value)
    return dsl.Collected(doubled.output)


def test_inner_loop_over_a_field_of_the_outer_item(make_machine: MachineFactory) -> None:
    m = make_machine(loop_over_item_field)
    assert run_all(m) == [["double[0][0]", "double[0][1]", "double[1][0]"]]
    assert m.outputs() == {"Output": [[2, 4], [6]]}


def test_body_of_an_empty_loop_is_not_reported_succeeded(make_machine: MachineFactory) -> None:
    m = make_machine(loop_upstream, {"n": 0})
    run_all(m)
    assert states(m).get("double", "SKIPPED") == "SKIPPED"


# -- nested pipelines -------------------------------------------------------------------------


@dsl.pipeline
def scale(x: int) -> int:
    doubled = double(x=x)
    return add(a=doubled.output, b=1).output


@dsl.pipeline
def outer_pipeline(x: int = 4) -> int:
    scaled = scale(x=x)
    return double(x=scaled.output).output


def test_nested_pipeline_output_feeds_downstream(make_machine: MachineFactory) -> None:
    m = make_machine(outer_pipeline)
    assert run_all(m) == [["scale.double"], ["scale.add"], ["double"]]
    assert m.outputs() == {"Output": 18}  # (4 * 2 + 1) * 2
    assert set(states(m).values()) == {"SUCCEEDED"}


def test_failure_in_nested_pipeline_cancels_outer_downstream(
    make_machine: MachineFactory,
) -> None:
    m = make_machine(outer_pipeline)
    (launch,) = m.ready()
    m.finish(failure(launch))
    assert m.done
    assert states(m) == {"scale.double": "FAILED", "scale.add": "CANCELED", "double": "CANCELED"}
    assert m.state is TaskState.FAILED


# -- exit handlers, failures, ignore_upstream_failure -----------------------------------------


@dsl.pipeline
def guarded(fail: bool = False):
    final = report()
    with dsl.ExitHandler(final):
        worked = work(fail=fail)
        echo(text=worked.output)
        double(x=1).after(worked).ignore_upstream_failure()


@pytest.mark.parametrize(
    ("fail", "status", "run_state"),
    [(False, "COMPLETE", TaskState.SUCCEEDED), (True, "FAILED", TaskState.FAILED)],
    ids=["body-succeeded", "body-failed"],
)
def test_exit_handler_gets_final_status(
    make_machine: MachineFactory, fail: bool, status: str, run_state: TaskState
) -> None:
    m = make_machine(guarded, {"fail": fail})
    seen: dict[str, Any] = {}

    def record(params: dict[str, Any]) -> dict[str, Any]:
        seen.update(params["status"])
        return {"Output": params["status"]["state"]}

    batches = run_all(m, {**FAKES, "report": record})
    assert batches[-1] == ["report"]  # the exit task runs last
    assert seen["state"] == status
    assert seen["pipelineTaskName"] == "exit-handler-1"
    assert seen["pipelineJobResourceName"] == "job-1"
    if fail:
        assert seen["error"]["message"] == "work failed"
    else:
        assert seen["error"] == {}
    assert states(m)["report"] == "SUCCEEDED"
    assert m.state is run_state


@dsl.pipeline
def guarded_nested():
    final = report()
    with dsl.ExitHandler(final):
        scale(x=1)


def test_exit_handler_reports_the_error_of_a_nested_task(make_machine: MachineFactory) -> None:
    m = make_machine(guarded_nested)
    seen: dict[str, Any] = {}

    def record(params: dict[str, Any]) -> dict[str, Any]:
        seen.update(params["status"])
        return {"Output": "seen"}

    (launch,) = m.ready()
    assert launch.name == "scale.double"
    m.finish(failure(launch, "inner boom"))
    run_all(m, {**FAKES, "report": record})
    assert seen["state"] == "FAILED"
    assert seen["error"] == {"code": 1, "message": "inner boom"}
    assert states(m) == {"scale.double": "FAILED", "scale.add": "CANCELED", "report": "SUCCEEDED"}


def test_failing_exit_task_fails_the_run(make_machine: MachineFactory) -> None:
    m = make_machine(guarded, {"fail": False})
    run_all(m, {**FAKES, "report": lambda p: _raise("exit task broke")})
    assert states(m)["report"] == "FAILED"
    assert states(m)["work"] == "SUCCEEDED"
    assert m.state is TaskState.FAILED


def test_ignore_upstream_failure_runs_after_a_failure(make_machine: MachineFactory) -> None:
    m = make_machine(guarded, {"fail": True})
    run_all(m)
    assert states(m) == {
        "work": "FAILED",
        "echo": "CANCELED",
        "double": "SUCCEEDED",
        "report": "SUCCEEDED",
    }


@dsl.pipeline
def siblings() -> str:
    broken = work(fail=True)
    sibling = add(a=1, b=2)
    double(x=sibling.output)
    return echo(text=broken.output).output


def test_failure_cancels_downstream_but_running_sibling_finishes(
    make_machine: MachineFactory,
) -> None:
    m = make_machine(siblings)
    launches = {launch.name: launch for launch in m.ready()}
    assert set(launches) == {"work", "add"}
    m.finish(failure(launches["work"], "work failed"))
    assert not m.done  # add is still running
    m.finish(execute(launches["add"], FAKES))
    assert m.ready() == []
    assert m.done
    assert states(m) == {
        "work": "FAILED",
        "add": "SUCCEEDED",
        "double": "CANCELED",  # not started once the DAG is failing
        "echo": "CANCELED",
    }
    assert m.state is TaskState.FAILED
    assert m.tasks[launches["work"].task_id].error == TaskError(
        "work", "RuntimeError", "work failed"
    )


# -- retries ----------------------------------------------------------------------------------


@dsl.pipeline
def retried() -> str:
    return flaky().set_retry(num_retries=2).output


@pytest.mark.parametrize(
    ("failures", "state", "attempts"),
    [(0, "SUCCEEDED", 1), (2, "SUCCEEDED", 3), (3, "FAILED", 3)],
    ids=["first-try", "third-try", "exhausted"],
)
def test_retries(make_machine: MachineFactory, failures: int, state: str, attempts: int) -> None:
    m = make_machine(retried)
    seen_attempts = []
    while not m.done:
        (launch,) = m.ready()
        seen_attempts.append(launch.attempt)
        if len(seen_attempts) <= failures:
            m.finish(failure(launch))
        else:
            m.finish(execute(launch, FAKES))
    assert seen_attempts == list(range(1, attempts + 1))
    assert states(m) == {"flaky": state}
    assert task_named(m, "flaky").attempts == attempts
    assert m.state.value == state


@dsl.pipeline
def retried_with_backoff() -> str:
    return (
        flaky()
        .set_retry(
            num_retries=3,
            backoff_duration="10s",
            backoff_factor=2.0,
            backoff_max_duration="25s",
        )
        .output
    )


def test_retry_waits_for_backoff(make_machine: MachineFactory) -> None:
    clock = FakeClock()
    m = make_machine(retried_with_backoff, clock=clock)
    assert m.next_wakeup() == 0.0  # ready now
    (launch,) = m.ready()
    assert m.next_wakeup() is None  # running, nothing waits
    delays = []
    for _ in range(3):
        m.finish(failure(launch))
        assert states(m) == {"flaky": "READY"}
        wait = m.next_wakeup()
        assert wait is not None
        delays.append(wait)
        clock.advance(wait - 1)
        assert m.ready() == []  # not before the backoff elapsed
        assert m.next_wakeup() == pytest.approx(1.0)
        clock.advance(1)
        (launch,) = m.ready()
    assert delays == [10.0, 20.0, 25.0]  # 10s, doubled, capped at the 25s maximum
    assert launch.attempt == 4
    m.finish(execute(launch, FAKES))
    assert m.state is TaskState.SUCCEEDED


def test_no_retry_after_the_dag_started_failing(make_machine: MachineFactory) -> None:
    @dsl.pipeline
    def retried_beside_failure():
        work(fail=True)
        flaky().set_retry(num_retries=2)

    m = make_machine(retried_beside_failure)
    launches = {launch.name: launch for launch in m.ready()}
    m.finish(failure(launches["work"]))
    m.finish(failure(launches["flaky"]))
    assert m.ready() == []
    assert states(m) == {"work": "FAILED", "flaky": "FAILED"}
    assert m.done


# -- outputs and values -----------------------------------------------------------------------


class PipelineOut(NamedTuple):
    number: int
    text: str
    data: Dataset


@dsl.pipeline
def with_outputs(x: int = 2) -> PipelineOut:
    summed = add(a=x, b=3)
    said = echo(text="hi")
    made = make_data(text="payload")
    return PipelineOut(number=summed.output, text=said.output, data=made.outputs["data"])


def test_pipeline_outputs(make_machine: MachineFactory, context: RunContext) -> None:
    m = make_machine(with_outputs)
    run_all(m)
    outputs = m.outputs()
    assert outputs["number"] == 5
    assert isinstance(outputs["number"], int)
    assert outputs["text"] == "hi"
    assert outputs["data"] == {
        "name": "data",
        "type": "system.Dataset",
        "uri": f"{context.pipeline_root}/with-outputs/run-1/make-data/data",
        "metadata": {"producer": "make-data"},
    }


def test_double_output_of_integral_value_is_coerced_to_int(make_machine: MachineFactory) -> None:
    m = make_machine(with_outputs)
    fakes = {**FAKES, "add": lambda p: {"Output": float(p["a"] + p["b"])}}
    run_all(m, fakes)
    assert m.outputs()["number"] == 5
    assert type(m.outputs()["number"]) is int


@dsl.pipeline
def int_list() -> int:
    return total(values=[1, 2]).output


def test_ints_stay_ints_inside_lists(make_machine: MachineFactory) -> None:
    m = make_machine(int_list)
    task = m.ir.root.dag.tasks["total"]  # type: ignore[union-attr]
    assert task.parameter_inputs["values"]["runtimeValue"]["constant"] == [1.0, 2.0]
    (launch,) = m.ready()
    values = params_of(launch)["values"]
    assert values == [1, 2]
    assert [type(v) for v in values] == [int, int]


@dsl.pipeline
def imports(uri: str = "gs://bucket/data.csv") -> str:
    imported = dsl.importer(
        artifact_uri=uri, artifact_class=Dataset, reimport=False, metadata={"source": "unit"}
    )
    return read_data(data=imported.output).output


def test_importer_completes_without_a_launch(make_machine: MachineFactory) -> None:
    m = make_machine(imports)
    (launch,) = m.ready()
    assert launch.name == "read-data"
    (data,) = launch.executor_input["inputs"]["artifacts"]["data"]["artifacts"]
    assert data["uri"] == "gs://bucket/data.csv"
    assert data["type"]["schemaTitle"] == "system.Dataset"
    assert data["metadata"] == {"source": "unit"}
    assert states(m)["importer"] == "SUCCEEDED"
    assert task_named(m, "importer").launch is None
    assert task_named(m, "importer").attempts == 0
    m.finish(execute(launch, FAKES))
    assert m.state is TaskState.SUCCEEDED


@dsl.pipeline
def shapes(text: str = "a") -> str:
    made = make_data(text=text)
    return read_data(data=made.outputs["data"]).output


def test_executor_input_shape(make_machine: MachineFactory, context: RunContext) -> None:
    m = make_machine(shapes)
    (made,) = m.ready()
    workdir = context.run_dir / "tasks" / "make-data"
    assert made.workdir == workdir
    assert made.executor_input["inputs"] == {"parameterValues": {"text": "a"}, "artifacts": {}}
    assert made.executor_input["outputs"] == {
        "parameters": {},
        "artifacts": {
            "data": {
                "artifacts": [
                    {
                        "name": "data",
                        "type": {"schemaTitle": "system.Dataset", "schemaVersion": "0.0.1"},
                        "uri": f"{context.pipeline_root}/shapes/run-1/make-data/data",
                        "metadata": {},
                    }
                ]
            }
        },
        "outputFile": str(workdir / "executor_output.json"),
    }
    m.finish(execute(made, FAKES))
    (read,) = m.ready()
    outputs = read.executor_input["outputs"]
    assert outputs["parameters"] == {
        "Output": {"outputFile": str(context.run_dir / "tasks" / "read-data" / "outputs/Output")}
    }
    assert read.output_types == {"Output": "STRING"}
    (data,) = read.executor_input["inputs"]["artifacts"]["data"]["artifacts"]
    assert data["uri"] == f"{context.pipeline_root}/shapes/run-1/make-data/data"


def test_loop_iterations_get_their_own_directories(
    make_machine: MachineFactory, context: RunContext
) -> None:
    m = make_machine(loop_artifacts)
    uris = [
        launch.executor_input["outputs"]["artifacts"]["data"]["artifacts"][0]["uri"]
        for launch in m.ready()
    ]
    root = f"{context.pipeline_root}/loop-artifacts/run-1"
    assert uris == [f"{root}/{task_dir(f'make-data[{i}]')}/data" for i in range(3)]
    assert [uri.split("/")[-2][: len("make-data_0_")] for uri in uris] == [
        "make-data_0_",
        "make-data_1_",
        "make-data_2_",
    ]


@pytest.mark.parametrize(
    ("placeholder", "expected"),
    [
        (dsl.PIPELINE_JOB_NAME_PLACEHOLDER, "job-1"),
        (dsl.PIPELINE_JOB_ID_PLACEHOLDER, "run-1"),
        (dsl.PIPELINE_TASK_NAME_PLACEHOLDER, "echo"),
        (dsl.PIPELINE_JOB_CREATE_TIME_UTC_PLACEHOLDER, "2024-01-02T03:04:05Z"),
    ],
    ids=["job-name", "job-id", "task-name", "create-time"],
)
def test_placeholders_in_constant_inputs(
    make_machine: MachineFactory, placeholder: str, expected: str
) -> None:
    @dsl.pipeline
    def named():
        echo(text=placeholder)

    m = make_machine(named)
    (launch,) = m.ready()
    assert params_of(launch) == {"text": expected}


# -- interrupt --------------------------------------------------------------------------------


def test_interrupt_fails_running_and_cancels_pending(make_machine: MachineFactory) -> None:
    m = make_machine(fan_in)
    launches = m.ready()
    assert len(launches) == 2
    m.interrupt("Ctrl-C")
    assert m.done
    assert m.ready() == []
    assert states(m) == {
        "add": "FAILED",
        "add-2": "FAILED",
        "add-3": "CANCELED",
        "double": "CANCELED",
    }
    errors = [m.tasks[launch.task_id].error for launch in launches]
    assert [(e.error_type, e.message) for e in errors if e] == [("Interrupted", "Ctrl-C")] * 2
    assert m.state is TaskState.FAILED


def test_interrupt_during_backoff_fails_the_waiting_task(make_machine: MachineFactory) -> None:
    clock = FakeClock()
    m = make_machine(retried_with_backoff, clock=clock)
    (launch,) = m.ready()
    m.finish(failure(launch))
    m.interrupt("stop")
    assert m.next_wakeup() is None
    assert states(m) == {"flaky": "FAILED"}
    assert m.done


# -- resources --------------------------------------------------------------------------------


@dsl.pipeline
def sized(cpu: str = "3"):
    flaky().set_cpu_limit(cpu).set_memory_limit("2G")


def test_resource_limit_from_pipeline_parameter(make_machine: MachineFactory) -> None:
    m = make_machine(sized, {"cpu": "3"})
    (launch,) = m.ready()
    assert launch.resources.cpu == 3.0
    assert launch.resources.memory == 2e9


def test_launch_carries_resource_request(make_machine: MachineFactory) -> None:
    @dsl.pipeline
    def fixed():
        flaky().set_cpu_request("250m").set_memory_limit("1Gi")

    m = make_machine(fixed)
    (launch,) = m.ready()
    assert (launch.resources.cpu, launch.resources.memory) == (0.25, 2**30)


@dsl.component(base_image=IMAGE)
def cores() -> str:
    return "2"


@dsl.pipeline
def sized_by_upstream():
    wanted = cores()
    flaky().set_cpu_limit(wanted.output)


def test_resource_limit_from_upstream_output(make_machine: MachineFactory) -> None:
    m = make_machine(sized_by_upstream)
    fakes = {**FAKES, "cores": lambda p: {"Output": "2"}}
    assert run_all(m, fakes) == [["cores"], ["flaky"]]
    launch = task_named(m, "flaky").launch
    assert launch is not None
    assert launch.resources.cpu == 2.0


@dsl.pipeline
def formatted(x: int = 3, name: str = "n"):
    echo(text=f"value-{x}-{name}")


def test_f_string_constant_resolves_over_other_inputs(make_machine: MachineFactory) -> None:
    m = make_machine(formatted, {"x": 7})
    (launch,) = m.ready()
    assert params_of(launch)["text"] == "value-7-n"


@dsl.component(base_image=IMAGE)
def greet(name: str, greeting: str = "hello", times: int = 2) -> str:
    return f"{greeting} {name}" * times


@dsl.pipeline
def defaults():
    greet(name="ann")


def test_component_defaults_fill_inputs_the_task_leaves_out(make_machine: MachineFactory) -> None:
    m = make_machine(defaults)
    (launch,) = m.ready()
    assert params_of(launch) == {"name": "ann", "greeting": "hello", "times": 2}
    assert type(params_of(launch)["times"]) is int


@dsl.pipeline
def inner_with_default(x: int, y: int = 5) -> int:
    return add(a=x, b=y).output


@dsl.pipeline
def outer_with_default() -> int:
    return inner_with_default(x=1).output


def test_nested_pipeline_input_defaults(make_machine: MachineFactory) -> None:
    m = make_machine(outer_with_default)
    (launch,) = m.ready()
    assert params_of(launch) == {"a": 1, "b": 5}
    m.finish(execute(launch, FAKES))
    assert m.outputs() == {"Output": 6}


# -- names that sanitise alike ----------------------------------------------------------------


@dsl.component(base_image=IMAGE)
def pair_data(a: Input[Dataset], b: Input[Dataset]) -> str:
    return a.uri + "|" + b.uri


@dsl.pipeline
def twins() -> str:
    first = make_data(text="first")
    second = make_data(text="second")
    return pair_data(a=first.outputs["data"], b=second.outputs["data"]).output


def renamed(pipeline: Any, names: dict[str, str]) -> PipelineIR:
    """The pipeline's IR with tasks renamed, as a hand-written IR may name them."""
    text = json.dumps(ir_from_component(pipeline).raw)
    for old, new in names.items():
        text = text.replace(json.dumps(old), json.dumps(new))
    return parse_pipeline(json.loads(text))


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("make a", "make_a"),
        ("make-a", "Make-A"),
        ("a/b", "a_b"),
        ("..", "make-a"),
        ("make-a[0]", "make-a_0_"),
    ],
    ids=["space-underscore", "letter-case", "slash", "dot-dot", "brackets"],
)
def test_tasks_whose_names_sanitise_alike_get_their_own_directories(
    context: RunContext, first: str, second: str
) -> None:
    ir = renamed(twins, {"make-data": first, "make-data-2": second})
    m = RunStateMachine(ir, {}, context)
    launches = {launch.name: launch for launch in m.ready()}
    assert set(launches) == {first, second}
    dirs = [launches[n].workdir for n in (first, second)]
    uris = [
        launches[n].executor_input["outputs"]["artifacts"]["data"]["artifacts"][0]["uri"]
        for n in (first, second)
    ]
    assert len({str(d).lower() for d in dirs}) == 2  # distinct even where case is ignored
    assert len({u.lower() for u in uris}) == 2
    for workdir in dirs:
        assert workdir.parent == context.run_dir / "tasks"
        assert not workdir.name.startswith(".")
    for launch in launches.values():
        m.finish(execute(launch, FAKES))
    (paired,) = m.ready()
    inputs = paired.executor_input["inputs"]["artifacts"]
    assert [inputs[slot]["artifacts"][0]["uri"] for slot in ("a", "b")] == uris


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("train", "train"),
        ("inner.train", "inner.train"),
        ("make-data-2", "make-data-2"),
    ],
    ids=["plain", "nested", "numbered"],
)
def test_plain_task_names_are_their_own_directories(name: str, expected: str) -> None:
    assert task_dir(name) == expected


def test_other_task_names_keep_a_readable_prefix() -> None:
    assert re.fullmatch(r"make_a_[0-9a-f]{8}", task_dir("make a"))
    assert re.fullmatch(r"train_3_[0-9a-f]{8}", task_dir("train[3]"))
    assert task_dir("make a") != task_dir("make_a")
    assert len(task_dir("x" * 1000)) < 120


# -- failures with a reason -------------------------------------------------------------------


@dsl.pipeline
def gated(x: int = 1):
    with dsl.If(x == 1):
        echo(text="gated")


def with_condition(pipeline: Any, expression: str) -> PipelineIR:
    doc = ir_from_component(pipeline).raw
    doc = json.loads(json.dumps(doc))
    doc["root"]["dag"]["tasks"]["condition-1"]["triggerPolicy"]["condition"] = expression
    return parse_pipeline(doc)


@pytest.mark.parametrize(
    ("expression", "reason"),
    [
        ("inputs.parameter_values['nope'] == 1.0", "nope"),
        ("int(inputs.parameter_values['pipelinechannel--x']) / 0 == 1", "divide by zero"),
        ("inputs.parameter_values['pipelinechannel--x']", "not a bool"),
    ],
    ids=["missing-key", "division-by-zero", "not-boolean"],
)
def test_condition_failing_at_run_time_gives_its_reason(
    context: RunContext, expression: str, reason: str
) -> None:
    m = RunStateMachine(with_condition(gated, expression), {"x": 1}, context)
    assert m.done
    assert m.state is TaskState.FAILED
    [entry] = m.report()
    assert (entry.name, entry.state, entry.task) == ("echo", TaskState.FAILED, None)
    assert entry.error is not None
    assert entry.error.error_type == "ConditionError"
    assert reason in entry.error.message
    assert m.error() == entry.error


def test_run_error_is_the_first_failure_not_its_echoes(make_machine: MachineFactory) -> None:
    m = make_machine(fan_in)
    first, second = m.ready()
    m.finish(failure(first, "the cause"))
    m.interrupt("stopped")
    error = m.error()
    assert error is not None
    assert (error.task, error.message) == (first.name, "the cause")
    reported = {e.name: e.error for e in m.report()}
    assert reported[second.name] is not None
    assert reported[second.name].message == "stopped"
    assert reported["double"] is None  # canceled, not failed


def test_loop_item_of_the_wrong_type_fails_the_loop_with_its_reason(
    context: RunContext,
) -> None:
    doc = json.loads(json.dumps(ir_from_component(loop_constants).raw))
    [loop] = doc["root"]["dag"]["tasks"].values()
    loop["parameterIterator"]["items"]["raw"] = '["one", "two"]'
    m = RunStateMachine(parse_pipeline(doc), {"offset": 1}, context)
    assert m.done
    assert m.state is TaskState.FAILED
    [entry] = m.report()
    assert entry.name == "add"
    assert entry.error is not None
    assert "'one'" in entry.error.message


def test_success_without_outputs_is_a_success_with_none(make_machine: MachineFactory) -> None:
    m = make_machine(shapes)
    (made,) = m.ready()
    m.finish(TaskResult(made.task_id))
    assert task_named(m, "make-data").state is TaskState.SUCCEEDED


# -- exit handlers that are pipelines ---------------------------------------------------------


@dsl.pipeline
def notify(text: str = "notified"):
    echo(text=text)
    double(x=2)


@dsl.pipeline
def guarded_by_pipeline(fail: bool = True):
    with dsl.ExitHandler(notify()):
        work(fail=fail)


@pytest.mark.parametrize("fail", [True, False], ids=["body-failed", "body-succeeded"])
def test_exit_handler_that_is_a_pipeline_runs_after_a_failure(
    make_machine: MachineFactory, fail: bool
) -> None:
    m = make_machine(guarded_by_pipeline, {"fail": fail})
    batches = run_all(m)
    assert batches == [["work"], ["notify.double", "notify.echo"]]
    assert states(m) == {
        "work": "FAILED" if fail else "SUCCEEDED",
        "notify.echo": "SUCCEEDED",
        "notify.double": "SUCCEEDED",
    }
    assert m.state is (TaskState.FAILED if fail else TaskState.SUCCEEDED)


def test_failure_inside_a_pipeline_exit_handler_cancels_its_own_rest(
    make_machine: MachineFactory,
) -> None:
    @dsl.pipeline
    def notify_chain():
        first = work(fail=True)
        echo(text=first.output)

    @dsl.pipeline
    def guarded_by_chain():
        with dsl.ExitHandler(notify_chain()):
            work(fail=True)

    m = make_machine(guarded_by_chain)
    run_all(m)
    assert states(m) == {
        "work": "FAILED",
        "notify-chain.work": "FAILED",
        "notify-chain.echo": "CANCELED",
    }


# -- pipeline outputs whose value does not fit the declared type ------------------------------


@dsl.pipeline
def collected_in_condition(flag: bool = True) -> list:
    with dsl.If(flag == True):  # noqa: E712 (a pipeline channel, not a bool)
        picked = double(x=3)
    return dsl.Collected(picked.output)


def test_output_that_does_not_fit_its_type_is_passed_through(
    make_machine: MachineFactory,
) -> None:
    m = make_machine(collected_in_condition)
    assert m.ir.root.interface.output_parameters["Output"].type == "LIST"
    run_all(m)
    assert m.state is TaskState.SUCCEEDED
    assert m.outputs() == {"Output": 6}
