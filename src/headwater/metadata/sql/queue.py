"""`SqlMetadataStore`'s run queue: the state changes a queue makes, and the runs it holds.

The queue is the `runs` table itself: a run is QUEUED from the moment it is accepted, and
every change a server makes to it (a worker taking it, a terminate, a retry, a worker found
dead, `mark_interrupted`) is one conditional UPDATE, so that two servers racing cannot both win.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, case, or_, select, update

from headwater.errors import InvalidArgumentError, NotFoundError
from headwater.metadata.base import ACTIVE_RUN_STATES, RunRecord
from headwater.metadata.queries import run_record, runs_query
from headwater.metadata.reconcile import INTERRUPTED_TASK_ERROR
from headwater.metadata.schema import EXECUTIONS, RUNS
from headwater.metadata.sql.base import SqlStoreBase

#: Columns `update_run` may set: what the run is called and where it is filed, not its state.
_ATTRIBUTES = ("display_name", "description", "experiment_id", "namespace", "storage_state")
#: Columns `transition_run` may set beside the state.
_TRANSITION = (
    "finished_at",
    "error",
    "starts",
    "engine_host",
    "engine_pid",
    "engine_started",
    "lease_until",
)


class RunQueueRecords(SqlStoreBase):
    """The queue's writes and reads on `runs` (see `MetadataStore`)."""

    def transition_run(
        self, run_id: str, *, source: tuple[str, ...], to: str, **values: Any
    ) -> bool:
        """Move the run to `to` only while it is in one of `source`; True if it moved.

        Raises:
            InvalidArgumentError: A value other than those a transition sets.
        """
        _check(values, _TRANSITION)
        stmt = (
            update(RUNS)
            .where(RUNS.c.run_id == run_id, RUNS.c.state.in_(source))
            .values(state=to, **values)
        )
        moved = self._db.transaction(lambda conn: conn.execute(stmt).rowcount, write=True)
        return bool(moved)

    def renew_lease(
        self, run_id: str, *, engine_host: str, engine_pid: int, lease_until: float
    ) -> str | None:
        """The worker holding a run says it still runs it: its lease runs to `lease_until`.

        Returns:
            The run's state: RUNNING, CANCELING when a terminate asks it to stop, or the state
            it ended in when this engine finished it; None when this engine no longer holds
            it (another server took it over).
        """
        holder = (
            (RUNS.c.run_id == run_id)
            & (RUNS.c.engine_host == engine_host)
            & (RUNS.c.engine_pid == engine_pid)
        )

        def write(conn: Connection) -> str | None:
            active = holder & RUNS.c.state.in_(ACTIVE_RUN_STATES)
            conn.execute(update(RUNS).where(active).values(lease_until=lease_until))
            state = conn.execute(select(RUNS.c.state).where(holder)).scalar()
            return None if state is None or state == "INTERRUPTED" else str(state)

        return self._db.transaction(write, write=True)

    def update_run(self, run_id: str, **values: Any) -> None:
        """Set a run's name, description, experiment, namespace or storage state.

        Raises:
            NotFoundError: No run has this id.
        """
        _check(values, _ATTRIBUTES)
        stmt = update(RUNS).where(RUNS.c.run_id == run_id).values(**values)

        def write(conn: Connection) -> None:
            if conn.execute(stmt).rowcount == 0:
                raise NotFoundError(f"no run {run_id!r} in the metadata store {self.url!r}")

        self._db.transaction(write, write=True)

    def queue_runs(self, *, states: tuple[str, ...], limit: int | None = None) -> list[RunRecord]:
        """Runs in `states` that are QUEUED or were taken from the queue, oldest first."""
        query = runs_query(
            RUNS.c.state.in_(states), or_(RUNS.c.state == "QUEUED", RUNS.c.starts > 0)
        ).order_by(RUNS.c.created_at, RUNS.c.run_id)
        if limit is not None:
            query = query.limit(limit)

        return self._db.transaction(lambda conn: [run_record(r) for r in conn.execute(query)])

    def mark_interrupted(
        self,
        run_id: str,
        *,
        finished_at: float,
        engine_host: str | None = None,
        engine_pid: int | None = None,
        lapsed_before: float | None = None,
    ) -> None:
        """Mark a RUNNING run INTERRUPTED and its RUNNING executions FAILED (with an error
        record saying the engine stopped). A run that is no longer RUNNING is left alone, and
        so is one held by an engine other than `engine_host`/`engine_pid` when they are given,
        or, with `lapsed_before`, one whose lease runs to that time or later (each condition
        is part of the UPDATE, so a claim or a renewal made meanwhile is never undone).

        Raises:
            NotFoundError: No run has this id.
        """
        where = [RUNS.c.run_id == run_id, RUNS.c.state.in_(ACTIVE_RUN_STATES)]
        if engine_host is not None:
            where.append(RUNS.c.engine_host == engine_host)
        if engine_pid is not None:
            where.append(RUNS.c.engine_pid == engine_pid)
        if lapsed_before is not None:
            where.append(RUNS.c.lease_until < lapsed_before)

        def write(conn: Connection) -> None:
            # A run being canceled whose engine died is as canceled as it will get.
            ended = case((RUNS.c.state == "CANCELING", "CANCELED"), else_="INTERRUPTED")
            done = conn.execute(
                update(RUNS).where(*where).values(state=ended, finished_at=finished_at)
            )
            if done.rowcount == 0:
                if (
                    conn.execute(select(RUNS.c.run_id).where(RUNS.c.run_id == run_id)).first()
                    is None
                ):
                    raise NotFoundError(f"no run {run_id!r} in the metadata store {self.url!r}")
                return
            conn.execute(
                update(EXECUTIONS)
                .where(EXECUTIONS.c.run_id == run_id, EXECUTIONS.c.state == "RUNNING")
                .values(state="FAILED", finished_at=finished_at, error=dict(INTERRUPTED_TASK_ERROR))
            )

        self._db.transaction(write, write=True)


def _check(values: dict[str, Any], allowed: tuple[str, ...]) -> None:
    unknown = sorted(set(values) - set(allowed))
    if unknown:
        raise InvalidArgumentError(
            f"cannot set {', '.join(unknown)} of a run here (settable: {', '.join(allowed)})"
        )
