"""A task's outcome that is a failure, though the task succeeded: never reused from the cache.

Some tasks report a failure as a value instead of failing, so that the pipeline goes on past
it: a tuning trial whose training raised returns `{"trial_index", "error"}` (see
`headwater.hpo.trials`). To the engine such a task succeeded, and its outputs flow downstream
as usual; but reusing it would serve the same failure on every later run without trying
again. A task says "my outcome is a failure, do not reuse it" by writing the reason to the
file that the environment variable `HEADWATER_TASK_OUTCOME` names, which Headwater sets for
every task it runs::

    from headwater.outcome import mark_failed

    @dsl.component
    def evaluate(model: Input[Model]) -> dict:
        try:
            return {"auc": score(model.path)}
        except MemoryError as exc:
            mark_failed(f"out of memory: {exc}")
            return {"error": str(exc)}

A component whose image may not have Headwater writes the file itself (in a shell:
`echo "$reason" > "$HEADWATER_TASK_OUTCOME"`). Elsewhere (Kubeflow, a plain function call)
the variable is unset and nothing is written.

The engine records such an execution as SUCCEEDED with the reason as its error record
(`error_type` "FailedOutcome") and without a cache key, so no later run is served from it, and
a resumed run runs it again. Failed tasks are never reused either.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from headwater.config import TASK_OUTCOME_ENV

#: The environment variable naming the file a task writes its failed outcome's reason to.
OUTCOME_ENV = TASK_OUTCOME_ENV
#: That file, in the task's own directory.
OUTCOME_FILE = "failed-outcome.txt"
#: The `error_type` of the error record an execution with a failed outcome is recorded with.
FAILED_OUTCOME = "FailedOutcome"
_REASON_CHARS = 2000


def mark_failed(reason: str) -> None:
    """Say that this task's outcome is a failure (`reason`): the task still succeeds and its
    outputs are passed on, but no later run reuses them from the cache.

    Call it from inside a task; outside one (no `HEADWATER_TASK_OUTCOME`) it does nothing.
    """
    path = os.environ.get(OUTCOME_ENV)
    if not path:
        return
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(str(reason) or "the task marked its outcome a failure")


def read_failed(path: str | os.PathLike[str]) -> str | None:
    """The reason a task wrote with `mark_failed` to `path`, or None when it wrote nothing."""
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            text = fh.read(_REASON_CHARS).strip()
    except FileNotFoundError:
        return None
    except OSError as exc:  # something is there: the task meant to say something
        return f"the task marked its outcome a failure ({OUTCOME_FILE} unreadable: {exc})"
    return text or "the task marked its outcome a failure"


def legacy_failure(outputs: Mapping[str, Any]) -> str | None:
    """The failure among output parameters recorded before tasks could mark one, or None.

    Tuning trials (`headwater.hpo`) returned their failure as the record
    `{"trial_index": N, "error": "..."}` and nothing else; entries that earlier versions
    cached, and runs of pipelines compiled by them, are recognised by that exact shape.
    """
    for value in outputs.values():
        if (
            isinstance(value, dict)
            and len(value) == 2
            and isinstance(value.get("error"), str)
            and isinstance(value.get("trial_index"), int | float)
        ):
            return str(value["error"])
    return None
