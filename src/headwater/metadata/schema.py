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
    text,
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

#: A named pipeline, as KFP's API knows one (`upload_pipeline`): a name in a namespace, whose
#: versions are `PIPELINE_VERSIONS` rows.
PIPELINES = Table(
    "pipelines",
    METADATA,
    Column("pipeline_id", String, primary_key=True),
    Column("display_name", String, nullable=False),
    Column("description", String, nullable=False),
    Column("namespace", String, nullable=False),
    Column("created_at", Double, nullable=False),
    Column("created_by", String),
    UniqueConstraint("namespace", "display_name"),
)

#: A pipeline version, the record every run points to: the IR (with its platform spec, if
#: any), the name the IR gives the pipeline and the IR's digest. A version uploaded through
#: KFP's API belongs to a named pipeline (`pipeline_id`) and has its own display name; one
#: that a run recorded without an upload (`headwater run`, an inline spec) has neither and is
#: shared by every run of the same IR under the same name.
PIPELINE_VERSIONS = Table(
    "pipeline_versions",
    METADATA,
    Column("pipeline_version_id", String, primary_key=True),
    Column("pipeline_id", String, ForeignKey("pipelines.pipeline_id"), index=True),
    Column("name", String, nullable=False),
    Column("digest", String, nullable=False),
    Column("display_name", String, nullable=False),
    Column("description", String, nullable=False),
    Column("ir", Json, nullable=False),
    Column("created_at", Double, nullable=False),
    Column("created_by", String),
    UniqueConstraint("pipeline_id", "display_name"),
    # One unuploaded version per IR and name: two engines that record a new IR at once
    # meet here, and the loser's retry finds the winner's (`queries.unuploaded_version`).
    Index(
        "uq_pipeline_versions_unuploaded",
        "name",
        "digest",
        unique=True,
        sqlite_where=text("pipeline_id IS NULL"),
        postgresql_where=text("pipeline_id IS NULL"),
    ),
)

#: A group of runs (KFP's Experiment), unique by name in its namespace.
EXPERIMENTS = Table(
    "experiments",
    METADATA,
    Column("experiment_id", String, primary_key=True),
    Column("display_name", String, nullable=False),
    Column("description", String, nullable=False),
    Column("namespace", String, nullable=False),
    Column("storage_state", String, nullable=False),
    Column("created_at", Double, nullable=False),
    Column("created_by", String),
    UniqueConstraint("namespace", "display_name"),
)

#: One run of a pipeline version, from the moment it is accepted (`RUN_STATES` in `base`):
#: QUEUED until a worker claims it (`headwater server`), RUNNING while an engine holds it
#: (`engine_pid` on `engine_host`, started at `engine_started`), CANCELING while a terminate
#: stops it, then SUCCEEDED, FAILED, CANCELED, or INTERRUPTED when its engine died. What KFP's
#: API adds (name, experiment, namespace, archive state, the recurring run that made it, when
#: a worker first took it, and how many workers took it) lives here too.
RUNS = Table(
    "runs",
    METADATA,
    Column("run_id", String, primary_key=True),
    Column(
        "pipeline_version_id",
        String,
        ForeignKey("pipeline_versions.pipeline_version_id"),
        nullable=False,
        index=True,
    ),
    Column("state", String, nullable=False, index=True),
    Column("parameters", Json, nullable=False),
    Column("pipeline_root", String, nullable=False),
    Column("created_at", Double, nullable=False, index=True),
    Column("finished_at", Double),
    Column("outputs", Json, nullable=False),
    Column("error", Json),
    Column("engine_host", String, nullable=False),
    Column("engine_pid", Integer, nullable=False),
    # The engine process's start time (`processes.process_start`): a reused pid is not it.
    Column("engine_started", String, nullable=False),
    Column("display_name", String, nullable=False),
    Column("description", String, nullable=False),
    Column(
        "experiment_id",
        String,
        ForeignKey("experiments.experiment_id", ondelete="SET NULL"),
        index=True,
    ),
    Column("namespace", String, nullable=False, index=True),
    Column("storage_state", String, nullable=False),
    # The recurring run that made it (no foreign key: deleting that keeps its runs).
    Column("recurring_run_id", String, index=True),
    Column("scheduled_at", Double),
    # Workers that took it from the queue (0: never queued, as `headwater run`'s runs).
    Column("starts", Integer, nullable=False),
    # When the lease of the queue worker holding it expires unless renewed; past it, another
    # server may take the run over (NULL: no queue worker holds it).
    Column("lease_until", Double),
    # Who made it: a token's or a proxy user's name (`headwater server`); NULL when no one
    # was identified (`headwater run`, a server without principals).
    Column("created_by", String),
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
    # The container it ran in: {"runtime", "image", "digest"} (NULL: it ran on the host).
    Column("container", Json),
    # The sandbox it ran in and what it enforced (NULL: none; `headwater.sandbox`).
    Column("sandbox", Json),
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

#: A recurring run (KFP's RecurringRun): the runs of a pipeline version that the server's
#: scheduler makes. `next_fire_at` is the next time it fires (NULL: past its end); `status`
#: ENABLED or DISABLED.
RECURRING_RUNS = Table(
    "recurring_runs",
    METADATA,
    Column("recurring_run_id", String, primary_key=True),
    Column(
        "experiment_id",
        String,
        ForeignKey("experiments.experiment_id", ondelete="SET NULL"),
        index=True,
    ),
    Column("namespace", String, nullable=False, index=True),
    Column("display_name", String, nullable=False),
    Column("description", String, nullable=False),
    Column(
        "pipeline_version_id",
        String,
        ForeignKey("pipeline_versions.pipeline_version_id"),
        nullable=False,
        index=True,
    ),
    Column("runtime_config", Json, nullable=False),
    Column("trigger", Json, nullable=False),
    Column("max_concurrency", Integer, nullable=False),
    Column("no_catchup", Integer, nullable=False),
    Column("status", String, nullable=False),
    Column("next_fire_at", Double),
    Column("created_at", Double, nullable=False),
    Column("updated_at", Double, nullable=False),
    Column("created_by", String),
)

#: Who may use `headwater server` (`headwater.access`): a personal token (`kind` "token",
#: stored as the SHA-256 of the secret only) or a user whom a trusted proxy names (`kind`
#: "user", no secret), with the role and the namespaces it holds. Every server on the
#: database reads these rows per request, so a revocation (the row deleted) is seen at once.
PRINCIPALS = Table(
    "principals",
    METADATA,
    Column("kind", String, primary_key=True),
    Column("name", String, primary_key=True),
    Column("token_hash", String, unique=True),
    Column("role", String, nullable=False),
    Column("namespaces", Json, nullable=False),
    Column("created_at", Double, nullable=False),
    Column("created_by", String, nullable=False),
)

#: What a namespace of a team server has of its own (`headwater server namespaces set`): the
#: pipeline root its runs write under ("" for the server's, with the namespace's folder) and
#: the namespace's secret whose keys its tasks get as storage credentials ("" for none).
NAMESPACE_SETTINGS = Table(
    "namespace_settings",
    METADATA,
    Column("name", String, primary_key=True),
    Column("pipeline_root", String, nullable=False),
    Column("storage_secret", String, nullable=False),
    Column("updated_at", Double, nullable=False),
    Column("updated_by", String, nullable=False),
)
