"""The Python API every `headwater` command is: runs, lineage, artifacts, cache, compile.

Use it through the top-level package, which loads these modules on first use::

    import headwater

    for run in headwater.list_runs(state="FAILED", limit=10):
        print(run.run_id, run.pipeline, run.error)

Modules, one concept each: `running` (`run`, `resume`, with `RunOptions`), `runs` (list,
get, delete), `steps` (metrics over steps), `lineage`, `artifacts`, `cache`, `compiler`
(compile a pipeline to IR).
Every function takes `metadata=`: a `MetadataStore`, a SQLAlchemy URL, or None for the
default store. Functions that only read open the store read-only and change nothing in it;
each returned object has `to_json()`, the one JSON shape of its kind (the CLI's `--json` and
the web UI print it).
"""

from __future__ import annotations

from datetime import datetime, timezone

__all__ = ["iso_time"]


def iso_time(ts: float | None) -> str:
    """A Unix time as ISO 8601 UTC to the second (`2026-01-31T12:00:00Z`); "" for None.

    The API's records keep Unix seconds; their `to_json()` and the CLI show this form.
    """
    if ts is None:
        return ""
    return (
        datetime.fromtimestamp(ts, timezone.utc)
        .isoformat(timespec="seconds")
        .replace("+00:00", "Z")
    )
