"""`SqlMetadataStore`'s runs and executions: create, claim, finish, list, delete."""

from __future__ import annotations

import time
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Connection,
    bindparam,
    case,
    delete,
    exists,
    func,
    insert,
    or_,
    select,
    update,
)

from headwater.errors import NotFoundError, RunClaimedError, UserError
from headwater.metadata.base import ACTIVE_RUN_STATES, ExecutionRecord, RunRecord, TaskCounts
from headwater.metadata.lite_sql import EXECUTION_FIELDS
from headwater.metadata.queries import (
    chunks,
    execution_record,
    resolve_run_id,
    run_row,
    scalars,
    select_runs,
    unuploaded_version,
)
from headwater.metadata.schema import (
    ARTIFACTS,
    ENDPOINTS,
    EVENTS,
    EXECUTIONS,
    EXPERIMENTS,
    METRICS,
    MODELS,
    PIPELINE_VERSIONS,
    RUNS,
    STEP_METRICS,
)
from headwater.metadata.sql.base import SqlStoreBase


class RunRecords(SqlStoreBase):
    """The runs and executions of `SqlMetadataStore` (see `MetadataStore`)."""

    def create_run(self, run: RunRecord, *, ir: dict[str, Any]) -> None:
        """Record a new run and its version (see `MetadataStore.create_run`).

        An empty `run.pipeline_version` is replaced by the SHA-256 of the canonical IR.

        Raises:
            UserError: A run with this id exists already (resume it with `claim_run`).
            NotFoundError: `run.pipeline_version_id` names no version.
        """
        now = run.created_at or time.time()

        def write(conn: Connection) -> None:
            if conn.execute(select(RUNS.c.run_id).where(RUNS.c.run_id == run.run_id)).first():
                raise UserError(
                    f"run id {run.run_id!r} is taken by an earlier run: choose another id, "
                    "or resume that run"
                )
            version = run.pipeline_version_id
            if version:
                found = conn.execute(
                    select(PIPELINE_VERSIONS.c.pipeline_version_id).where(
                        PIPELINE_VERSIONS.c.pipeline_version_id == version
                    )
                ).first()
                if found is None:
                    raise NotFoundError(f"no pipeline version {version!r}")
            else:
                version = unuploaded_version(conn, run.pipeline, run.pipeline_version, ir, now)
            conn.execute(insert(RUNS).values(**run_row(run, version, now)))

        self._db.transaction(write, write=True)

    def claim_run(
        self,
        run_id: str,
        *,
        engine_host: str,
        engine_pid: int,
        engine_started: str = "",
        queued: bool = False,
        lease_until: float | None = None,
    ) -> RunRecord:
        """Take a run for an engine with one conditional UPDATE (`MetadataStore.claim_run`).

        `UPDATE runs SET state='RUNNING', ... WHERE run_id=? AND state IN (...)` claims the
        run only if it is still claimable when the database applies it: SQLite runs write
        transactions one at a time (`BEGIN IMMEDIATE`), and PostgreSQL re-checks the condition
        on the row a concurrent claim just committed, so exactly one of several engines
        updates one row. The others read who holds it, in the same transaction.

        Raises:
            NotFoundError: No run has this id.
            RunClaimedError: Another engine runs it (the message names it as pid@host), or it
                left the queue (canceled, or taken by another worker).
            UserError: The run already SUCCEEDED.
        """
        values: dict[str, Any] = {
            "state": "RUNNING",
            "finished_at": None,
            "error": None,
            "engine_host": engine_host,
            "engine_pid": engine_pid,
            "engine_started": engine_started,
        }
        # A queue worker's lease starts now; an engine of another kind holds none.
        values["lease_until"] = lease_until
        if queued:
            values["starts"] = RUNS.c.starts + 1
            values["scheduled_at"] = func.coalesce(RUNS.c.scheduled_at, time.time())

        def write(conn: Connection) -> RunRecord:
            claimed = conn.execute(
                update(RUNS)
                .where(
                    RUNS.c.run_id == run_id,
                    RUNS.c.state.in_(("QUEUED",) if queued else _CLAIMABLE),
                )
                .values(**values)
            )
            runs = select_runs(conn, RUNS.c.run_id == run_id)
            if not runs:
                raise NotFoundError(f"no run {run_id!r} in the metadata store {self.url!r}")
            run = runs[0]
            if claimed.rowcount == 1:
                return run
            if run.state == "SUCCEEDED":
                raise UserError(f"run {run_id} already succeeded: there is nothing to resume")
            if run.state not in ACTIVE_RUN_STATES or not run.engine_pid:
                raise RunClaimedError(
                    f"run {run_id} is {run.state}: "
                    + ("it waits in the queue" if run.state == "QUEUED" else "not in the queue")
                )
            raise RunClaimedError(
                f"run {run_id} is already being run by engine {run.engine_pid}@"
                f"{run.engine_host} ({run.state}): wait for it to finish, or stop that engine "
                "and resume again"
            )

        return self._db.transaction(write, write=True)

    def finish_run(
        self,
        run_id: str,
        *,
        state: str,
        outputs: dict[str, Any],
        error: dict[str, Any] | None,
        finished_at: float,
        engine_host: str | None = None,
        engine_pid: int | None = None,
    ) -> None:
        """Set a run's final state, outputs and error (a CANCELING run that did not succeed
        is CANCELED: `MetadataStore.finish_run`); with `engine_host` and `engine_pid`, only
        while that engine holds the run.

        Raises:
            NotFoundError: No run has this id.
        """
        ended: Any = state
        if state != "SUCCEEDED":
            ended = case((RUNS.c.state == "CANCELING", "CANCELED"), else_=state)
        where = [RUNS.c.run_id == run_id]
        if engine_host is not None and engine_pid is not None:
            where += [
                RUNS.c.engine_host == engine_host,
                RUNS.c.engine_pid == engine_pid,
                RUNS.c.state.in_(ACTIVE_RUN_STATES),
            ]

        def write(conn: Connection) -> None:
            done = conn.execute(
                update(RUNS)
                .where(*where)
                .values(state=ended, outputs=outputs, error=error, finished_at=finished_at)
            )
            if done.rowcount == 0 and conn.execute(_RUN_EXISTS, {"run_id": run_id}).first() is None:
                raise NotFoundError(f"no run {run_id!r} in the metadata store {self.url!r}")

        self._db.transaction(write, write=True)

    def get_run(self, run_id: str) -> RunRecord | None:
        """One run with its metrics, or None; a unique prefix of the id also matches.

        Raises:
            NotFoundError: The prefix matches several runs (the message lists some).
        """

        def read(conn: Connection) -> RunRecord | None:
            full = resolve_run_id(conn, run_id)
            if full is None:
                return None
            runs = select_runs(conn, RUNS.c.run_id == full)
            return runs[0] if runs else None

        return self._db.transaction(read)

    def get_pipeline_ir(self, run_id: str) -> dict[str, Any] | None:
        """The IR the run executed, or None for an unknown run (a unique prefix matches)."""

        def read(conn: Connection) -> dict[str, Any] | None:
            full = resolve_run_id(conn, run_id)
            if full is None:
                return None
            query = (
                select(PIPELINE_VERSIONS.c.ir)
                .join(RUNS, RUNS.c.pipeline_version_id == PIPELINE_VERSIONS.c.pipeline_version_id)
                .where(RUNS.c.run_id == full)
            )
            ir = conn.execute(query).scalar()
            return dict(ir) if ir is not None else None

        return self._db.transaction(read)

    def list_runs(
        self,
        *,
        pipeline: str | None = None,
        state: str | None = None,
        limit: int | None = None,
        offset: int = 0,
        text: str | None = None,
        experiment_id: str | None = None,
        recurring_run_id: str | None = None,
        namespaces: list[str] | None = None,
    ) -> list[RunRecord]:
        """Runs, newest first, with their metrics; filtered by pipeline name, state,
        experiment, recurring run and `text` (an id prefix, or part of the pipeline name, the
        run's name, its experiment's name or its state, any case), the first `offset`
        skipped; only those in `namespaces` when given."""
        where: list[ColumnElement[bool]] = []
        if namespaces is not None:
            where.append(RUNS.c.namespace.in_(namespaces))
        if pipeline is not None:
            where.append(PIPELINE_VERSIONS.c.name == pipeline)
        if state is not None:
            where.append(RUNS.c.state == state)
        if experiment_id is not None:
            where.append(RUNS.c.experiment_id == experiment_id)
        if recurring_run_id is not None:
            where.append(RUNS.c.recurring_run_id == recurring_run_id)
        if text:
            # ILIKE on PostgreSQL, lower() LIKE lower() on SQLite: the same on both.
            where.append(
                or_(
                    RUNS.c.run_id.istartswith(text, autoescape=True),
                    PIPELINE_VERSIONS.c.name.icontains(text, autoescape=True),
                    RUNS.c.display_name.icontains(text, autoescape=True),
                    EXPERIMENTS.c.display_name.icontains(text, autoescape=True),
                    RUNS.c.state.icontains(text, autoescape=True),
                )
            )
        return self._db.transaction(
            lambda conn: select_runs(conn, *where, limit=limit, offset=offset)
        )

    def running_runs(self) -> list[RunRecord]:
        """Runs still marked RUNNING or CANCELING, newest first."""
        return self._db.transaction(
            lambda conn: select_runs(conn, RUNS.c.state.in_(ACTIVE_RUN_STATES))
        )

    def delete_run(self, run_id: str) -> list[str]:
        """Delete a run with its executions, events and metrics, and the artifacts only it used.

        The artifacts considered are those this run's executions produced, consumed or
        re-published (a cache hit's OUTPUT event). One goes unless an execution of another
        run produced it or has an event on it; those that stay lose their producer if it was
        here. An input no execution produced (made outside, or by a run deleted earlier) goes
        with the last run that used it, so callers must delete only files they own.

        Returns:
            The URIs of the deleted artifacts, for the caller to delete their files.

        Raises:
            NotFoundError: No run has exactly this id.
        """
        self._runs_seen.discard(run_id)

        def write(conn: Connection) -> list[str]:
            if conn.execute(select(RUNS.c.run_id).where(RUNS.c.run_id == run_id)).first() is None:
                raise NotFoundError(f"no run {run_id!r} in the metadata store {self.url!r}")
            here = select(EXECUTIONS.c.id).where(EXECUTIONS.c.run_id == run_id)
            ids = list(conn.execute(here).scalars())
            touched = scalars(conn, select(EVENTS.c.artifact_id), EVENTS.c.execution_id, ids)
            touched |= scalars(conn, select(ARTIFACTS.c.id), ARTIFACTS.c.producer, ids)
            # EXISTS stops at the first other use: a dataset every run reads is no scan.
            used = exists().where(
                EVENTS.c.artifact_id == ARTIFACTS.c.id,
                EXECUTIONS.c.id == EVENTS.c.execution_id,
                EXECUTIONS.c.run_id != run_id,
            )
            made = exists().where(
                EXECUTIONS.c.id == ARTIFACTS.c.producer, EXECUTIONS.c.run_id != run_id
            )
            # A registered model keeps its artifact: the registry (and a server) points at it.
            registered = exists().where(MODELS.c.uri == ARTIFACTS.c.uri)
            kept = select(ARTIFACTS.c.id).where(or_(used, made, registered))
            doomed = touched - scalars(conn, kept, ARTIFACTS.c.id, touched)
            uris = sorted(scalars(conn, select(ARTIFACTS.c.uri), ARTIFACTS.c.id, doomed))
            # Explicit, in dependency order, so it also holds where foreign keys are off.
            for chunk in chunks(ids):
                conn.execute(delete(EVENTS).where(EVENTS.c.execution_id.in_(chunk)))
                conn.execute(
                    update(EXECUTIONS)
                    .where(EXECUTIONS.c.cached_from.in_(chunk))
                    .values(cached_from=None)
                )
                conn.execute(
                    update(ARTIFACTS).where(ARTIFACTS.c.producer.in_(chunk)).values(producer=None)
                )
                conn.execute(
                    update(MODELS).where(MODELS.c.execution_id.in_(chunk)).values(execution_id=None)
                )
            for chunk in chunks(doomed):
                conn.execute(delete(EVENTS).where(EVENTS.c.artifact_id.in_(chunk)))
                conn.execute(delete(ARTIFACTS).where(ARTIFACTS.c.id.in_(chunk)))
            conn.execute(delete(METRICS).where(METRICS.c.run_id == run_id))
            conn.execute(delete(STEP_METRICS).where(STEP_METRICS.c.run_id == run_id))
            conn.execute(update(MODELS).where(MODELS.c.run_id == run_id).values(run_id=None))
            conn.execute(update(ENDPOINTS).where(ENDPOINTS.c.run_id == run_id).values(run_id=None))
            conn.execute(delete(EXECUTIONS).where(EXECUTIONS.c.run_id == run_id))
            conn.execute(delete(RUNS).where(RUNS.c.run_id == run_id))
            return uris

        return self._db.transaction(write, write=True)

    # -- executions -----------------------------------------------------------------------

    def record_execution(self, execution: ExecutionRecord) -> int:
        """Insert or update (by run id and task name) an execution; return its id.

        Raises:
            NotFoundError: The execution's run is not in the store.
        """
        values = {
            "component": execution.component,
            "parent_dag": execution.parent_dag,
            "iteration": execution.iteration,
            "state": execution.state,
            "inputs": execution.inputs,
            "outputs": execution.outputs,
            "cache_key": execution.cache_key,
            "cached_from": execution.cached_from,
            "started_at": execution.started_at,
            "finished_at": execution.finished_at,
            "log_path": execution.log_path,
            "error": execution.error,
            "attempts": execution.attempts,
            "executor": execution.executor,
            "worker": execution.worker,
            "container": execution.container,
            "sandbox": execution.sandbox,
        }

        def write(conn: Connection) -> int:
            key = {"run_id": execution.run_id, "task": execution.task}
            found = conn.execute(_EXECUTION_ID, key).scalar()
            if found is not None:
                conn.execute(_UPDATE_EXECUTION, {"execution_id": found, **values})
                return int(found)
            known = execution.run_id in self._runs_seen
            if (
                not known
                and conn.execute(_RUN_EXISTS, {"run_id": execution.run_id}).first() is None
            ):
                raise NotFoundError(
                    f"no run {execution.run_id!r} for execution {execution.task!r}: "
                    "create the run first"
                )
            self._runs_seen.add(execution.run_id)
            return int(conn.execute(_INSERT_EXECUTION, {**key, **values}).scalar_one())

        cached_from = f"execution {execution.cached_from} (cached_from)"
        return self._db.transaction(write, write=True, refers_to=cached_from)

    def list_executions(self, run_id: str) -> list[ExecutionRecord]:
        """A run's executions in start order (never started ones last, in record order)."""
        query = (
            select(EXECUTIONS)
            .where(EXECUTIONS.c.run_id == run_id)
            .order_by(EXECUTIONS.c.started_at.is_(None), EXECUTIONS.c.started_at, EXECUTIONS.c.id)
        )
        return self._db.transaction(lambda conn: [execution_record(r) for r in conn.execute(query)])

    def task_counts(self, run_ids: list[str]) -> dict[str, TaskCounts]:
        """`TaskCounts` of the runs that have executions, grouped in the database (the
        `(run_id, task)` unique index finds each run's rows)."""

        def read(conn: Connection) -> dict[str, TaskCounts]:
            found: dict[str, TaskCounts] = {}
            for chunk in chunks(run_ids):
                query = (
                    select(
                        EXECUTIONS.c.run_id,
                        EXECUTIONS.c.state,
                        EXECUTIONS.c.executor,
                        func.count().label("n"),
                    )
                    .where(EXECUTIONS.c.run_id.in_(chunk))
                    .group_by(EXECUTIONS.c.run_id, EXECUTIONS.c.state, EXECUTIONS.c.executor)
                )
                for row in conn.execute(query):
                    counts = found.setdefault(row.run_id, TaskCounts())
                    counts.states[row.state] = counts.states.get(row.state, 0) + row.n
                    if row.executor and row.executor not in counts.executors:
                        counts.executors.append(row.executor)
            for counts in found.values():
                counts.executors.sort()
            return found

        return self._db.transaction(read)

    def get_execution(self, execution_id: int) -> ExecutionRecord | None:
        """One execution by id, or None."""
        query = select(EXECUTIONS).where(EXECUTIONS.c.id == execution_id)
        row = self._db.transaction(lambda conn: conn.execute(query).first())
        return None if row is None else execution_record(row)

    def insert_executions(self, executions: list[ExecutionRecord]) -> list[int]:
        """Insert new executions in one statement; return their ids in order."""
        if not executions:
            return []
        rows = [
            {"run_id": e.run_id, "task": e.task, **{f: getattr(e, f) for f in EXECUTION_FIELDS}}
            for e in executions
        ]
        unseen = {e.run_id for e in executions} - self._runs_seen

        def write(conn: Connection) -> list[int]:
            for run_id in unseen:
                if conn.execute(_RUN_EXISTS, {"run_id": run_id}).first() is None:
                    raise NotFoundError(f"no run {run_id!r} for these executions")
            stmt = insert(EXECUTIONS).returning(EXECUTIONS.c.id, sort_by_parameter_order=True)
            ids = [int(i) for i in conn.execute(stmt, rows).scalars()]
            self._runs_seen.update(unseen)
            return ids

        return self._db.transaction(write, write=True, refers_to="a cached_from execution")


_EXECUTION_ID = select(EXECUTIONS.c.id).where(
    EXECUTIONS.c.run_id == bindparam("run_id"), EXECUTIONS.c.task == bindparam("task")
)
#: Run states a resume may claim.
_CLAIMABLE = ("FAILED", "INTERRUPTED", "CANCELED")
_RUN_EXISTS = select(RUNS.c.run_id).where(RUNS.c.run_id == bindparam("run_id"))
_UPDATE_EXECUTION = (
    update(EXECUTIONS)
    .where(EXECUTIONS.c.id == bindparam("execution_id"))
    .values({name: bindparam(name) for name in EXECUTION_FIELDS})
)
_INSERT_EXECUTION = (
    insert(EXECUTIONS)
    .values({name: bindparam(name) for name in ("run_id", "task", *EXECUTION_FIELDS)})
    .returning(EXECUTIONS.c.id)
)
