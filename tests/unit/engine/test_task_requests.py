"""What sandboxed tasks ask of the engine: carried out for the task, which fails with the
handler's one line when refused, and outputs set from the answer."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from headwater.engine.requests import carry_out
from headwater.errors import PermissionDeniedError
from headwater.spec.placeholders import PlaceholderContext
from headwater.task import Launch, Outputs, ResourceRequest, TaskResult


def a_launch(tmp_path: Path) -> Launch:
    inputs: dict[str, Any] = {"inputs": {}, "outputs": {}}
    return Launch(
        1, "t", "comp-t", "exec-t", {}, inputs, PlaceholderContext(executor_input=inputs),
        tmp_path, tmp_path / "log.txt", {}, ResourceRequest(), {"version": "NUMBER_INTEGER"},
    )  # fmt: skip


def _result(*requests: dict[str, Any]) -> TaskResult:
    return TaskResult(1, outputs=Outputs(parameters={"version": 0}), requests=list(requests))


def test_an_answer_sets_the_outputs(tmp_path: Path) -> None:
    def handler(request: dict[str, Any], **_: Any) -> dict[str, Any]:
        return {"version": request["n"] + 1}

    done = carry_out(handler, _result({"n": 2}), a_launch(tmp_path), "run", None)
    assert done.ok and done.outputs is not None and done.outputs.parameters == {"version": 3}


def test_a_refusal_fails_the_task_and_is_not_retried(tmp_path: Path) -> None:
    def handler(request: dict[str, Any], **_: Any) -> dict[str, Any]:
        raise PermissionDeniedError("not yours")

    done = carry_out(handler, _result({}), a_launch(tmp_path), "run", None)
    assert done.error is not None and not done.retryable
    assert (done.error.error_type, done.error.message) == ("PermissionDeniedError", "not yours")


def test_a_run_with_no_handler_fails_the_asking_task_saying_why(tmp_path: Path) -> None:
    done = carry_out(None, _result({"kind": "register_model"}), a_launch(tmp_path), "run", None)
    assert done.error is not None and "no one to do it" in done.error.message
