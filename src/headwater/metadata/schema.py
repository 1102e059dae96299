"""The metadata tables as SQLAlchemy models; `migrations/` creates exactly these.

Portable types only (JSON, VARCHAR, double-precision epoch seconds) so that SQLite and
PostgreSQL run the same schema. Constraint and index names come from `NAMING`, so that a
migration and the models agree on every name (checked by a test with alembic's
`compare_metadata`). Change a model only together with a new revision in `migrations/versions/`.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Double,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    UniqueConstraint,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

NAMING = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
}

# SQL NULL (not the JSON text 'null') when a Python None is stored.
Json = JSON(none_as_null=True)


class Base(DeclarativeBase):
    """Declarative base carrying the naming convention."""

    metadata = MetaData(naming_convention=NAMING)


class Pipeline(Base):
    """A pipeline version: its name, the digest of its IR, and the IR itself."""

    __tablename__ = "pipelines"
    __table_args__ = (UniqueConstraint("name", "version"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String, nullable=False)
    version: Mapped[str] = mapped_column(String, nullable=False)
    ir: Mapped[dict[str, Any]] = mapped_column(Json, nullable=False)
    created_at: Mapped[float] = mapped_column(Double, nullable=False)


class Run(Base):
    """One run of a pipeline version."""

    __tablename__ = "runs"

    run_id: Mapped[str] = mapped_column(String, primary_key=True)
    pipeline_id: Mapped[int] = mapped_column(ForeignKey("pipelines.id"), nullable=False, index=True)
    state: Mapped[str] = mapped_column(String, nullable=False, index=True)
    parameters: Mapped[dict[str, Any]] = mapped_column(Json, nullable=False)
    pipeline_root: Mapped[str] = mapped_column(String, nullable=False)
    created_at: Mapped[float] = mapped_column(Double, nullable=False, index=True)
    finished_at: Mapped[float | None] = mapped_column(Double)
    outputs: Mapped[dict[str, Any]] = mapped_column(Json, nullable=False)
    error: Mapped[dict[str, Any] | None] = mapped_column(Json)
    engine_host: Mapped[str] = mapped_column(String, nullable=False)
    engine_pid: Mapped[int] = mapped_column(Integer, nullable=False)


class Execution(Base):
    """One executor task of a run (unique by run and task name)."""

    __tablename__ = "executions"
    __table_args__ = (UniqueConstraint("run_id", "task"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    run_id: Mapped[str] = mapped_column(
        ForeignKey("runs.run_id", ondelete="CASCADE"), nullable=False
    )
    task: Mapped[str] = mapped_column(String, nullable=False)
    component: Mapped[str] = mapped_column(String, nullable=False)
    parent_dag: Mapped[str] = mapped_column(String, nullable=False)
    iteration: Mapped[str] = mapped_column(String, nullable=False)
    state: Mapped[str] = mapped_column(String, nullable=False)
    inputs: Mapped[dict[str, Any]] = mapped_column(Json, nullable=False)
    outputs: Mapped[dict[str, Any]] = mapped_column(Json, nullable=False)
    cache_key: Mapped[str] = mapped_column(String, nullable=False, index=True)
    # Indexed so that deleting the original execution (SET NULL) does not scan the table.
    cached_from: Mapped[int | None] = mapped_column(
        ForeignKey("executions.id", ondelete="SET NULL"), index=True
    )
    started_at: Mapped[float | None] = mapped_column(Double)
    finished_at: Mapped[float | None] = mapped_column(Double)
    log_path: Mapped[str] = mapped_column(String, nullable=False)
    error: Mapped[dict[str, Any] | None] = mapped_column(Json)
    attempts: Mapped[int] = mapped_column(Integer, nullable=False)


class Artifact(Base):
    """One artifact, identified by its URI."""

    __tablename__ = "artifacts"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    uri: Mapped[str] = mapped_column(String, nullable=False, unique=True)
    schema_title: Mapped[str] = mapped_column(String, nullable=False)
    name: Mapped[str] = mapped_column(String, nullable=False)
    digest: Mapped[str | None] = mapped_column(String, index=True)
    size: Mapped[int | None] = mapped_column(BigInteger)
    # `metadata` is taken by the declarative base, hence the attribute name.
    metadata_: Mapped[dict[str, Any]] = mapped_column("metadata", Json, nullable=False)
    producer: Mapped[int | None] = mapped_column(
        ForeignKey("executions.id", ondelete="SET NULL"), index=True
    )
    created_at: Mapped[float] = mapped_column(Double, nullable=False)


class Event(Base):
    """An execution consumed (INPUT) or produced (OUTPUT) an artifact through a slot."""

    __tablename__ = "events"
    __table_args__ = (
        UniqueConstraint("execution_id", "artifact_id", "kind", "slot", "index"),
        # The two lineage hops: artifact -> executions and execution -> artifacts.
        Index("ix_events_artifact", "artifact_id", "kind", "execution_id"),
        Index("ix_events_execution", "execution_id", "kind", "artifact_id"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    execution_id: Mapped[int] = mapped_column(
        ForeignKey("executions.id", ondelete="CASCADE"), nullable=False
    )
    artifact_id: Mapped[int] = mapped_column(
        ForeignKey("artifacts.id", ondelete="CASCADE"), nullable=False
    )
    kind: Mapped[str] = mapped_column(String, nullable=False)
    slot: Mapped[str] = mapped_column(String, nullable=False)
    index: Mapped[int] = mapped_column(Integer, nullable=False)


class Metric(Base):
    """A scalar logged to a Metrics artifact. NaN is stored as NULL (SQLite cannot keep it)."""

    __tablename__ = "metrics"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    run_id: Mapped[str] = mapped_column(
        ForeignKey("runs.run_id", ondelete="CASCADE"), nullable=False, index=True
    )
    execution_id: Mapped[int] = mapped_column(Integer, nullable=False)
    artifact_id: Mapped[int] = mapped_column(Integer, nullable=False)
    name: Mapped[str] = mapped_column(String, nullable=False)
    value: Mapped[float | None] = mapped_column(Double)
