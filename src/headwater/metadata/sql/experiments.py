"""`SqlMetadataStore`'s experiments: groups of runs, unique by name in a namespace."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, and_, delete, func, insert, select, update
from sqlalchemy.exc import IntegrityError

from headwater.errors import ConflictError, HeadwaterSystemError, NotFoundError
from headwater.metadata.base import ExperimentRecord
from headwater.metadata.queries import chunks
from headwater.metadata.schema import EXPERIMENTS, RUNS
from headwater.metadata.sql.base import SqlStoreBase
from headwater.metadata.sql.pages import experiment_record


class ExperimentRecords(SqlStoreBase):
    """Experiments (see `MetadataStore`)."""

    def create_experiment(self, experiment: ExperimentRecord) -> ExperimentRecord:
        """Raises ConflictError if the namespace has an experiment of that name."""
        try:
            self._db.transaction(
                lambda conn: conn.execute(insert(EXPERIMENTS).values(**vars(experiment))),
                write=True,
            )
        except (IntegrityError, HeadwaterSystemError) as exc:
            raise ConflictError(
                f"namespace {experiment.namespace!r} has an experiment named "
                f"{experiment.display_name!r} already"
            ) from exc
        return experiment

    def get_experiment(self, experiment_id: str) -> ExperimentRecord | None:
        """One experiment by id."""
        return self._one(EXPERIMENTS.c.experiment_id == experiment_id)

    def experiment_named(self, name: str, namespace: str) -> ExperimentRecord | None:
        """The namespace's experiment `name`."""
        return self._one(
            (EXPERIMENTS.c.display_name == name) & (EXPERIMENTS.c.namespace == namespace)
        )

    def set_experiment_storage(self, experiment_id: str, storage_state: str) -> None:
        """Archive (with its runs) or unarchive an experiment. Raises NotFoundError."""

        def write(conn: Connection) -> None:
            done = conn.execute(
                update(EXPERIMENTS)
                .where(EXPERIMENTS.c.experiment_id == experiment_id)
                .values(storage_state=storage_state)
            )
            if not done.rowcount:
                raise NotFoundError(f"no experiment with id {experiment_id!r}")
            if storage_state == "ARCHIVED":
                conn.execute(
                    update(RUNS)
                    .where(RUNS.c.experiment_id == experiment_id)
                    .values(storage_state=storage_state)
                )

        self._db.transaction(write, write=True)

    def delete_experiment(self, experiment_id: str) -> None:
        """Delete an experiment; its runs stay, in no experiment. Raises NotFoundError."""

        def write(conn: Connection) -> None:
            # Explicit, so that it also holds where foreign keys are off.
            conn.execute(
                update(RUNS).where(RUNS.c.experiment_id == experiment_id).values(experiment_id=None)
            )
            stmt = delete(EXPERIMENTS).where(EXPERIMENTS.c.experiment_id == experiment_id)
            if not conn.execute(stmt).rowcount:
                raise NotFoundError(f"no experiment with id {experiment_id!r}")

        self._db.transaction(write, write=True)

    def experiment_summaries(self, experiment_ids: list[str]) -> dict[str, dict[str, Any]]:
        """Per experiment with runs: how many, and the newest one's state and time."""

        def read(conn: Connection) -> dict[str, dict[str, Any]]:
            found: dict[str, dict[str, Any]] = {}
            for chunk in chunks(experiment_ids):
                newest = (
                    select(
                        RUNS.c.experiment_id,
                        func.count().label("runs"),
                        func.max(RUNS.c.created_at).label("last_created_at"),
                    )
                    .where(RUNS.c.experiment_id.in_(chunk))
                    .group_by(RUNS.c.experiment_id)
                    .subquery()
                )
                rows = conn.execute(
                    select(newest, RUNS.c.state).join(
                        RUNS,
                        and_(
                            RUNS.c.experiment_id == newest.c.experiment_id,
                            RUNS.c.created_at == newest.c.last_created_at,
                        ),
                    )
                )
                for row in rows:
                    found[row.experiment_id] = {
                        "runs": row.runs,
                        "last_created_at": row.last_created_at,
                        "last_state": row.state,
                    }
            return found

        return self._db.transaction(read)

    def _one(self, cond: Any) -> ExperimentRecord | None:
        row = self._db.transaction(
            lambda conn: conn.execute(select(EXPERIMENTS).where(cond)).first()
        )
        return None if row is None else experiment_record(row)
