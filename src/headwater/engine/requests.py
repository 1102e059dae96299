"""What sandboxed tasks ask of the engine: the handler protocol, and carrying a result's out.

A sandboxed task cannot reach the metadata store or start a process that outlives it; what
a component needs of either (`register_model`, `deploy_model`) it writes as requests
(`config.TASK_REQUESTS_ENV`). When the task has succeeded, the engine hands them to the
run's handler (`RunOptions.requests`; `headwater.components.registration.RunRequests`),
which checks that each is about the task's own run and inputs, carries it out and answers
output parameters to set (the version registered, the URL served). A request refused or
failed fails the task, with the handler's one line.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Protocol

from headwater.errors import UserError
from headwater.task import Launch, Outputs, TaskError, TaskResult

__all__ = ["TaskRequests", "carry_out"]


class TaskRequests(Protocol):
    """Carries out what a sandboxed task asked (see the module docstring).

    Example::

        class Echo:
            def __call__(self, request, *, launch, run_id, store):
                return {"answer": request["question"]}
    """

    def __call__(
        self, request: dict[str, Any], *, launch: Launch, run_id: str, store: Any
    ) -> dict[str, Any]:
        """Carry out `request` for `launch` (a task of run `run_id` recorded in `store`);
        return the output parameters to set. Raises UserError to refuse it."""


def carry_out(
    handler: TaskRequests | None, result: TaskResult, launch: Launch, run_id: str, store: Any
) -> TaskResult:
    """`result` once its requests are carried out: its outputs updated, or failed."""
    if not result.requests or not result.ok:
        return result
    try:
        if handler is None:
            raise UserError(
                "the task asked the engine to do what a sandboxed task may not (register or "
                "deploy a model), and this run has no one to do it"
            )
        updates: dict[str, Any] = {}
        for request in result.requests:
            updates.update(handler(request, launch=launch, run_id=run_id, store=store))
    except Exception as exc:  # the request's failure is the task's, not the engine's
        error = TaskError(launch.name, type(exc).__name__, str(exc), log_path=str(launch.log_path))
        return dataclasses.replace(result, outputs=None, error=error, retryable=False)
    outputs = result.outputs or Outputs()
    parameters = {**outputs.parameters, **updates}
    return dataclasses.replace(result, outputs=dataclasses.replace(outputs, parameters=parameters))
