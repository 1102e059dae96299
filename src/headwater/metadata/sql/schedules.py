"""`SqlMetadataStore`'s recurring runs: what the server's scheduler fires, and when next."""

from __future__ import annotations

import time
from typing import Any

from sqlalchemy import Connection, delete, insert, select, update

from headwater.errors import NotFoundError
from headwater.metadata.base import RecurringRunRecord
from headwater.metadata.schema import RECURRING_RUNS
from headwater.metadata.sql.base import SqlStoreBase
from headwater.metadata.sql.pages import recurring_record


class RecurringRunRecords(SqlStoreBase):
    """Recurring runs (see `MetadataStore`)."""

    def create_recurring_run(self, recurring: RecurringRunRecord) -> RecurringRunRecord:
        """Record a recurring run (its version must exist)."""
        row = {**vars(recurring), "no_catchup": int(recurring.no_catchup)}
        self._db.transaction(
            lambda conn: conn.execute(insert(RECURRING_RUNS).values(**row)),
            write=True,
            refers_to=f"pipeline version {recurring.pipeline_version_id!r}",
        )
        return recurring

    def get_recurring_run(self, recurring_run_id: str) -> RecurringRunRecord | None:
        """One recurring run by id."""
        query = select(RECURRING_RUNS).where(RECURRING_RUNS.c.recurring_run_id == recurring_run_id)
        row = self._db.transaction(lambda conn: conn.execute(query).first())
        return None if row is None else recurring_record(row)

    def update_recurring_run(
        self, recurring_run_id: str, *, next_was: float | None = None, **values: Any
    ) -> bool:
        """Set `values` (with `next_was`, only while `next_fire_at` still is that); True if
        it changed."""
        cond = RECURRING_RUNS.c.recurring_run_id == recurring_run_id
        if next_was is not None:
            cond = cond & (RECURRING_RUNS.c.next_fire_at == next_was)
        stmt = update(RECURRING_RUNS).where(cond).values(updated_at=time.time(), **values)
        return bool(self._db.transaction(lambda conn: conn.execute(stmt).rowcount, write=True))

    def due_recurring_runs(self, now: float) -> list[RecurringRunRecord]:
        """Enabled recurring runs whose next time has come."""
        c = RECURRING_RUNS.c
        query = select(RECURRING_RUNS).where(c.status == "ENABLED", c.next_fire_at <= now)
        rows = self._db.transaction(lambda conn: conn.execute(query).all())
        return [recurring_record(r) for r in rows]

    def delete_recurring_run(self, recurring_run_id: str) -> None:
        """Delete a recurring run; its runs stay. Raises NotFoundError."""
        stmt = delete(RECURRING_RUNS).where(RECURRING_RUNS.c.recurring_run_id == recurring_run_id)

        def write(conn: Connection) -> None:
            if not conn.execute(stmt).rowcount:
                raise NotFoundError(f"no recurring run with id {recurring_run_id!r}")

        self._db.transaction(write, write=True)
