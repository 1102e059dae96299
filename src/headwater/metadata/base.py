"""The `MetadataStore` interface and the records it keeps (MLMD's concepts, our own schema).

What is recorded, after ML Metadata (state and event meanings kept, the dependency not):

* a **pipeline** (name, version = digest of its IR, the IR itself);
* a **run** of a pipeline (state, parameters, pipeline root, times, outputs, error);
* an **execution** per executor task of a run (task name, parent DAG path, loop iteration,
  state incl. CACHED and SKIPPED, input/output parameters, cache key, the execution a cache
  hit reused, times, log location, error record);
* an **artifact** per distinct URI (schema title, name, content digest, size, metadata,
  producing execution);
* **events** linking executions and artifacts (INPUT or OUTPUT, with the slot name);
* scalar **metrics** from Metrics artifacts, queryable per run, and **step metrics**: a
  metric over steps (rounds, epochs) logged beside one (`headwater.step_metrics`);
* registered **models**: a name, a version per name (1, 2, ...), the artifact's URI,
  framework, metrics, stage, and the run and execution that produced the artifact;
* **endpoints**: model servers started by `deploy_model` (name, URL, process, the models
  served, and the run and task that deployed them).

To add a backend, subclass `MetadataStore` and implement every abstract method; the engine
only talks to this interface (see `headwater.metadata.sql.SqlMetadataStore`).
"""

from __future__ import annotations

import abc
import collections
import contextlib
from typing import Any, Literal

from headwater.metadata.catalog import CatalogStore

# The records live in `records`; they are imported from here too.
from headwater.metadata.records import (
    ArtifactRecord,
    EndpointRecord,
    EventRecord,
    ExecutionRecord,
    ExperimentRecord,
    LineageGraph,
    ModelRecord,
    NamespaceRecord,
    Page,
    PipelineRecord,
    Predicate,
    PrincipalRecord,
    RecurringRunRecord,
    RunRecord,
    StepSeriesRecord,
    TaskCounts,
    VersionRecord,
)

__all__ = [
    "ACTIVE_RUN_STATES", "ENDED_RUN_STATES", "EXECUTION_STATES", "MODEL_STAGES", "RUN_STATES",
    "SCHEMA_HEAD", "ArtifactRecord", "Direction", "EndpointRecord", "EventRecord",
    "ExecutionRecord", "ExperimentRecord", "LineageGraph", "MetadataStore", "ModelRecord",
    "NamespaceRecord", "Page", "PipelineRecord", "Predicate", "PrincipalRecord",
    "RecurringRunRecord", "RunRecord", "StepSeriesRecord", "TaskCounts", "VersionRecord",
    "model_stage",
]  # fmt: skip

#: Run states: QUEUED until a worker takes it (`headwater server`), RUNNING while an engine
#: holds it, CANCELING while a terminate stops it; then SUCCEEDED, FAILED or CANCELED, or
#: INTERRUPTED when its engine died (resumable).
RUN_STATES = ("QUEUED", "RUNNING", "CANCELING", "SUCCEEDED", "FAILED", "CANCELED", "INTERRUPTED")
#: States in which an engine holds the run.
ACTIVE_RUN_STATES = ("RUNNING", "CANCELING")
#: States no engine changes again (unless the run is resumed or retried).
ENDED_RUN_STATES = ("SUCCEEDED", "FAILED", "CANCELED", "INTERRUPTED")
#: Execution states (MLMD's NEW/RUNNING/COMPLETE/FAILED/CACHED/CANCELED, plus SKIPPED).
EXECUTION_STATES = ("RUNNING", "SUCCEEDED", "FAILED", "CACHED", "SKIPPED", "CANCELED")

#: Model stages. At most one version of a name is in production; staging holds any number.
MODEL_STAGES = ("none", "staging", "production")


def model_stage(stage: str) -> str:
    """`stage` lower-cased, checked to be one of `MODEL_STAGES`.

    Raises:
        InvalidArgumentError: It is not.
    """
    from headwater.errors import InvalidArgumentError

    lowered = str(stage).strip().lower()
    if lowered not in MODEL_STAGES:
        raise InvalidArgumentError(
            f"model stage {stage!r} does not exist (stages: {', '.join(MODEL_STAGES)})"
        )
    return lowered


Direction = Literal["upstream", "downstream", "both"]

#: The newest schema revision (`headwater.metadata.migrations`; a test checks it is the head
#: of `versions/`). Here, without SQLAlchemy, so that a store can be checked before it opens.
SCHEMA_HEAD = "0012_sandboxes"


class MetadataStore(CatalogStore):
    """Where runs, executions, artifacts, events and metrics are recorded and queried, with
    the experiments, named pipelines and recurring runs that file them (`CatalogStore`)."""

    # -- runs -----------------------------------------------------------------------------

    @abc.abstractmethod
    def create_run(self, run: RunRecord, *, ir: dict[str, Any]) -> None:
        """Record a new run in `run.state` (RUNNING if empty) with its version: the one
        `run.pipeline_version_id` names, else the unuploaded version of `ir` under
        `run.pipeline`'s name (found by digest, or added).

        Raises:
            UserError: A run with this id exists already.
            NotFoundError: `run.pipeline_version_id` names no version.
        """

    @abc.abstractmethod
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
        """Set a run's final state, outputs and error. A run being canceled (CANCELING) that
        ends FAILED or INTERRUPTED is CANCELED; one that ends SUCCEEDED stays so.

        With `engine_host` and `engine_pid`, only while that engine holds the run, RUNNING or
        CANCELING: an engine whose run another took over writes nothing."""

    @abc.abstractmethod
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
        """Take a run for an engine, atomically: a FAILED, CANCELED or INTERRUPTED one (to
        resume it), or with `queued` a QUEUED one (a worker taking it from the queue; its
        `starts` goes up by one and `scheduled_at` is set the first time). A queue worker's
        lease runs to `lease_until` (see `renew_lease`).

        The run becomes RUNNING under `engine_host`/`engine_pid` only if it is still in such
        a state when the store applies the change (a conditional update, not a read then a
        write), so of several engines claiming one run exactly one gets it.

        Returns:
            The run as claimed (RUNNING, no finish time, no error).

        Raises:
            NotFoundError: No run has this id.
            RunClaimedError: The run is RUNNING under another engine (named as pid@host).
            UserError: The run already SUCCEEDED.
        """

    @abc.abstractmethod
    def get_run(self, run_id: str) -> RunRecord | None:
        """One run with its metrics, or None. A unique prefix of the id also matches."""

    @abc.abstractmethod
    def get_pipeline_ir(self, run_id: str) -> dict[str, Any] | None:
        """The IR the run executed (for resume)."""

    @abc.abstractmethod
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
        """Runs, newest first, with their metrics; `offset` skips that many (paging); only
        those in `namespaces` when given.

        `text`, when given, keeps the runs whose id starts with it or whose pipeline name,
        run name or stored state contains it, ignoring case (LIKE wildcards taken literally).
        """

    @abc.abstractmethod
    def delete_run(self, run_id: str) -> list[str]:
        """Delete a run, its executions and events, and the artifacts no other run uses.

        Returns:
            The URIs of the deleted artifacts (the caller deletes their files).
        """

    @abc.abstractmethod
    def running_runs(self) -> list[RunRecord]:
        """Runs still marked RUNNING or CANCELING (to find those whose engine died)."""

    @abc.abstractmethod
    def mark_interrupted(
        self,
        run_id: str,
        *,
        finished_at: float,
        engine_host: str | None = None,
        engine_pid: int | None = None,
        lapsed_before: float | None = None,
    ) -> None:
        """Mark a RUNNING run INTERRUPTED and its RUNNING executions FAILED.

        With `engine_host` and `engine_pid`, only while that engine still holds the run: an
        engine found dead must not take the run from one that claimed it since. With
        `lapsed_before`, only while its lease ends before that time: a lease renewed since
        it was seen to lapse keeps the run.
        """

    @abc.abstractmethod
    def transition_run(
        self, run_id: str, *, source: tuple[str, ...], to: str, **values: Any
    ) -> bool:
        """Move the run to state `to` (and set `values`: `finished_at`, `error`, `starts`,
        `engine_pid`...) only while its state is one of `source`, atomically; True if it moved.
        The queue's compare-and-set: of two writers racing, one wins."""

    @abc.abstractmethod
    def renew_lease(
        self, run_id: str, *, engine_host: str, engine_pid: int, lease_until: float
    ) -> str | None:
        """Renew the lease of the queue worker holding a run to `lease_until`; the run's
        state (RUNNING, CANCELING, or how that worker ended it), or None when that worker no
        longer holds it."""

    @abc.abstractmethod
    def update_run(self, run_id: str, **values: Any) -> None:
        """Set attributes of a run that are not its state (`storage_state`, `display_name`,
        `experiment_id`...).

        Raises:
            NotFoundError: No run has this id.
        """

    @abc.abstractmethod
    def queue_runs(self, *, states: tuple[str, ...], limit: int | None = None) -> list[RunRecord]:
        """Runs in `states` that a queue took or holds (QUEUED, or taken from the queue:
        `starts` above 0), oldest first."""

    @abc.abstractmethod
    def page(self, kind: str, page: Page) -> tuple[list[Any], int]:
        """One page of `kind` ("runs", "experiments", "pipelines", "versions" or
        "recurring_runs"): the records matching `page.where` (on their columns; runs also on
        `pipeline`, the IR's name), in its order, and how many match in all."""

    # -- executions, artifacts, events ----------------------------------------------------

    @abc.abstractmethod
    def record_execution(self, execution: ExecutionRecord) -> int:
        """Insert or update (by run_id + task) an execution; return its id."""

    def insert_executions(self, executions: list[ExecutionRecord]) -> list[int]:
        """Insert executions known to be new (none shares run_id + task with a recorded one).

        Returns their ids, in order. Backends may do it in one statement.
        """
        return [self.record_execution(e) for e in executions]

    @abc.abstractmethod
    def list_executions(self, run_id: str) -> list[ExecutionRecord]:
        """A run's executions in start order."""

    def task_counts(self, run_ids: list[str]) -> dict[str, TaskCounts]:
        """`TaskCounts` of each run in `run_ids` that has executions (for a page of runs);
        backends may answer in one query."""
        found: dict[str, TaskCounts] = {}
        for run_id in run_ids:
            executions = self.list_executions(run_id)
            if executions:
                states = collections.Counter(e.state for e in executions)
                executors = sorted({e.executor for e in executions if e.executor})
                found[run_id] = TaskCounts(dict(states), executors)
        return found

    @abc.abstractmethod
    def get_execution(self, execution_id: int) -> ExecutionRecord | None:
        """One execution by id."""

    @abc.abstractmethod
    def record_artifact(self, artifact: ArtifactRecord) -> int:
        """Insert an artifact, or update the one with the same URI; return its id."""

    @abc.abstractmethod
    def get_artifact(self, ref: int | str) -> ArtifactRecord | None:
        """An artifact by id or by URI."""

    @abc.abstractmethod
    def record_event(self, event: EventRecord) -> None:
        """Link an execution and an artifact (idempotent)."""

    def record_events(self, events: list[EventRecord]) -> None:
        """Record several events (idempotent); backends may do it in one statement."""
        for event in events:
            self.record_event(event)

    def artifacts_of_many(
        self, execution_ids: list[int]
    ) -> dict[int, list[tuple[EventRecord, ArtifactRecord]]]:
        """`artifacts_of` for several executions; backends may answer in one query."""
        return {i: self.artifacts_of(i) for i in execution_ids}

    @abc.abstractmethod
    def artifacts_of(self, execution_id: int) -> list[tuple[EventRecord, ArtifactRecord]]:
        """The artifacts an execution consumed and produced, with their events."""

    @abc.abstractmethod
    def record_metrics(
        self, run_id: str, execution_id: int, artifact_id: int, metrics: dict[str, float]
    ) -> None:
        """Store scalar metrics logged to a Metrics artifact."""

    @abc.abstractmethod
    def record_step_metrics(self, series: list[StepSeriesRecord]) -> None:
        """Store metrics over steps, replacing the series of the same name that the same
        execution logged beside the same artifact before."""

    @abc.abstractmethod
    def list_step_metrics(self, run_ids: list[str]) -> list[StepSeriesRecord]:
        """The series the runs' executions logged, by run (in the order given), execution
        and name."""

    # -- caching and lineage ------------------------------------------------------------

    @abc.abstractmethod
    def find_cached(self, cache_key: str) -> ExecutionRecord | None:
        """The newest SUCCEEDED (not CACHED) execution with this cache key, or None."""

    def cached_outputs(
        self, cache_key: str
    ) -> tuple[ExecutionRecord, list[tuple[EventRecord, ArtifactRecord]]] | None:
        """`find_cached` and that execution's `artifacts_of`, in one call (a cache lookup)."""
        found = self.find_cached(cache_key)
        if found is None or found.id is None:
            return None
        return found, self.artifacts_of(found.id)

    @abc.abstractmethod
    def clear_cache(self) -> int:
        """Forget every cache key (executions stay); return how many were cleared."""

    @abc.abstractmethod
    def lineage(
        self, ref: int | str, *, direction: Direction = "both", depth: int = 10
    ) -> LineageGraph:
        """The graph around an artifact (id or URI) or execution ("e:<id>"), `depth` hops away.

        Upstream of an artifact: its producer execution, that execution's input artifacts
        and parameters, their producers, ... and the runs the executions belong to.
        """

    # -- model registry -------------------------------------------------------------------

    @abc.abstractmethod
    def register_model(self, model: ModelRecord) -> tuple[ModelRecord, bool]:
        """Register `model.uri` as the next version of `model.name` (its `version` ignored).

        The version is the name's highest plus one, assigned atomically: concurrent
        registrations of one name get distinct versions. Registering a URI already
        registered under the name registers nothing and returns that version (a retried
        task does not make a second one). A model registered in `production` demotes the
        name's production version to `none`. With `run_id` and no `execution_id`, the run's
        execution that output the artifact is filled in once it is recorded.

        Returns:
            The registered (or already registered) model, and True if it is new.

        Raises:
            NotFoundError: `model.run_id` or `model.execution_id` is not in the store.
            InvalidArgumentError: The stage is not one of `MODEL_STAGES`.
        """

    @abc.abstractmethod
    def list_models(self, *, name: str | None = None) -> list[ModelRecord]:
        """Registered models by name, then newest version first; only `name`'s if given."""

    @abc.abstractmethod
    def get_model(self, name: str, version: int | None = None) -> ModelRecord | None:
        """One version of a model (the newest if `version` is None), or None."""

    @abc.abstractmethod
    def promote_model(
        self, name: str, version: int, stage: str
    ) -> tuple[ModelRecord, list[ModelRecord]]:
        """Move a version to `stage`; to `production` demotes the name's production version
        to `none` in the same transaction.

        Returns:
            The model as promoted, and the versions it demoted (as they are now).

        Raises:
            NotFoundError: No such name, or no such version of it (the message lists them).
            InvalidArgumentError: The stage is not one of `MODEL_STAGES`.
        """

    # -- endpoints ------------------------------------------------------------------------

    @abc.abstractmethod
    def save_endpoint(self, endpoint: EndpointRecord) -> EndpointRecord:
        """Record `endpoint`, replacing the record of that name (keeping its `created_at`).

        Raises:
            NotFoundError: `endpoint.run_id` is not in the store.
        """

    @abc.abstractmethod
    def list_endpoints(self) -> list[EndpointRecord]:
        """Every recorded endpoint, by name."""

    @abc.abstractmethod
    def get_endpoint(self, name: str) -> EndpointRecord | None:
        """The endpoint recorded under `name`, or None."""

    def batch(self) -> contextlib.AbstractContextManager[None]:
        """A context in which this thread's writes share one transaction (default: none)."""
        return contextlib.nullcontext()

    @abc.abstractmethod
    def close(self) -> None:
        """Release connections."""
