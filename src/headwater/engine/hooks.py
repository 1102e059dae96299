"""Lifecycle hooks: observe a run as it goes (progress display, logs, metrics).

Subclass `RunHooks` and override the phases you need; every hook takes keyword arguments::

    class Printer(RunHooks):
        def after_task(self, *, run, task, state):
            print(task.name, state)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from headwater.engine.result import Run
    from headwater.engine.state import TaskRun
    from headwater.task import Launch, TaskState


class RunHooks:
    """No-op hooks; override what you need."""

    def before_run(self, *, run: Run) -> None:
        """The run is about to schedule its first task."""

    def before_task(self, *, run: Run, launch: Launch) -> None:
        """An executor task attempt is starting."""

    def after_task(self, *, run: Run, task: TaskRun, state: TaskState) -> None:
        """An executor task attempt ended (the task may still be retried)."""

    def on_task_warning(self, *, run: Run, launch: Launch, message: str) -> None:
        """A task will run, but not quite as asked (one line; at most once per task and cause)."""

    def on_run_warning(self, *, run: Run, message: str) -> None:
        """Something beside the tasks went wrong and the run went on (one line), such as
        metadata that could not be recorded."""

    def on_tick(self, *, run: Run) -> None:
        """Called at least every `tick` seconds while the run is going."""

    def after_run(self, *, run: Run) -> None:
        """The run reached its final state."""
