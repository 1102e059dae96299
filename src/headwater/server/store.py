"""The server's records in the metadata store: KFP experiments, pipelines, versions and runs.

The `kfp_*` tables (`headwater.metadata.schema`, revision 0006) on the same database as the
runs they describe, SQLite or PostgreSQL, through `metadata.connect.Database` (migrations,
retries on a locked SQLite file). `kfp_runs` is also the run queue (`server.queue`).
Records are plain dicts keyed by column name.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping
from typing import Any

from sqlalchemy import Table, and_, delete, func, insert, not_, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.sql.elements import ColumnElement

from headwater.errors import HeadwaterSystemError
from headwater.metadata.connect import Database
from headwater.metadata.schema import (
    KFP_EXPERIMENTS,
    KFP_PIPELINE_VERSIONS,
    KFP_PIPELINES,
    KFP_RECURRING_RUNS,
    KFP_RUNS,
)
from headwater.server.wire import ApiError, ListQuery, Predicate

__all__ = ["ACTIVE", "FINAL", "KfpStore", "Record"]

Record = dict[str, Any]
#: Run states that hold a worker, and those that never change again.
ACTIVE = ("RUNNING", "CANCELING")
FINAL = ("SUCCEEDED", "FAILED", "CANCELED", "SKIPPED")


class KfpStore:
    """The server's tables on the metadata database at `url` (migrated on open)."""

    def __init__(self, url: str) -> None:
        self.db = Database(url)

    # -- experiments ------------------------------------------------------------------------

    def create_experiment(self, display_name: str, description: str, namespace: str) -> Record:
        """Raises ApiError 409 if the namespace has an experiment of that name."""
        row = {
            "experiment_id": str(uuid.uuid4()),
            "display_name": display_name,
            "description": description,
            "namespace": namespace,
            "storage_state": "AVAILABLE",
            "created_at": time.time(),
        }
        self._insert(KFP_EXPERIMENTS, row, f"an experiment named {display_name!r} exists")
        return row

    def experiment(self, experiment_id: str) -> Record:
        """Raises ApiError 404 for an unknown id."""
        return self._one(KFP_EXPERIMENTS, "experiment_id", experiment_id, "experiment")

    def experiment_named(self, name: str, namespace: str) -> Record | None:
        """The namespace's experiment `name`, if there is one."""
        return self._first(
            KFP_EXPERIMENTS,
            and_(KFP_EXPERIMENTS.c.namespace == namespace, KFP_EXPERIMENTS.c.display_name == name),
        )

    def default_experiment(self, namespace: str) -> Record:
        """The namespace's experiment "Default", made on first use."""
        for _ in range(2):
            found = self.experiment_named("Default", namespace)
            if found is not None:
                return found
            try:
                return self.create_experiment("Default", "", namespace)
            except ApiError:
                continue  # made meanwhile by a concurrent request
        raise ApiError(409, "the Default experiment could not be made; retry")

    def set_experiment_storage(self, experiment_id: str, state: str) -> None:
        """Archive (with its runs, as upstream does) or unarchive an experiment."""
        self.experiment(experiment_id)

        def write(conn: Any) -> None:
            conn.execute(
                update(KFP_EXPERIMENTS)
                .where(KFP_EXPERIMENTS.c.experiment_id == experiment_id)
                .values(storage_state=state)
            )
            if state == "ARCHIVED":
                conn.execute(
                    update(KFP_RUNS)
                    .where(KFP_RUNS.c.experiment_id == experiment_id)
                    .values(storage_state=state)
                )

        self.db.transaction(write, write=True)

    def delete_experiment(self, experiment_id: str) -> None:
        """Delete the experiment; its runs stay (as upstream)."""
        self._delete(KFP_EXPERIMENTS, "experiment_id", experiment_id, "experiment")

    # -- pipelines and versions -------------------------------------------------------------

    def create_pipeline(self, display_name: str, description: str, namespace: str) -> Record:
        """Raises ApiError 409 if the namespace has a pipeline of that name."""
        row = {
            "pipeline_id": str(uuid.uuid4()),
            "display_name": display_name,
            "description": description,
            "namespace": namespace,
            "created_at": time.time(),
        }
        self._insert(KFP_PIPELINES, row, f"a pipeline named {display_name!r} exists")
        return row

    def pipeline(self, pipeline_id: str) -> Record:
        """Raises ApiError 404 for an unknown id."""
        return self._one(KFP_PIPELINES, "pipeline_id", pipeline_id, "pipeline")

    def pipeline_named(self, name: str, namespace: str) -> Record:
        """Raises ApiError 404 if the namespace has no pipeline `name`."""
        found = self._first(
            KFP_PIPELINES,
            and_(KFP_PIPELINES.c.display_name == name, KFP_PIPELINES.c.namespace == namespace),
        )
        if found is None:
            raise ApiError(404, f"no pipeline named {name!r} in namespace {namespace!r}")
        return found

    def delete_pipeline(self, pipeline_id: str, *, cascade: bool) -> None:
        """Raises ApiError 409 if it has versions and `cascade` is false."""
        self.pipeline(pipeline_id)
        if not cascade and self.count(
            KFP_PIPELINE_VERSIONS, KFP_PIPELINE_VERSIONS.c.pipeline_id == pipeline_id
        ):
            raise ApiError(
                409,
                f"pipeline {pipeline_id} has versions: delete them first, or pass cascade=true",
            )

        def write(conn: Any) -> None:
            conn.execute(
                delete(KFP_PIPELINE_VERSIONS).where(
                    KFP_PIPELINE_VERSIONS.c.pipeline_id == pipeline_id
                )
            )
            conn.execute(delete(KFP_PIPELINES).where(KFP_PIPELINES.c.pipeline_id == pipeline_id))

        self.db.transaction(write, write=True)

    def create_version(
        self, pipeline_id: str, display_name: str, description: str, spec: Mapping[str, Any]
    ) -> Record:
        """Raises ApiError 404 for an unknown pipeline, 409 for a name it has."""
        self.pipeline(pipeline_id)
        row = {
            "pipeline_version_id": str(uuid.uuid4()),
            "pipeline_id": pipeline_id,
            "display_name": display_name,
            "description": description,
            "pipeline_spec": dict(spec),
            "created_at": time.time(),
        }
        self._insert(
            KFP_PIPELINE_VERSIONS, row, f"pipeline {pipeline_id} has a version {display_name!r}"
        )
        return row

    def version(self, pipeline_id: str, version_id: str) -> Record:
        """Raises ApiError 404 for an unknown pipeline or version."""
        found = self._one(KFP_PIPELINE_VERSIONS, "pipeline_version_id", version_id, "version")
        if found["pipeline_id"] != pipeline_id:
            raise ApiError(404, f"pipeline {pipeline_id} has no version {version_id}")
        return found

    def latest_version(self, pipeline_id: str) -> Record:
        """Raises ApiError 404 if the pipeline has no version."""
        self.pipeline(pipeline_id)
        query = (
            select(KFP_PIPELINE_VERSIONS)
            .where(KFP_PIPELINE_VERSIONS.c.pipeline_id == pipeline_id)
            .order_by(KFP_PIPELINE_VERSIONS.c.created_at.desc())
            .limit(1)
        )
        row = self.db.transaction(lambda conn: conn.execute(query).first())
        if row is None:
            raise ApiError(404, f"pipeline {pipeline_id} has no versions")
        return dict(row._mapping)

    def delete_version(self, pipeline_id: str, version_id: str) -> None:
        """Raises ApiError 404 for an unknown pipeline or version."""
        self.version(pipeline_id, version_id)
        self._delete(KFP_PIPELINE_VERSIONS, "pipeline_version_id", version_id, "version")

    # -- runs -------------------------------------------------------------------------------

    def create_run(self, row: Record) -> Record:
        """Queue a run (state PENDING)."""
        row = {
            "run_id": str(uuid.uuid4()),
            "storage_state": "AVAILABLE",
            "state": "PENDING",
            "error": None,
            "created_at": time.time(),
            "scheduled_at": None,
            "finished_at": None,
            "worker_host": None,
            "worker_pid": None,
            "starts": 0,
            "recurring_run_id": None,
            **row,
        }
        self._insert(KFP_RUNS, row, f"run {row['run_id']} exists")
        return row

    def run(self, run_id: str) -> Record:
        """Raises ApiError 404 for an unknown id."""
        return self._one(KFP_RUNS, "run_id", run_id, "run")

    def update_run(self, run_id: str, *, when: tuple[str, ...] = (), **values: Any) -> bool:
        """Set `values` on the run, only while its state is one of `when` (any if empty);
        True if it changed (an atomic compare-and-set, so two writers cannot both win)."""
        cond = KFP_RUNS.c.run_id == run_id
        if when:
            cond = and_(cond, KFP_RUNS.c.state.in_(when))
        stmt = update(KFP_RUNS).where(cond).values(**values)
        changed = self.db.transaction(lambda conn: conn.execute(stmt).rowcount, write=True)
        return bool(changed)

    def runs_in(self, states: tuple[str, ...], limit: int | None = None) -> list[Record]:
        """Runs in `states`, oldest first."""
        query = select(KFP_RUNS).where(KFP_RUNS.c.state.in_(states)).order_by(KFP_RUNS.c.created_at)
        if limit is not None:
            query = query.limit(limit)
        rows = self.db.transaction(lambda conn: conn.execute(query).all())
        return [dict(r._mapping) for r in rows]

    def delete_run(self, run_id: str) -> None:
        """Raises ApiError 404 for an unknown id."""
        self._delete(KFP_RUNS, "run_id", run_id, "run")

    # -- recurring runs ---------------------------------------------------------------------

    def create_recurring_run(self, row: Record) -> Record:
        """Record a recurring run (`row` has every column but the id and times)."""
        now = time.time()
        row = {"recurring_run_id": str(uuid.uuid4()), "created_at": now, "updated_at": now, **row}
        self._insert(KFP_RECURRING_RUNS, row, f"recurring run {row['recurring_run_id']} exists")
        return row

    def recurring_run(self, recurring_run_id: str) -> Record:
        """Raises ApiError 404 for an unknown id."""
        return self._one(KFP_RECURRING_RUNS, "recurring_run_id", recurring_run_id, "recurring run")

    def update_recurring_run(
        self, recurring_run_id: str, *, next_was: float | None = None, **values: Any
    ) -> bool:
        """Set `values`; with `next_was`, only while `next_fire_at` still is that (so one
        scheduler fires each time once). True if it changed."""
        cond = KFP_RECURRING_RUNS.c.recurring_run_id == recurring_run_id
        if next_was is not None:
            cond = and_(cond, KFP_RECURRING_RUNS.c.next_fire_at == next_was)
        stmt = update(KFP_RECURRING_RUNS).where(cond).values(updated_at=time.time(), **values)
        return bool(self.db.transaction(lambda conn: conn.execute(stmt).rowcount, write=True))

    def due_recurring_runs(self, now: float) -> list[Record]:
        """Enabled recurring runs whose next time has come."""
        c = KFP_RECURRING_RUNS.c
        query = select(KFP_RECURRING_RUNS).where(c.status == "ENABLED", c.next_fire_at <= now)
        rows = self.db.transaction(lambda conn: conn.execute(query).all())
        return [dict(r._mapping) for r in rows]

    def delete_recurring_run(self, recurring_run_id: str) -> None:
        """Raises ApiError 404 for an unknown id; the runs it made stay."""
        self._delete(KFP_RECURRING_RUNS, "recurring_run_id", recurring_run_id, "recurring run")

    # -- lists ------------------------------------------------------------------------------

    def page(
        self, table: Table, query: ListQuery, *conditions: ColumnElement[bool]
    ) -> tuple[list[Record], int]:
        """One page of `table` (rows matching `conditions` and the query's filter) and the
        number of matching rows."""
        cond = and_(True, *conditions, *(_predicate(table, p) for p in query.predicates))
        column = table.c[query.sort_key]
        order = column.desc() if query.descending else column.asc()
        id_column = next(iter(table.primary_key.columns))
        rows_q = (
            select(table)
            .where(cond)
            .order_by(order, id_column)
            .offset(query.offset)
            .limit(query.page_size)
        )

        def read(conn: Any) -> tuple[list[Record], int]:
            rows = [dict(r._mapping) for r in conn.execute(rows_q).all()]
            total = conn.execute(select(func.count()).select_from(table).where(cond)).scalar()
            return rows, int(total or 0)

        return self.db.transaction(read)

    def count(self, table: Table, cond: ColumnElement[bool]) -> int:
        """How many rows of `table` match `cond`."""
        query = select(func.count()).select_from(table).where(cond)
        return int(self.db.transaction(lambda conn: conn.execute(query).scalar()) or 0)

    # -- helpers ----------------------------------------------------------------------------

    def _insert(self, table: Table, row: Record, conflict: str) -> None:
        try:
            self.db.transaction(
                lambda conn: conn.execute(insert(table).values(**row)), write=True, refers_to=""
            )
        except (IntegrityError, HeadwaterSystemError) as exc:
            # A unique key taken (the store retried once, then refused the write).
            raise ApiError(409, conflict) from exc

    def _first(self, table: Table, cond: ColumnElement[bool]) -> Record | None:
        row = self.db.transaction(lambda conn: conn.execute(select(table).where(cond)).first())
        return None if row is None else dict(row._mapping)

    def _one(self, table: Table, key: str, value: str, what: str) -> Record:
        found = self._first(table, table.c[key] == value)
        if found is None:
            raise ApiError(404, f"no {what} with id {value!r}")
        return found

    def _delete(self, table: Table, key: str, value: str, what: str) -> None:
        stmt = delete(table).where(table.c[key] == value)
        if not self.db.transaction(lambda conn: conn.execute(stmt).rowcount, write=True):
            raise ApiError(404, f"no {what} with id {value!r}")


def _predicate(table: Table, p: Predicate) -> ColumnElement[bool]:
    """A filter predicate as SQL (times are stored as epoch seconds)."""
    column = table.c[p.key]
    value = p.value
    compare: dict[str, Any] = {
        "EQUALS": column.__eq__,
        "NOT_EQUALS": lambda v: not_(column == v),
        "GREATER_THAN": column.__gt__,
        "GREATER_THAN_EQUALS": column.__ge__,
        "LESS_THAN": column.__lt__,
        "LESS_THAN_EQUALS": column.__le__,
        "IN": lambda v: column.in_(v if isinstance(v, list) else [v]),
        "IS_SUBSTRING": lambda v: column.contains(str(v), autoescape=True),
    }
    result: ColumnElement[bool] = compare[p.op](value)
    return result
