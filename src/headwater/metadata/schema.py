"""The metadata tables as SQLAlchemy Core `Table`s; `migrations/` creates exactly these.

Portable types only (JSON, VARCHAR, double-precision epoch seconds) so that SQLite and
PostgreSQL run the same schema. Constraint and index names come from `NAMING`, so that a
migration and the tables agree on every name (checked by a test with alembic's
`compare_metadata`). Change a table only together with a new revision in
`migrations/versions/`.

Core, not the ORM: the store issues Core statements only, and `sqlalchemy.orm` would add
tens of milliseconds to every command that opens the store.
"""

from __future__ import annotations

from sqlalchemy import (
    JSON,
    BigInteger,
    Column,
    Double,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    UniqueConstraint,
)

NAMING = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
}

#: Every metadata table, with the naming convention.
METADATA = MetaData(naming_convention=NAMING)

# SQL NULL (not the JSON text 'null') when a Python None is stored.
Json = JSON(none_as_null=True)

#: A pipeline version: its name, the digest of its IR, and the IR itself.
PIPELINES = Table(
    "pipelines",
    METADATA,
    Column("id", Integer, primary_key=True),
    Column("name", String, nullable=False),
    Column("version", String, nullable=False),
    Column("ir", Json, nullable=False),
    Column("created_at", Double, nullable=False),
    UniqueConstraint("name", "version"),
)

#: One run of a pipeline version.
RUNS = Table(
    "runs",
    METADATA,
    Column("run_id", String, primary_key=True),
    Column("pipeline_id", Integer, ForeignKey("pipelines.id"), nullable=False, index=True),
    Column("state", String, nullable=False, index=True),
    Column("parameters", Json, nullable=False),
    Column("pipeline_root", String, nullable=False),
    Column("created_at", Double, nullable=False, index=True),
    Column("finished_at", Double),
    Column("outputs", Json, nullable=False),
    Column("error", Json),
    Column("engine_host", String, nullable=False),
    Column("engine_pid", Integer, nullable=False),
)

#: One executor task of a run (unique by run and task name).
EXECUTIONS = Table(
    "executions",
    METADATA,
    Column("id", Integer, primary_key=True),
    Column("run_id", String, ForeignKey("runs.run_id", ondelete="CASCADE"), nullable=False),
    Column("task", String, nullable=False),
    Column("component", String, nullable=False),
    Column("parent_dag", String, nullable=False),
    Column("iteration", String, nullable=False),
    Column("state", String, nullable=False),
    Column("inputs", Json, nullable=False),
    Column("outputs", Json, nullable=False),
    Column("cache_key", String, nullable=False, index=True),
    # Indexed so that deleting the original execution (SET NULL) does not scan the table.
    Column("cached_from", Integer, ForeignKey("executions.id", ondelete="SET NULL"), index=True),
    Column("started_at", Double),
    Column("finished_at", Double),
    Column("log_path", String, nullable=False),
    Column("error", Json),
    Column("attempts", Integer, nullable=False),
    # Which executor ran the task and which of its workers (NULL: cached, or never ran).
    Column("executor", String),
    Column("worker", String),
    UniqueConstraint("run_id", "task"),
)

#: One artifact, identified by its URI.
ARTIFACTS = Table(
    "artifacts",
    METADATA,
    Column("id", Integer, primary_key=True),
    Column("uri", String, nullable=False, unique=True),
    Column("schema_title", String, nullable=False),
    Column("name", String, nullable=False),
    Column("digest", String, index=True),
    Column("size", BigInteger),
    # The stat signature the digest was taken with: the digest holds while it matches.
    Column("signature", String),
    Column("metadata", Json, nullable=False),
    Column("producer", Integer, ForeignKey("executions.id", ondelete="SET NULL"), index=True),
    Column("created_at", Double, nullable=False),
)

#: An execution consumed (INPUT) or produced (OUTPUT) an artifact through a slot.
EVENTS = Table(
    "events",
    METADATA,
    Column("id", Integer, primary_key=True),
    Column(
        "execution_id",
        Integer,
        ForeignKey("executions.id", ondelete="CASCADE"),
        nullable=False,
    ),
    Column("artifact_id", Integer, ForeignKey("artifacts.id", ondelete="CASCADE"), nullable=False),
    Column("kind", String, nullable=False),
    Column("slot", String, nullable=False),
    Column("index", Integer, nullable=False),
    UniqueConstraint("execution_id", "artifact_id", "kind", "slot", "index"),
    # The two lineage hops: artifact -> executions and execution -> artifacts.
    Index("ix_events_artifact", "artifact_id", "kind", "execution_id"),
    Index("ix_events_execution", "execution_id", "kind", "artifact_id"),
)

#: A scalar logged to a Metrics artifact. NaN is stored as NULL (SQLite cannot keep it).
METRICS = Table(
    "metrics",
    METADATA,
    Column("id", Integer, primary_key=True),
    Column(
        "run_id",
        String,
        ForeignKey("runs.run_id", ondelete="CASCADE"),
        nullable=False,
        index=True,
    ),
    Column("execution_id", Integer, nullable=False),
    Column("artifact_id", Integer, nullable=False),
    Column("name", String, nullable=False),
    Column("value", Double),
)

#: A metric over steps (rounds, epochs) logged beside a Metrics artifact (ADR 45): one row
#: per series, its `[step, value]` points as one JSON array cut to at most
#: `step_metrics.MAX_POINTS` (`logged` says how many there were); a NaN value is null.
STEP_METRICS = Table(
    "step_metrics",
    METADATA,
    Column("id", Integer, primary_key=True),
    Column(
        "run_id",
        String,
        ForeignKey("runs.run_id", ondelete="CASCADE"),
        nullable=False,
        index=True,
    ),
    Column("execution_id", Integer, nullable=False),
    Column("artifact_id", Integer, nullable=False),
    Column("name", String, nullable=False),
    Column("points", Json, nullable=False),
    Column("logged", Integer, nullable=False),
)

#: A registered model version: a name, its version (1, 2, ... per name), the artifact URI, and
#: the run and execution that produced it. Deleting the run keeps the model, without them.
MODELS = Table(
    "models",
    METADATA,
    Column("id", Integer, primary_key=True),
    Column("name", String, nullable=False),
    Column("version", Integer, nullable=False),
    Column("uri", String, nullable=False, index=True),
    Column("framework", String, nullable=False),
    Column("metrics", Json, nullable=False),
    Column("stage", String, nullable=False),
    Column("run_id", String, ForeignKey("runs.run_id", ondelete="SET NULL"), index=True),
    Column("execution_id", Integer, ForeignKey("executions.id", ondelete="SET NULL"), index=True),
    Column("created_at", Double, nullable=False),
    Column("stage_changed_at", Double, nullable=False),
    UniqueConstraint("name", "version"),
)

#: A model server started by `deploy_model`: one row per endpoint name, replaced on redeploy.
#: Deleting the run that deployed it keeps the row (the server is still running).
ENDPOINTS = Table(
    "endpoints",
    METADATA,
    Column("name", String, primary_key=True),
    Column("url", String, nullable=False),
    Column("host", String, nullable=False),
    Column("pid", Integer, nullable=False),
    Column("started", String, nullable=False),
    Column("models", Json, nullable=False),
    Column("config", Json, nullable=False),
    Column("state", String, nullable=False),
    Column("log_path", String, nullable=False),
    Column("run_id", String, ForeignKey("runs.run_id", ondelete="SET NULL"), index=True),
    Column("task", String),
    Column("created_at", Double, nullable=False),
    Column("updated_at", Double, nullable=False),
)

#: `headwater server`: a KFP experiment (runs are grouped under one).
KFP_EXPERIMENTS = Table(
    "kfp_experiments",
    METADATA,
    Column("experiment_id", String, primary_key=True),
    Column("display_name", String, nullable=False),
    Column("description", String, nullable=False),
    Column("namespace", String, nullable=False),
    Column("storage_state", String, nullable=False),
    Column("created_at", Double, nullable=False),
    UniqueConstraint("namespace", "display_name"),
)

#: `headwater server`: a KFP pipeline (a name; its specs are its versions).
KFP_PIPELINES = Table(
    "kfp_pipelines",
    METADATA,
    Column("pipeline_id", String, primary_key=True),
    Column("display_name", String, nullable=False),
    Column("description", String, nullable=False),
    Column("namespace", String, nullable=False),
    Column("created_at", Double, nullable=False),
    UniqueConstraint("namespace", "display_name"),
)

#: `headwater server`: one version of a KFP pipeline, with its spec exactly as uploaded.
KFP_PIPELINE_VERSIONS = Table(
    "kfp_pipeline_versions",
    METADATA,
    Column("pipeline_version_id", String, primary_key=True),
    Column(
        "pipeline_id",
        String,
        ForeignKey("kfp_pipelines.pipeline_id", ondelete="CASCADE"),
        nullable=False,
        index=True,
    ),
    Column("display_name", String, nullable=False),
    Column("description", String, nullable=False),
    Column("pipeline_spec", Json, nullable=False),
    Column("created_at", Double, nullable=False),
    UniqueConstraint("pipeline_id", "display_name"),
)

#: `headwater server`: a run submitted through the KFP API, and the server's run queue.
#: `state` is the KFP RuntimeState: PENDING (queued), RUNNING (a worker process holds it:
#: `worker_pid` on `worker_host`), CANCELING, then SUCCEEDED, FAILED or CANCELED. The
#: Headwater run of the same `run_id` exists once a worker has started it.
KFP_RUNS = Table(
    "kfp_runs",
    METADATA,
    Column("run_id", String, primary_key=True),
    Column("experiment_id", String, nullable=False, index=True),
    Column("namespace", String, nullable=False, index=True),
    Column("display_name", String, nullable=False),
    Column("description", String, nullable=False),
    Column("pipeline_spec", Json),
    Column("pipeline_id", String),
    Column("pipeline_version_id", String),
    Column("runtime_config", Json, nullable=False),
    Column("storage_state", String, nullable=False),
    Column("state", String, nullable=False, index=True),
    Column("error", String),
    Column("created_at", Double, nullable=False, index=True),
    Column("scheduled_at", Double),
    Column("finished_at", Double),
    Column("worker_host", String),
    Column("worker_pid", Integer),
    # Worker starts that ended without a final state (a crashed worker): bounded retries.
    Column("starts", Integer, nullable=False),
    # The recurring run that made it (no foreign key: deleting that keeps its runs).
    Column("recurring_run_id", String, index=True),
)

#: `headwater server`: a KFP recurring run, whose runs the server's scheduler makes.
#: `next_fire_at` is the next time it fires (NULL: past its end); `status` ENABLED/DISABLED.
KFP_RECURRING_RUNS = Table(
    "kfp_recurring_runs",
    METADATA,
    Column("recurring_run_id", String, primary_key=True),
    Column("experiment_id", String, nullable=False, index=True),
    Column("namespace", String, nullable=False, index=True),
    Column("display_name", String, nullable=False),
    Column("description", String, nullable=False),
    Column("pipeline_spec", Json),
    Column("pipeline_id", String),
    Column("pipeline_version_id", String),
    Column("runtime_config", Json, nullable=False),
    Column("trigger", Json, nullable=False),
    Column("max_concurrency", Integer, nullable=False),
    Column("no_catchup", Integer, nullable=False),
    Column("status", String, nullable=False),
    Column("next_fire_at", Double),
    Column("created_at", Double, nullable=False),
    Column("updated_at", Double, nullable=False),
)
