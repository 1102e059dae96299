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
from dataclasses import dataclass, field
from typing import Any, Literal

#: Run states. RUNNING until the engine finishes; INTERRUPTED when its engine died.
RUN_STATES = ("RUNNING", "SUCCEEDED", "FAILED", "INTERRUPTED")
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
SCHEMA_HEAD = "0007_kfp_server"


@dataclass
class RunRecord:
    """One pipeline run."""

    run_id: str
    pipeline: str
    pipeline_version: str
    state: str
    parameters: dict[str, Any] = field(default_factory=dict)
    pipeline_root: str = ""
    created_at: float = 0.0
    finished_at: float | None = None
    outputs: dict[str, Any] = field(default_factory=dict)
    error: dict[str, Any] | None = None
    engine_host: str = ""
    engine_pid: int = 0
    metrics: dict[str, float] = field(default_factory=dict)


@dataclass
class ExecutionRecord:
    """One executor task of one run. `id` is assigned by the store."""

    run_id: str
    task: str
    state: str
    id: int | None = None
    component: str = ""
    parent_dag: str = ""
    iteration: str = ""
    inputs: dict[str, Any] = field(default_factory=dict)
    outputs: dict[str, Any] = field(default_factory=dict)
    cache_key: str = ""
    cached_from: int | None = None
    started_at: float | None = None
    finished_at: float | None = None
    log_path: str = ""
    error: dict[str, Any] | None = None
    attempts: int = 0
    #: Which executor ran it ("local", "dask") and which worker; None when it did not run.
    executor: str | None = None
    worker: str | None = None


@dataclass
class TaskCounts:
    """How many of a run's executions are in each state, and the executors that ran them."""

    states: dict[str, int] = field(default_factory=dict)
    #: The distinct executors named by its executions ("dask", "local"), sorted.
    executors: list[str] = field(default_factory=list)


@dataclass
class ArtifactRecord:
    """One artifact, identified by its URI. `id` is assigned by the store."""

    uri: str
    schema_title: str = "system.Artifact"
    name: str = ""
    id: int | None = None
    digest: str | None = None
    size: int | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    producer: int | None = None  # execution id
    created_at: float = 0.0
    #: What the artifact looked like (`ArtifactStore.signature`) when `digest` was taken;
    #: the cache trusts `digest` only while the signature is unchanged.
    signature: str | None = None


@dataclass
class EventRecord:
    """An execution consumed (INPUT) or produced (OUTPUT) an artifact through a named slot."""

    execution_id: int
    artifact_id: int
    kind: Literal["INPUT", "OUTPUT"]
    slot: str
    index: int = 0


@dataclass
class StepSeriesRecord:
    """A metric over steps that an execution logged beside a Metrics artifact.

    `points` are `(step, value)` in step order (a value that was not a finite number is
    None), at most `step_metrics.MAX_POINTS`; `logged` is how many were logged.
    """

    run_id: str
    execution_id: int
    artifact_id: int
    name: str
    points: list[tuple[int, float | None]] = field(default_factory=list)
    logged: int = 0


@dataclass
class ModelRecord:
    """One registered version of a named model. `id` and `version` are assigned by the store.

    `run_id` and `execution_id` name where the artifact at `uri` came from: the run that
    registered it and that run's execution with an OUTPUT event to the artifact (None when
    registered outside a run, or when that run was deleted).
    """

    name: str
    uri: str
    version: int = 0
    framework: str = ""
    metrics: dict[str, Any] = field(default_factory=dict)
    stage: str = "none"
    run_id: str | None = None
    execution_id: int | None = None
    id: int | None = None
    created_at: float = 0.0
    stage_changed_at: float = 0.0


@dataclass
class EndpointRecord:
    """A model server started by `deploy_model`, by endpoint name (one server per name).

    `host` is the machine the server process runs on and `pid` its process id there, with
    `started` (the process's start time, as the OS counts it) telling a live server from a
    later process that reused the id. `models` lists what it serves
    (`{"name", "version", "spec", "registered", "uri", "framework"}` each), `config` how it
    was started (bind address, port, workers, batching). `state` is "running" or "stopped"
    as last recorded; whether the process still lives is for the reader to check.
    """

    name: str
    url: str
    host: str
    pid: int
    started: str = ""
    models: list[dict[str, Any]] = field(default_factory=list)
    config: dict[str, Any] = field(default_factory=dict)
    state: str = "running"
    log_path: str = ""
    run_id: str | None = None
    task: str | None = None
    created_at: float = 0.0
    updated_at: float = 0.0


@dataclass
class LineageGraph:
    """Nodes (`{"id": "a:<n>"|"e:<n>"|"r:<id>", "kind": "artifact"|"execution"|"run", ...}`)
    and edges (`{"from": id, "to": id, "kind": "INPUT"|"OUTPUT"|"RUN", "slot": str}`)."""

    nodes: list[dict[str, Any]] = field(default_factory=list)
    edges: list[dict[str, Any]] = field(default_factory=list)


class MetadataStore(abc.ABC):
    """Where runs, executions, artifacts, events and metrics are recorded and queried."""

    # -- runs -----------------------------------------------------------------------------

    @abc.abstractmethod
    def create_run(self, run: RunRecord, *, ir: dict[str, Any]) -> None:
        """Record a new run (state RUNNING) and its pipeline version (upserted by digest)."""

    @abc.abstractmethod
    def finish_run(
        self,
        run_id: str,
        *,
        state: str,
        outputs: dict[str, Any],
        error: dict[str, Any] | None,
        finished_at: float,
    ) -> None:
        """Set a run's final state, outputs and error."""

    @abc.abstractmethod
    def claim_run(self, run_id: str, *, engine_host: str, engine_pid: int) -> RunRecord:
        """Take a FAILED or INTERRUPTED run for a new engine (to resume it), atomically.

        The run becomes RUNNING under `engine_host`/`engine_pid` only if it is still FAILED or
        INTERRUPTED when the store applies the change (a conditional update, not a read then
        a write), so of several engines claiming one run exactly one gets it.

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
    ) -> list[RunRecord]:
        """Runs, newest first, with their metrics; `offset` skips that many (paging).

        `text`, when given, keeps the runs whose id starts with it or whose pipeline name or
        stored state contains it, ignoring case; LIKE wildcards in it are taken literally.
        """

    @abc.abstractmethod
    def delete_run(self, run_id: str) -> list[str]:
        """Delete a run, its executions and events, and the artifacts no other run uses.

        Returns:
            The URIs of the deleted artifacts (the caller deletes their files).
        """

    @abc.abstractmethod
    def running_runs(self) -> list[RunRecord]:
        """Runs still marked RUNNING (to find those whose engine died)."""

    @abc.abstractmethod
    def mark_interrupted(
        self,
        run_id: str,
        *,
        finished_at: float,
        engine_host: str | None = None,
        engine_pid: int | None = None,
    ) -> None:
        """Mark a RUNNING run INTERRUPTED and its RUNNING executions FAILED.

        With `engine_host` and `engine_pid`, only while that engine still holds the run: an
        engine found dead must not take the run from one that claimed it since.
        """

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
