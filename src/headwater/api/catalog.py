"""How runs are filed: experiments, named pipelines with their versions, and recurring runs.

`headwater server` (KFP's API, and the web UI's start-run form) makes them; every run names the
experiment, pipeline version and recurring run it belongs to (`RunInfo`). Reads open the store
read-only; each record's `to_json()` is its one JSON shape (the web UI's API answers it).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from headwater.api import iso_time
from headwater.api._args import count
from headwater.api._store import MetadataArg, reading, writing
from headwater.errors import NotFoundError
from headwater.metadata.base import (
    ExperimentRecord,
    Page,
    PipelineRecord,
    Predicate,
    RecurringRunRecord,
    VersionRecord,
)

__all__ = [
    "archive_experiment",
    "get_experiment",
    "get_pipeline",
    "get_recurring_run",
    "get_version",
    "list_experiments",
    "list_pipelines",
    "list_recurring_runs",
    "record_json",
]

_TIMES = ("created_at", "updated_at", "next_fire_at", "last_created_at")


def record_json(record: Any, **extra: Any) -> dict[str, Any]:
    """A catalog record (and `extra` fields) as JSON: times as ISO 8601, a version's IR left
    out (it is the pipeline spec: ask for the version's graph)."""
    doc = {**dataclasses.asdict(record), **extra}
    doc.pop("ir", None)
    for key in _TIMES:
        if key in doc:
            doc[key] = iso_time(doc[key])
    return doc


def _page(
    kind: str, where: tuple[Predicate, ...], limit: int, offset: int, sort: str = "created_at"
) -> Page:
    count("limit", limit, minimum=1)
    count("offset", offset, minimum=0)
    return Page(where=where, sort=sort, offset=offset, limit=limit)


def _in(namespace: str | None, namespaces: list[str] | None) -> tuple[Predicate, ...]:
    """Predicates keeping records to `namespace`, and to `namespaces` (each when given)."""
    where: tuple[Predicate, ...] = ()
    if namespace is not None:
        where = (Predicate("namespace", "EQUALS", namespace),)
    if namespaces is not None:
        where += (Predicate("namespace", "IN", list(namespaces)),)
    return where


def list_experiments(
    *,
    namespace: str | None = None,
    namespaces: list[str] | None = None,
    limit: int = 50,
    offset: int = 0,
    metadata: MetadataArg = None,
) -> tuple[list[dict[str, Any]], int]:
    """Experiments, newest first, each with `runs` (how many), `last_state` and
    `last_created_at` (of its newest run); and how many there are in all. Only those in
    `namespace`, and in `namespaces`, when given."""
    where = _in(namespace, namespaces)
    with reading(metadata) as store:
        if store is None:
            return [], 0
        found, total = store.page("experiments", _page("experiments", where, limit, offset))
        summaries = store.experiment_summaries([e.experiment_id for e in found])
    empty = {"runs": 0, "last_state": None, "last_created_at": None}
    return [record_json(e, **summaries.get(e.experiment_id, empty)) for e in found], total


def get_experiment(experiment_id: str, *, metadata: MetadataArg = None) -> ExperimentRecord:
    """One experiment. Raises NotFoundError."""
    with reading(metadata) as store:
        found = None if store is None else store.get_experiment(experiment_id)
    if found is None:
        raise NotFoundError(f"no experiment with id {experiment_id!r}")
    return found


def archive_experiment(
    experiment_id: str, archived: bool, *, metadata: MetadataArg = None
) -> ExperimentRecord:
    """Archive an experiment with its runs (hidden from KFP's default lists), or unarchive it.

    Raises:
        NotFoundError: No experiment has this id.
    """
    with writing(metadata) as store:
        if store is None:
            raise NotFoundError(f"no experiment with id {experiment_id!r}")
        store.set_experiment_storage(experiment_id, "ARCHIVED" if archived else "AVAILABLE")
        found = store.get_experiment(experiment_id)
    assert found is not None  # just changed
    return found


def list_pipelines(
    *,
    namespace: str | None = None,
    namespaces: list[str] | None = None,
    limit: int = 50,
    offset: int = 0,
    metadata: MetadataArg = None,
) -> tuple[list[dict[str, Any]], int]:
    """Named pipelines, newest first, each with `versions` (how many) and `latest` (its
    newest version); and how many there are in all. Only those in `namespace`, and in
    `namespaces` ("" for the shared ones), when given."""
    where = _in(namespace, namespaces)
    with reading(metadata) as store:
        if store is None:
            return [], 0
        found, total = store.page("pipelines", _page("pipelines", where, limit, offset))
        shown = []
        for p in found:
            _, versions = store.page(
                "versions",
                Page(where=(Predicate("pipeline_id", "EQUALS", p.pipeline_id),), limit=1),
            )
            latest = store.latest_version(p.pipeline_id)
            shown.append(record_json(p, versions=versions, latest=latest and record_json(latest)))
    return shown, total


def get_pipeline(
    pipeline_id: str, *, metadata: MetadataArg = None
) -> tuple[PipelineRecord, list[VersionRecord]]:
    """A named pipeline and its versions, newest first. Raises NotFoundError."""
    with reading(metadata) as store:
        found = None if store is None else store.get_pipeline(pipeline_id)
        if store is None or found is None:
            raise NotFoundError(f"no pipeline with id {pipeline_id!r}")
        versions, _ = store.page(
            "versions", Page(where=(Predicate("pipeline_id", "EQUALS", pipeline_id),), limit=1000)
        )
    return found, versions


def get_version(pipeline_version_id: str, *, metadata: MetadataArg = None) -> VersionRecord:
    """One pipeline version, with its IR. Raises NotFoundError."""
    with reading(metadata) as store:
        found = None if store is None else store.get_version(pipeline_version_id)
    if found is None:
        raise NotFoundError(f"no pipeline version with id {pipeline_version_id!r}")
    return found


def list_recurring_runs(
    *,
    experiment_id: str | None = None,
    namespaces: list[str] | None = None,
    limit: int = 50,
    offset: int = 0,
    metadata: MetadataArg = None,
) -> tuple[list[RecurringRunRecord], int]:
    """Recurring runs, newest first; and how many there are in all. Only those of
    `experiment_id`, and in `namespaces`, when given."""
    where = _in(None, namespaces)
    if experiment_id is not None:
        where += (Predicate("experiment_id", "EQUALS", experiment_id),)
    with reading(metadata) as store:
        if store is None:
            return [], 0
        found, total = store.page("recurring_runs", _page("recurring_runs", where, limit, offset))
    return list(found), total


def get_recurring_run(recurring_run_id: str, *, metadata: MetadataArg = None) -> RecurringRunRecord:
    """One recurring run. Raises NotFoundError."""
    with reading(metadata) as store:
        found = None if store is None else store.get_recurring_run(recurring_run_id)
    if found is None:
        raise NotFoundError(f"no recurring run with id {recurring_run_id!r}")
    return found
