"""`SqlMetadataStore.page`: one page of any kind of record, filtered and ordered in the database.

KFP's list calls (`headwater server`) and the web UI's tables read through this: the
predicates name columns of the kind's table (runs also `pipeline`, the name their IR gives),
values are bound as parameters, and the count of all matches comes from the same filter.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlalchemy import ColumnElement, Connection, Row, Select, and_, func, not_, select

from headwater.errors import InvalidArgumentError
from headwater.metadata.base import (
    ExperimentRecord,
    Page,
    PipelineRecord,
    Predicate,
    RecurringRunRecord,
    VersionRecord,
)
from headwater.metadata.queries import run_record, runs_query, with_metrics
from headwater.metadata.schema import (
    EXPERIMENTS,
    PIPELINE_VERSIONS,
    PIPELINES,
    RECURRING_RUNS,
    RUNS,
)
from headwater.metadata.sql.base import SqlStoreBase

__all__ = ["PageRecords", "experiment_record", "recurring_record", "version_record"]


def experiment_record(row: Row[Any]) -> ExperimentRecord:
    """An `ExperimentRecord` from a row of `experiments`."""
    return ExperimentRecord(**row._mapping)


def pipeline_record(row: Row[Any]) -> PipelineRecord:
    """A `PipelineRecord` from a row of `pipelines`."""
    return PipelineRecord(**row._mapping)


def version_record(row: Row[Any]) -> VersionRecord:
    """A `VersionRecord` from a row of `pipeline_versions`."""
    values = dict(row._mapping)
    values["ir"] = dict(values["ir"] or {})
    return VersionRecord(**values)


def recurring_record(row: Row[Any]) -> RecurringRunRecord:
    """A `RecurringRunRecord` from a row of `recurring_runs`."""
    values = dict(row._mapping)
    values["no_catchup"] = bool(values["no_catchup"])
    values["runtime_config"] = dict(values["runtime_config"] or {})
    values["trigger"] = dict(values["trigger"] or {})
    return RecurringRunRecord(**values)


#: kind -> (the rows' query, the column a predicate names, the id column, the record).
_KINDS: dict[str, tuple[Select[Any], Callable[[str], Any], Any, Callable[[Row[Any]], Any]]] = {
    "runs": (
        runs_query(),
        lambda c: PIPELINE_VERSIONS.c.name if c == "pipeline" else RUNS.c[c],
        RUNS.c.run_id,
        run_record,
    ),
    "experiments": (
        select(EXPERIMENTS),
        lambda c: EXPERIMENTS.c[c],
        EXPERIMENTS.c.experiment_id,
        experiment_record,
    ),
    "pipelines": (
        select(PIPELINES),
        lambda c: PIPELINES.c[c],
        PIPELINES.c.pipeline_id,
        pipeline_record,
    ),
    "versions": (
        select(PIPELINE_VERSIONS),
        lambda c: PIPELINE_VERSIONS.c[c],
        PIPELINE_VERSIONS.c.pipeline_version_id,
        version_record,
    ),
    "recurring_runs": (
        select(RECURRING_RUNS),
        lambda c: RECURRING_RUNS.c[c],
        RECURRING_RUNS.c.recurring_run_id,
        recurring_record,
    ),
}

_COMPARE: dict[str, Callable[[Any, Any], ColumnElement[bool]]] = {
    "EQUALS": lambda c, v: c == v,
    "NOT_EQUALS": lambda c, v: not_(c == v),
    "GREATER_THAN": lambda c, v: c > v,
    "GREATER_THAN_EQUALS": lambda c, v: c >= v,
    "LESS_THAN": lambda c, v: c < v,
    "LESS_THAN_EQUALS": lambda c, v: c <= v,
    "IN": lambda c, v: c.in_(v if isinstance(v, list) else [v]),
    "NOT_IN": lambda c, v: c.not_in(v if isinstance(v, list) else [v]),
    # Case-blind on every database (SQLite's LIKE is, PostgreSQL's is not); % and _ are text.
    "IS_SUBSTRING": lambda c, v: c.icontains(str(v), autoescape=True),
}


class PageRecords(SqlStoreBase):
    """`page` (see `MetadataStore.page`)."""

    def page(self, kind: str, page: Page) -> tuple[list[Any], int]:
        """One page of `kind` and how many records match in all.

        Raises:
            InvalidArgumentError: An unknown kind, column or operation.
        """
        if kind not in _KINDS:
            raise InvalidArgumentError(f"no records of kind {kind!r} (kinds: {', '.join(_KINDS)})")
        query, column_of, id_column, record = _KINDS[kind]
        try:
            cond = and_(True, *(_condition(column_of, p) for p in page.where))
            order = column_of(page.sort)
        except KeyError as exc:
            raise InvalidArgumentError(f"{kind} have no column {exc.args[0]!r}") from exc
        rows_q = (
            query.where(cond)
            .order_by(order.desc() if page.descending else order.asc(), id_column)
            .offset(page.offset)
            .limit(page.limit)
        )
        count_q = select(func.count()).select_from(query.where(cond).subquery())

        def read(conn: Connection) -> tuple[list[Any], int]:
            found = [record(r) for r in conn.execute(rows_q)]
            if kind == "runs":
                found = with_metrics(conn, found)
            return found, int(conn.execute(count_q).scalar() or 0)

        return self._db.transaction(read)


def _condition(column_of: Callable[[str], Any], p: Predicate) -> ColumnElement[bool]:
    if p.op not in _COMPARE:
        raise InvalidArgumentError(f"unknown operation {p.op!r} (known: {', '.join(_COMPARE)})")
    return _COMPARE[p.op](column_of(p.column), p.value)
