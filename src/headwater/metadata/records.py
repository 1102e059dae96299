"""The records the metadata store keeps and returns: plain dataclasses, one per kind of row.

`MetadataStore` (in `base`) takes and gives these; `base` re-exports them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = [
    "ArtifactRecord",
    "EndpointRecord",
    "EventRecord",
    "ExecutionRecord",
    "ExperimentRecord",
    "LineageGraph",
    "ModelRecord",
    "NamespaceRecord",
    "Page",
    "PipelineRecord",
    "Predicate",
    "PrincipalRecord",
    "RecurringRunRecord",
    "RunRecord",
    "StepSeriesRecord",
    "TaskCounts",
    "VersionRecord",
]


@dataclass
class RunRecord:
    """One pipeline run (`RUN_STATES`), from the moment it is accepted.

    `pipeline` is the name its IR gives the pipeline and `pipeline_version` the IR's digest;
    `pipeline_version_id` names the version record, `pipeline_id` the named pipeline that
    version was uploaded to (None for a version no one uploaded) and `version_name` its
    display name. The rest but `metrics` and `experiment` (the experiment's name, read
    only) are columns of the run.
    """

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
    engine_started: str = ""
    pipeline_version_id: str = ""
    pipeline_id: str | None = None
    version_name: str = ""
    display_name: str = ""
    description: str = ""
    experiment_id: str | None = None
    experiment: str = ""
    namespace: str = ""
    storage_state: str = "AVAILABLE"
    recurring_run_id: str | None = None
    scheduled_at: float | None = None
    #: Workers that took it from the queue; 0 for a run that was never queued.
    starts: int = 0
    #: When the lease of the queue worker holding it expires unless renewed (its own
    #: server's `--lease-seconds` after its last renewal); None when none holds it.
    lease_until: float | None = None
    #: Who made it (a principal's name; None when no one was identified).
    created_by: str | None = None


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
    #: The container it ran in (`{"runtime", "image", "digest"}`); None on the host.
    container: dict[str, Any] | None = None
    #: The sandbox it ran in and what it enforced (`headwater.sandbox`); None: none.
    sandbox: dict[str, Any] | None = None


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


@dataclass
class ExperimentRecord:
    """A group of runs, unique by name in its namespace (KFP's Experiment)."""

    experiment_id: str
    display_name: str
    description: str = ""
    namespace: str = ""
    storage_state: str = "AVAILABLE"
    created_at: float = 0.0
    #: Who made it (a principal's name; None when no one was identified).
    created_by: str | None = None


@dataclass
class PipelineRecord:
    """A named pipeline (KFP's Pipeline), whose versions are uploaded under it."""

    pipeline_id: str
    display_name: str
    description: str = ""
    namespace: str = ""
    created_at: float = 0.0
    #: Who made it (a principal's name; None when no one was identified).
    created_by: str | None = None


@dataclass
class VersionRecord:
    """A pipeline version, what runs point to: the IR, the name it gives and its digest.

    `pipeline_id` is the named pipeline it was uploaded to, None when no one uploaded it (a run
    recorded it); `display_name` its name there.
    """

    pipeline_version_id: str
    pipeline_id: str | None
    name: str
    digest: str
    display_name: str = ""
    description: str = ""
    ir: dict[str, Any] = field(default_factory=dict)
    created_at: float = 0.0
    #: Who made it (a principal's name; None when no one was identified).
    created_by: str | None = None


@dataclass
class RecurringRunRecord:
    """Runs of a pipeline version that a trigger makes (KFP's RecurringRun).

    `trigger` is KFP's trigger document, `runtime_config` the runs' `{parameters,
    pipeline_root}`; `next_fire_at` is None past the trigger's end.
    """

    recurring_run_id: str
    display_name: str
    pipeline_version_id: str
    trigger: dict[str, Any]
    runtime_config: dict[str, Any] = field(default_factory=dict)
    description: str = ""
    experiment_id: str | None = None
    namespace: str = ""
    max_concurrency: int = 1
    no_catchup: bool = False
    status: str = "ENABLED"
    next_fire_at: float | None = None
    created_at: float = 0.0
    updated_at: float = 0.0
    #: Who made it (a principal's name; None when no one was identified).
    created_by: str | None = None


@dataclass(frozen=True)
class PrincipalRecord:
    """Who may use a team server (`headwater.access`): a personal token (`kind` "token",
    `token_hash` the SHA-256 of its secret) or a user a trusted proxy names (`kind` "user"),
    with its role and the namespaces it holds."""

    kind: str
    name: str
    role: str
    namespaces: tuple[str, ...] = ()
    token_hash: str | None = None
    created_at: float = 0.0
    created_by: str = ""


@dataclass(frozen=True)
class NamespaceRecord:
    """What a namespace of a team server has of its own: the pipeline root its runs write
    under ("" for the server's root, in a folder of the namespace's) and the name of its
    secret whose keys its sandboxed tasks get as storage credentials ("" for none)."""

    name: str
    pipeline_root: str = ""
    storage_secret: str = ""
    updated_at: float = 0.0
    updated_by: str = ""


@dataclass(frozen=True)
class Predicate:
    """One condition of a list: `column` `op` `value`; `op` is one of EQUALS, NOT_EQUALS,
    GREATER_THAN, GREATER_THAN_EQUALS, LESS_THAN, LESS_THAN_EQUALS, IN or NOT_IN (a list
    value), IS_SUBSTRING."""

    column: str
    op: str
    value: Any


@dataclass(frozen=True)
class Page:
    """Which records of a list: those matching every predicate, ordered by `sort` (then by
    id), `offset` of them skipped, at most `limit`."""

    where: tuple[Predicate, ...] = ()
    sort: str = "created_at"
    descending: bool = True
    offset: int = 0
    limit: int = 20
