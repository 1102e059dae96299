"""`LocalExecutor` with its real fork server: failures that happen around a task, not in it."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from headwater.executors.local import LocalExecutor
from headwater.spec.placeholders import PlaceholderContext
from headwater.task import Launch, ResourceRequest, TaskResult


@pytest.fixture(scope="module")
def executor() -> Iterator[LocalExecutor]:
    running = LocalExecutor()
    try:
        yield running
    finally:
        running.shutdown(kill=True)


def command_launch(workdir: Path, command: list[str], task_id: int = 1) -> Launch:
    executor_input: dict[str, Any] = {
        "inputs": {"parameterValues": {}},
        "outputs": {"parameters": {}, "artifacts": {}, "outputFile": str(workdir / "out.json")},
    }
    return Launch(
        task_id,
        f"task-{task_id}",
        "comp-t",
        "exec-t",
        {"command": command},
        executor_input,
        PlaceholderContext(executor_input=executor_input),
        workdir,
        workdir / "log.txt",
        {},
        ResourceRequest(),
        {},
    )


def result_of(executor: LocalExecutor, launch: Launch) -> TaskResult:
    executor.submit(launch)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        for result in executor.wait(0.5):
            assert result.task_id == launch.task_id
            return result
    pytest.fail("no result within 60 s")


def test_a_command_that_succeeds(executor: LocalExecutor, tmp_path: Path) -> None:
    result = result_of(executor, command_launch(tmp_path / "ok", ["sh", "-c", "echo hi"]))
    assert result.ok, result.error
    assert (tmp_path / "ok" / "log.txt").read_text() == "hi\n"


def test_a_placeholder_that_does_not_resolve_fails_the_task_not_the_engine(
    executor: LocalExecutor, tmp_path: Path
) -> None:
    launch = command_launch(tmp_path / "w", ["echo", "{{$.inputs.parameters['nope']}}"])

    result = result_of(executor, launch)

    assert result.error is not None
    assert result.error.error_type == "PipelineSpecError"
    assert "nope" in result.error.message
    assert executor.running() == 0


def test_a_task_whose_directory_cannot_be_made_reports_why(
    executor: LocalExecutor, tmp_path: Path
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    launch = command_launch(blocker / "work", ["sh", "-c", "exit 0"], task_id=2)

    result = result_of(executor, launch)

    assert result.error is not None
    assert result.error.error_type in ("NotADirectoryError", "FileExistsError")
    assert str(blocker) in result.error.message
    assert "Traceback" in result.error.traceback
    assert result.error.exit_code == 1


def test_a_container_without_a_command_is_a_spec_error(
    executor: LocalExecutor, tmp_path: Path
) -> None:
    result = result_of(executor, command_launch(tmp_path / "empty", [], task_id=3))

    assert result.error is not None
    assert result.error.error_type == "PipelineSpecError"
    assert "no command" in result.error.message
