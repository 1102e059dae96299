"""A run's work grows with its tasks and no faster: big loops through the state machine and
the engine's queue of launches waiting for room, by plain calls (no processes).

Work is counted, not timed: the Python calls the state machine makes (`sys.setprofile`) for a
loop four times as big must be about four times as many. The state machine that looked at
every open DAG on every task's end made sixteen times as many.
"""

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from kfp import dsl

from headwater.engine.runner import bind_arguments
from headwater.engine.state import RunContext, RunStateMachine
from headwater.engine.waiting import Waiting
from headwater.executors.admission import ResourcePool
from headwater.spec.loader import ir_from_component
from headwater.task import Launch, Outputs, ResourceRequest, TaskError, TaskResult, TaskState


@dsl.component(base_image="python:3.11")
def inc(x: int) -> int:
    return x + 1


@dsl.component(base_image="python:3.11")
def total(xs: list[int]) -> int:
    return sum(xs)


@dsl.component(base_image="python:3.11")
def total_nested(xs: list[list[int]]) -> int:
    return sum(sum(x) for x in xs)


def flat(n: int, parallelism: int = 0) -> Any:
    @dsl.pipeline
    def pipeline() -> int:
        with dsl.ParallelFor(items=list(range(n)), parallelism=parallelism) as item:
            t = inc(x=item)
        return total(xs=dsl.Collected(t.output)).output

    return pipeline


def nested(n: int) -> Any:
    @dsl.pipeline
    def pipeline() -> int:
        with (
            dsl.ParallelFor(items=list(range(10))),
            dsl.ParallelFor(items=list(range(n // 10))) as inner,
        ):
            t = inc(x=inner)
        return total_nested(xs=dsl.Collected(t.output)).output

    return pipeline


def result(launch: Launch) -> TaskResult:
    """What the task process would give back: `inc` adds one, `total` sums."""
    values = launch.executor_input["inputs"]["parameterValues"]
    if "x" in values:
        out: Any = values["x"] + 1
    elif values["xs"] and isinstance(values["xs"][0], list):
        out = sum(sum(x) for x in values["xs"])
    else:
        out = sum(values["xs"])
    return TaskResult(launch.task_id, outputs=Outputs(parameters={"Output": out}))


def machine(pipeline: Any, tmp_path: Path, *, max_tasks: int = 1_000_000) -> RunStateMachine:
    context = RunContext(
        "run-1", "job-1", str(tmp_path / "root"), tmp_path / "run", "2024", max_tasks=max_tasks
    )
    ir = ir_from_component(pipeline)
    return RunStateMachine(ir, bind_arguments(ir, {}), context)


def calls_to_finish(m: RunStateMachine, *, batch: int = 8) -> int:
    """Run `m` to its end, `batch` tasks at a time as an executor with that many slots would;
    return how many Python calls `finish` made in all."""
    count = 0

    def counter(frame: Any, event: str, arg: Any) -> None:
        nonlocal count
        if event in ("call", "c_call"):
            count += 1

    running: list[Launch] = []
    while not m.done:
        running += m.ready()
        assert running, "stalled"
        done, running = running[:batch], running[batch:]
        for launch in done:
            sys.setprofile(counter)
            try:
                m.finish(result(launch))
            finally:
                sys.setprofile(None)
    return count


@pytest.mark.parametrize("shape", [flat, nested], ids=["flat", "nested"])
def test_a_loop_four_times_as_big_costs_four_times_as_much(
    shape: Callable[[int], Any], tmp_path: Path
) -> None:
    small, big = machine(shape(300), tmp_path), machine(shape(1200), tmp_path)
    small_calls, big_calls = calls_to_finish(small), calls_to_finish(big)
    # Both ran to the right end, every iteration once.
    expected = sum(range(1, 301)) if shape is flat else 10 * sum(range(1, 31))
    assert small.outputs() == {"Output": expected}
    assert len(big.tasks) >= 1200 and big.state is TaskState.SUCCEEDED
    per_task_small, per_task_big = small_calls / 300, big_calls / 1200
    assert per_task_big < 1.25 * per_task_small, (per_task_small, per_task_big)


def test_a_big_loop_with_parallelism_keeps_its_bound_and_its_order(tmp_path: Path) -> None:
    m = machine(flat(2000, parallelism=3), tmp_path)
    started: list[str] = []
    running: list[Launch] = []
    while not m.done:
        new = m.ready()
        started += [launch.name for launch in new]
        running += new
        assert len([r for r in running if r.name.startswith("inc")]) <= 3
        m.finish(result(running.pop(0)))
    assert started[:-1] == [f"inc[{i}]" for i in range(2000)]
    assert m.outputs() == {"Output": sum(range(1, 2001))}


def test_a_failed_iteration_cancels_the_loop_iterations_not_started(tmp_path: Path) -> None:
    m = machine(flat(1000, parallelism=2), tmp_path)
    running = m.ready()
    assert [r.name for r in running] == ["inc[0]", "inc[1]"]
    m.finish(TaskResult(running[0].task_id, error=TaskError("inc[0]", "RuntimeError", "boom")))
    m.finish(result(running[1]))
    assert m.done and m.state is TaskState.FAILED
    states = [state.value for _, state, _ in m.executor_tasks()]
    assert states.count("FAILED") == 1 and states.count("SUCCEEDED") == 1
    assert states.count("CANCELED") == 1000 - 2 + 1  # the rest of the loop, and `total`


def test_a_loop_past_the_most_tasks_a_run_may_have_fails_in_one_line(tmp_path: Path) -> None:
    fits = machine(flat(98), tmp_path, max_tasks=100)  # 98 iterations, `total`, the loop
    calls_to_finish(fits)
    assert fits.state is TaskState.SUCCEEDED
    m = machine(flat(99), tmp_path, max_tasks=100)
    assert m.done and m.state is TaskState.FAILED
    error = m.error()
    assert error is not None and error.error_type == "ResourceError"
    assert error.message == (
        "this loop over 99 items would make the run 101 tasks, over the 100 one run may have: "
        "loop over fewer items (batch them into lists), or raise HEADWATER_MAX_TASKS if the "
        "engine's machine has the memory (about 15 KiB a task)"
    )
    assert "\n" not in error.message


def launch(task_id: int, cpu: float = 0.0) -> Launch:
    """A launch that asks for `cpu` CPUs: all the queue and the pool look at."""
    from headwater.spec.placeholders import PlaceholderContext

    placeholders = PlaceholderContext(
        executor_input={}, job_name="j", job_resource_name="j", job_uuid="u", task_name="t",
        task_uuid="u-1", pipeline_root="/tmp", create_time_utc="", schedule_time_utc="",
        workspace_path="/tmp",
    )  # fmt: skip
    return Launch(
        task_id, f"t{task_id}", "comp-t", "exec-t", {}, {}, placeholders, Path("/tmp"),
        Path("/tmp/log"), {}, ResourceRequest(cpu=cpu), {},
    )  # fmt: skip


def test_waiting_launches_start_in_the_order_they_came_and_refusals_are_asked_once() -> None:
    pool = ResourcePool(slots=3, cpu=2.0, memory=0.0)
    asked: list[int] = []

    def try_acquire(launch: Launch) -> bool:
        asked.append(launch.task_id)
        return pool.try_acquire(launch)

    waiting = Waiting()
    # Two big ones that cannot both run, small ones behind and between them.
    for task_id, cpu in [(1, 1.5), (2, 1.5), (3, 0.25), (4, 1.5)]:
        waiting.append(launch(task_id, cpu))
    for task_id in range(5, 1005):
        waiting.append(launch(task_id, 0.25))
    started = [lt.task_id for lt in waiting.admit(try_acquire)]
    assert started == [1, 3, 5]  # in order; a big one could not fit beside the first
    # Each request refused once was not asked again in the pass: 1000 waiting small ones cost
    # one question, not a thousand.
    assert asked == [1, 2, 3, 5, 6]
    assert len(waiting) == 1001
    for task_id in started:
        pool.release(task_id)
    asked.clear()
    assert [lt.task_id for lt in waiting.admit(try_acquire)] == [2, 6, 7]
    assert len(waiting) == 998
