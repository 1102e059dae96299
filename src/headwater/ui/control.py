"""What the UI's buttons do to runs: start, terminate, retry, delete.

`RunControl` is what the app is given: `headwater server` passes its queue's operations (a run
started from the UI is queued like one from `kfp.Client`, and deleting or terminating one is
the same operation with the same answers); `headwater ui` on its own uses `LocalRuns`, which
starts a run in this process, as `headwater run` would.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

from headwater.errors import InvalidArgumentError, PermissionDeniedError

if TYPE_CHECKING:
    from headwater.api.runs import DeletedRun
    from headwater.spec.ir import PipelineIR

__all__ = ["LocalRuns", "RunControl"]


class RunControl(Protocol):
    """Starts, stops, retries and deletes runs for the UI."""

    #: True when runs wait in a queue, and may be terminated and retried.
    queued: bool

    def start(
        self,
        *,
        ir: PipelineIR | None = None,
        version_id: str = "",
        arguments: Mapping[str, Any],
        display_name: str = "",
        experiment_id: str = "",
        namespace: str = "",
        created_by: str | None = None,
    ) -> str:
        """Start a run of `ir` (or of the version `version_id`), in `experiment_id` or else
        the "Default" experiment of `namespace`, recording `created_by` as its creator; its
        id once recorded.

        Raises:
            UserError: The pipeline or its arguments are invalid (nothing ran).
        """
        ...

    def terminate(self, run_id: str) -> None:
        """Stop a queued or running run."""
        ...

    def retry(self, run_id: str) -> None:
        """Resume a failed, canceled or interrupted run."""
        ...

    def delete(self, run_id: str) -> DeletedRun:
        """Delete a run with its tasks, logs and the artifacts only it used; what was removed
        (its full id and those artifacts' URIs)."""
        ...

    def enable_recurring_run(self, recurring_run_id: str, enabled: bool) -> None:
        """Enable or disable a recurring run."""
        ...


class LocalRuns:
    """`RunControl` without a server: runs start on a thread of this process.

    Args:
        metadata_url: The store the runs record in.
    """

    queued = False

    def __init__(self, metadata_url: str | None) -> None:
        self.metadata_url = metadata_url

    def start(
        self,
        *,
        ir: PipelineIR | None = None,
        version_id: str = "",
        arguments: Mapping[str, Any],
        display_name: str = "",
        experiment_id: str = "",
        namespace: str = "",
        created_by: str | None = None,
    ) -> str:
        """Run `ir` on a thread (see `ui.launch.launch`); versions, names and experiments
        need `headwater server`."""
        from headwater.api.principals import has_principals
        from headwater.ui.launch import launch

        if has_principals(self.metadata_url):
            # Its tasks would run here as this process's user, with its environment: a team's
            # runs go through `headwater server`, which sandboxes every task.
            raise PermissionDeniedError(
                "this store is a team's (it has tokens or users): start runs on its "
                "`headwater server`, which runs each task in a sandbox, not here"
            )
        if ir is None or version_id or display_name or experiment_id or namespace:
            raise InvalidArgumentError(
                "runs of uploaded pipelines, run names and experiments need `headwater "
                "server`: start one, or run a pipeline file here"
            )
        return launch(ir, dict(arguments), metadata=self.metadata_url)

    def terminate(self, run_id: str) -> None:
        """Runs here are not queued: stop one where it runs (Ctrl-C, or `kill`)."""
        raise InvalidArgumentError(
            f"run {run_id} is not in a queue: terminating runs needs `headwater server`"
        )

    def retry(self, run_id: str) -> None:
        """Runs here are resumed from the command line."""
        from headwater import config

        raise InvalidArgumentError(
            f"retrying runs needs `headwater server`; resume this one with "
            f"{config.home_command('run', '--resume', run_id)}"
        )

    def enable_recurring_run(self, recurring_run_id: str, enabled: bool) -> None:
        """Recurring runs fire only in a server."""
        raise InvalidArgumentError(
            f"recurring run {recurring_run_id} fires only in `headwater server`: enable or "
            "disable it there"
        )

    def delete(self, run_id: str) -> DeletedRun:
        """`headwater.api.runs.delete_run`: `run_id` may be a unique prefix."""
        from headwater.api.runs import delete_run

        return delete_run(run_id, metadata=self.metadata_url)
