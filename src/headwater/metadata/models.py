"""The model registry in SQL: versions assigned atomically, stages, and each model's producer.

Every function takes the open `Connection` of the caller's write or read transaction (see
`SqlMetadataStore`). Two writers of one name take turns: on SQLite every write transaction
already runs alone (`BEGIN IMMEDIATE`); on PostgreSQL each takes a transaction-scoped
advisory lock on the name first. So "highest version plus one" and "demote the production
version, then promote this one" each see the other writers' commits, and the unique
(name, version) constraint is only a backstop.
"""

from __future__ import annotations

import hashlib
import time
from typing import Any

from sqlalchemy import Connection, ScalarSelect, func, insert, select, update

from headwater.errors import NotFoundError
from headwater.metadata.base import ModelRecord, model_stage
from headwater.metadata.schema import ARTIFACTS, EVENTS, EXECUTIONS, MODELS

__all__ = ["missing", "promote", "register", "select_models"]


def register(conn: Connection, model: ModelRecord) -> tuple[ModelRecord, bool]:
    """Insert `model` as the next version of its name; see `MetadataStore.register_model`."""
    stage = model_stage(model.stage)
    _lock(conn, model.name)
    same = select_models(conn, MODELS.c.name == model.name, MODELS.c.uri == model.uri)
    if same:
        return same[-1], False  # the first version registered with this URI
    version = conn.execute(
        select(func.coalesce(func.max(MODELS.c.version), 0)).where(MODELS.c.name == model.name)
    ).scalar_one()
    now = model.created_at or time.time()
    execution_id = model.execution_id
    if execution_id is None and model.run_id is not None:
        execution_id = conn.execute(
            select(_producer_in_run(model.run_id, model.uri))
        ).scalar_one_or_none()
    if stage == "production":
        _demote_production(conn, model.name, now)
    new_id = conn.execute(
        insert(MODELS)
        .values(
            name=model.name,
            version=int(version) + 1,
            uri=model.uri,
            framework=model.framework,
            metrics=model.metrics,
            stage=stage,
            run_id=model.run_id,
            execution_id=execution_id,
            created_at=now,
            stage_changed_at=now,
        )
        .returning(MODELS.c.id)
    ).scalar_one()
    return select_models(conn, MODELS.c.id == new_id)[0], True


def promote(
    conn: Connection, name: str, version: int, stage: str, masked: str
) -> tuple[ModelRecord, list[ModelRecord]]:
    """Move a version to `stage`; see `MetadataStore.promote_model`.

    Raises:
        NotFoundError: No such name or version (the message lists what there is).
        InvalidArgumentError: No such stage.
    """
    stage = model_stage(stage)
    _lock(conn, name)
    found = select_models(conn, MODELS.c.name == name, MODELS.c.version == version)
    if not found:
        raise missing(conn, name, version, masked)
    now = time.time()
    demoted_ids: list[int] = []
    if stage == "production":
        demoted_ids = _demote_production(conn, name, now, keep=found[0].id)
    if found[0].stage != stage:
        conn.execute(
            update(MODELS)
            .where(MODELS.c.id == found[0].id)
            .values(stage=stage, stage_changed_at=now)
        )
    demoted = select_models(conn, MODELS.c.id.in_(demoted_ids)) if demoted_ids else []
    return select_models(conn, MODELS.c.id == found[0].id)[0], demoted


def select_models(conn: Connection, *where: Any) -> list[ModelRecord]:
    """The models matching `where`, by name and then newest version first.

    A model registered in a run before the run's record of the artifact was written gets
    its execution here: the run's execution with an OUTPUT event to the model's URI.
    """
    produced = _producer_in_run(MODELS.c.run_id, MODELS.c.uri)
    query = (
        select(MODELS, func.coalesce(MODELS.c.execution_id, produced).label("producer"))
        .where(*where)
        .order_by(MODELS.c.name, MODELS.c.version.desc())
    )
    return [
        ModelRecord(
            id=r.id,
            name=r.name,
            version=r.version,
            uri=r.uri,
            framework=r.framework,
            metrics=dict(r.metrics or {}),
            stage=r.stage,
            run_id=r.run_id,
            execution_id=r.producer,
            created_at=r.created_at,
            stage_changed_at=r.stage_changed_at,
        )
        for r in conn.execute(query)
    ]


def missing(conn: Connection, name: str, version: int | None, masked: str) -> NotFoundError:
    """The error for a name, or a version of it, that is not registered, naming what is."""
    if version is not None:
        versions = list(
            conn.execute(
                select(MODELS.c.version).where(MODELS.c.name == name).order_by(MODELS.c.version)
            ).scalars()
        )
        if versions:
            shown = ", ".join(str(v) for v in versions[-20:])
            return NotFoundError(
                f"model {name!r} has no version {version} (registered versions: {shown})"
            )
    names = list(conn.execute(select(MODELS.c.name).distinct().order_by(MODELS.c.name)).scalars())
    known = ", ".join(names[:20]) + (", ..." if len(names) > 20 else "") if names else "none"
    return NotFoundError(
        f"no model named {name!r} in the metadata store {masked!r} (registered models: "
        f"{known}); register one with headwater.register_model or the register_model component"
    )


def _producer_in_run(run_id: Any, uri: Any) -> ScalarSelect[Any]:
    """The first execution of `run_id` with an OUTPUT event to the artifact at `uri`."""
    return (
        select(EVENTS.c.execution_id)
        .join(ARTIFACTS, ARTIFACTS.c.id == EVENTS.c.artifact_id)
        .join(EXECUTIONS, EXECUTIONS.c.id == EVENTS.c.execution_id)
        .where(EXECUTIONS.c.run_id == run_id, ARTIFACTS.c.uri == uri, EVENTS.c.kind == "OUTPUT")
        .order_by(EVENTS.c.execution_id)
        .limit(1)
        .scalar_subquery()
    )


def _demote_production(
    conn: Connection, name: str, now: float, *, keep: int | None = None
) -> list[int]:
    """Set the name's production versions (but `keep`) to none; return their ids."""
    where = [MODELS.c.name == name, MODELS.c.stage == "production"]
    if keep is not None:
        where.append(MODELS.c.id != keep)
    ids = [int(i) for i in conn.execute(select(MODELS.c.id).where(*where)).scalars()]
    if ids:
        conn.execute(
            update(MODELS).where(MODELS.c.id.in_(ids)).values(stage="none", stage_changed_at=now)
        )
    return ids


def _lock(conn: Connection, name: str) -> None:
    """Serialize writers of one model name until the transaction ends (PostgreSQL; SQLite's
    write transactions are serial already)."""
    if conn.dialect.name != "postgresql":
        return
    digest = hashlib.sha256(f"headwater-model:{name}".encode()).digest()
    key = int.from_bytes(digest[:8], "big", signed=True)
    conn.execute(select(func.pg_advisory_xact_lock(key)))
