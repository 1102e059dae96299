"""What the experiments, pipelines and recurring-run pages show, built from `headwater.api`.

The runs of an experiment or a recurring run are the runs table's page (`data.runs_page`)
filtered to them; a pipeline version's graph is its plan drawn before any run
(`graph.layout` of a run with no tasks yet).
"""

from __future__ import annotations

from typing import Any

from headwater.api import catalog
from headwater.api.runs import RunDetails
from headwater.ui import data

__all__ = [
    "experiment_view",
    "experiments_view",
    "pipeline_view",
    "pipelines_view",
    "recurring_run_view",
    "recurring_runs_view",
    "trigger_text",
    "version_view",
]


def _paged(items: list[Any], total: int, limit: int, offset: int) -> dict[str, Any]:
    return {
        "total": total,
        "limit": limit,
        "offset": offset,
        "next_offset": offset + limit if offset + limit < total else None,
        "items": items,
    }


def experiments_view(
    *, metadata: str | None, limit: int = 50, offset: int = 0, namespaces: list[str] | None = None
) -> dict[str, Any]:
    """A page of experiments, newest first, each with its run count and newest run's state
    (of `namespaces`, when given)."""
    found, total = catalog.list_experiments(
        limit=limit, offset=offset, namespaces=namespaces, metadata=metadata
    )
    return _paged(found, total, limit, offset)


def experiment_view(
    experiment_id: str, *, metadata: str | None, limit: int = 50, offset: int = 0
) -> dict[str, Any]:
    """An experiment with a page of its runs (`data.runs_page`) and its recurring runs."""
    found = catalog.get_experiment(experiment_id, metadata=metadata)
    runs = data.runs_page(
        metadata=metadata, limit=limit, offset=offset, experiment_id=experiment_id
    )
    recurring, _ = catalog.list_recurring_runs(
        experiment_id=experiment_id, limit=100, metadata=metadata
    )
    return {
        "experiment": catalog.record_json(found),
        "runs": runs,
        "recurring_runs": [_recurring_json(r, metadata) for r in recurring],
    }


def pipelines_view(
    *, metadata: str | None, limit: int = 50, offset: int = 0, namespaces: list[str] | None = None
) -> dict[str, Any]:
    """A page of named pipelines, newest first, with their version counts and newest version
    (of `namespaces`, "" for the shared ones, when given)."""
    found, total = catalog.list_pipelines(
        limit=limit, offset=offset, namespaces=namespaces, metadata=metadata
    )
    return _paged(found, total, limit, offset)


def pipeline_view(pipeline_id: str, *, metadata: str | None) -> dict[str, Any]:
    """A named pipeline and its versions, newest first."""
    found, versions = catalog.get_pipeline(pipeline_id, metadata=metadata)
    return {
        "pipeline": catalog.record_json(found),
        "versions": [catalog.record_json(v) for v in versions],
    }


def version_view(pipeline_id: str, version_id: str, *, metadata: str | None) -> dict[str, Any]:
    """A pipeline version: its record, its parameters (the start-a-run form's fields) and its
    graph drawn from its spec, every task still to run (PENDING)."""
    from headwater.errors import NotFoundError
    from headwater.spec.ir import parse_pipeline
    from headwater.ui.graph import layout
    from headwater.ui.launch import form_of

    version = catalog.get_version(version_id, metadata=metadata)
    if version.pipeline_id != pipeline_id:
        raise NotFoundError(f"pipeline {pipeline_id} has no version {version_id!r}")
    pipeline, _ = catalog.get_pipeline(pipeline_id, metadata=metadata)
    ir = parse_pipeline(version.ir)
    form = form_of(ir)
    defaults = {p["name"]: p["default"] for p in form["parameters"] if p["default"] is not None}
    planned = RunDetails(
        run_id="", pipeline=ir.name, pipeline_version=version.digest, state="QUEUED",
        created_at=version.created_at, finished_at=None, parameters=defaults, outputs={},
        error=None, pipeline_root="", metrics={},
    )  # fmt: skip
    return {
        "pipeline": catalog.record_json(pipeline),
        "version": catalog.record_json(version),
        "parameters": form["parameters"],
        "graph": layout(planned, dict(version.ir)),
    }


def trigger_text(trigger: dict[str, Any]) -> str:
    """A recurring run's trigger as a reader says it: `cron 0 0 3 * * *`, `every 3600 s`."""
    cron = trigger.get("cron_schedule")
    if isinstance(cron, dict):
        return f"cron {cron.get('cron', '')}"
    periodic = trigger.get("periodic_schedule") or {}
    return f"every {periodic.get('interval_second', '?')} s"


def _recurring_json(row: Any, metadata: str | None) -> dict[str, Any]:
    """A recurring run with its trigger in words and the names of its experiment, pipeline
    version and (for an uploaded version) pipeline."""
    from headwater.errors import NotFoundError

    experiment = version = ""
    pipeline_id = None
    try:
        if row.experiment_id:
            experiment = catalog.get_experiment(row.experiment_id, metadata=metadata).display_name
        found = catalog.get_version(row.pipeline_version_id, metadata=metadata)
        version, pipeline_id = found.name, found.pipeline_id
        if pipeline_id is not None:
            named, _ = catalog.get_pipeline(pipeline_id, metadata=metadata)
            version = f"{named.display_name} · {found.display_name}"
    except NotFoundError:
        pass
    return catalog.record_json(
        row, trigger_text=trigger_text(row.trigger), experiment=experiment,
        version_name=version, pipeline_id=pipeline_id,
    )  # fmt: skip


def recurring_runs_view(
    *, metadata: str | None, limit: int = 50, offset: int = 0, namespaces: list[str] | None = None
) -> dict[str, Any]:
    """A page of recurring runs: trigger, next fire time, state, max concurrency (of
    `namespaces`, when given)."""
    found, total = catalog.list_recurring_runs(
        limit=limit, offset=offset, namespaces=namespaces, metadata=metadata
    )
    return _paged([_recurring_json(r, metadata) for r in found], total, limit, offset)


def recurring_run_view(
    recurring_run_id: str, *, metadata: str | None, limit: int = 50, offset: int = 0
) -> dict[str, Any]:
    """A recurring run with a page of the runs it made."""
    found = catalog.get_recurring_run(recurring_run_id, metadata=metadata)
    runs = data.runs_page(
        metadata=metadata, limit=limit, offset=offset, recurring_run_id=recurring_run_id
    )
    return {"recurring_run": _recurring_json(found, metadata), "runs": runs}
