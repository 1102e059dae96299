"""`LocalExecutor` with its real fork server: failures that happen around a task, not in it,
and a server started ahead of the executor (`prestart`)."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from headwater.executors import prestart
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


def test_a_task_that_closed_its_output_leaves_the_next_task_alone(
    executor: LocalExecutor, tmp_path: Path
) -> None:
    """The fork server stops reading a pipe every writer closed, before the task ends; a task
    forked meanwhile must still start (it once died closing the closed pipe's descriptor)."""
    quiet = command_launch(tmp_path / "quiet", ["sh", "-c", "exec >&- 2>&-; sleep 1"], task_id=7)
    executor.submit(quiet)
    time.sleep(0.3)
    loud = command_launch(tmp_path / "loud", ["sh", "-c", "echo after"], task_id=8)
    executor.submit(loud)
    results: dict[int, TaskResult] = {}
    deadline = time.monotonic() + 60
    while len(results) < 2 and time.monotonic() < deadline:
        results.update((r.task_id, r) for r in executor.wait(0.5))
    assert results[8].ok and results[7].ok, (results[8].error, results[7].error)
    assert (tmp_path / "loud" / "log.txt").read_text() == "after\n"


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
    assert result.error.message.startswith("could not start the task process")
    assert result.error.exit_code is None  # it never ran


def test_a_container_without_a_command_is_a_spec_error(
    executor: LocalExecutor, tmp_path: Path
) -> None:
    result = result_of(executor, command_launch(tmp_path / "empty", [], task_id=3))

    assert result.error is not None
    assert result.error.error_type == "PipelineSpecError"
    assert "no command" in result.error.message


def test_a_prestarted_server_is_adopted_with_the_environment_it_started_with(
    started: list[subprocess.Popen[bytes]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("HEADWATER_TEST_LATE", raising=False)
    server = prestart.PrestartedServer()
    monkeypatch.setenv("HEADWATER_TEST_LATE", "set after the server started")
    adopting = LocalExecutor(server=server)
    try:
        server.close()  # adopted: closing leaves it to the executor

        launch = command_launch(tmp_path / "w", ["sh", "-c", "echo $HEADWATER_TEST_LATE"])
        result = result_of(adopting, launch)
    finally:
        adopting.shutdown(kill=True)

    assert len(started) == 1, "the executor started a server of its own"
    assert result.ok, result.error
    assert (tmp_path / "w" / "log.txt").read_text() == "set after the server started\n"


def test_a_prestarted_server_that_died_is_replaced(
    started: list[subprocess.Popen[bytes]], tmp_path: Path
) -> None:
    server = prestart.PrestartedServer()
    started[0].kill()
    started[0].wait()
    replacing = LocalExecutor(server=server)
    try:
        result = result_of(replacing, command_launch(tmp_path / "w", ["sh", "-c", "echo hi"]))
    finally:
        replacing.shutdown(kill=True)

    assert result.ok, result.error
    assert len(started) == 2
    assert all(s.returncode is not None for s in started)
    assert all(s.stdin is not None and s.stdin.closed for s in started)


def test_a_prestarted_server_nobody_adopts_is_stopped_and_reaped(
    started: list[subprocess.Popen[bytes]],
) -> None:
    server = prestart.PrestartedServer()
    server.close()
    server.close()

    assert started[0].returncode is not None
    assert started[0].stdin is not None and started[0].stdin.closed
    assert server.adopt() is None
