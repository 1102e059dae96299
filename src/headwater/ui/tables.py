"""What the UI's tables show: numbers a person reads at a glance, the runs table's metric columns
(per pipeline), and each run's executor and whether the cache answered all of it.

No web framework here: the pages (Jinja filters) and the JSON API use these alike.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from headwater.metadata.base import TaskCounts

__all__ = ["COMMON_COLUMNS", "format_number", "metric_columns", "task_summary"]

#: At most this many metric columns are shown by default for a page of several pipelines.
COMMON_COLUMNS = 4
#: Below this magnitude a number is written in scientific notation (1.2e-05).
TINY = 1e-4
#: From this magnitude on, too (1.235e+15): digits past float precision are noise.
HUGE = 1e15


def format_number(value: Any) -> str:
    """A number as a table cell shows it: `99,510`, `1,234.57`, `0.8734`, `1.2e-05`.

    Integers, and floats of 1000 or more, get thousands separators (floats keep at most two
    decimals there); smaller floats keep four significant digits; scientific notation only
    below 0.0001 or from 1e15 on. None is empty; anything else is `str(value)`.
    """
    if value is None:
        return ""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return str(value)
    if isinstance(value, int):
        return f"{value:,}"
    if not math.isfinite(value):
        return str(value)  # nan, inf, -inf
    size = abs(value)
    if size == 0:
        return "0"
    if size >= HUGE or size < TINY:
        return f"{value:.4g}"
    if size >= 1000:
        return f"{value:,.2f}".rstrip("0").rstrip(".")
    return f"{value:.4g}"


def metric_columns(runs: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """The metric columns of a page of runs (each with `pipeline` and `metrics`).

    Returns:
        `{"pipelines", "metrics", "columns"}`: the page's pipelines and every metric its runs
        logged (sorted), and the metrics shown until the reader picks others: with one
        pipeline, all of its metrics; with several, those that every pipeline logging any
        metric logged, the most frequent first, at most `COMMON_COLUMNS`. A union of every
        pipeline's metrics is a table wider than any screen, mostly empty.
    """
    by_pipeline: dict[str, Counter[str]] = {}
    for run in runs:
        seen = by_pipeline.setdefault(str(run["pipeline"]), Counter())
        seen.update(list(run["metrics"]))  # counts runs, not values
    everything = sorted({m for seen in by_pipeline.values() for m in seen})
    if len(by_pipeline) == 1:
        columns = everything
    else:
        logging = [set(seen) for seen in by_pipeline.values() if seen]
        common = set.intersection(*logging) if logging else set()
        total = sum(by_pipeline.values(), Counter())
        columns = sorted(common, key=lambda m: (-total[m], m))[:COMMON_COLUMNS]
    return {"pipelines": sorted(by_pipeline), "metrics": everything, "columns": columns}


def task_summary(counts: TaskCounts | None, *, state: str) -> dict[str, Any]:
    """`{"cached", "executor", "tasks"}` of a run from its task counts.

    `cached` is True for a run that succeeded with every task that was not skipped answered
    by the cache (none ran); `executor` names the executors its tasks ran on ("local",
    "dask", or both as "dask, local"), empty when none ran.
    """
    if counts is None:
        return {"cached": False, "executor": "", "tasks": 0}
    considered = sum(n for s, n in counts.states.items() if s != "SKIPPED")
    hits = counts.states.get("CACHED", 0)
    return {
        "cached": state == "SUCCEEDED" and considered > 0 and hits == considered,
        "executor": ", ".join(counts.executors),
        "tasks": sum(counts.states.values()),
    }
