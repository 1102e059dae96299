"""`SqlMetadataStore`'s named pipelines and their uploaded versions.

A version is the record runs point to (`pipeline_versions`). Taking an uploaded version off
its pipeline (deleting it, or its pipeline) never takes it from the runs that used it: it
stays as a version no one uploaded (merged into the one of the same IR, if there is one),
and only a version nothing points to is deleted.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, delete, exists, func, insert, select, update
from sqlalchemy.exc import IntegrityError

from headwater.errors import ConflictError, HeadwaterSystemError, NotFoundError
from headwater.metadata.base import PipelineRecord, VersionRecord
from headwater.metadata.queries import unuploaded_version
from headwater.metadata.schema import PIPELINE_VERSIONS, PIPELINES, RECURRING_RUNS, RUNS
from headwater.metadata.sql.base import SqlStoreBase
from headwater.metadata.sql.pages import pipeline_record, version_record

V = PIPELINE_VERSIONS.c


class PipelineRecords(SqlStoreBase):
    """Named pipelines and versions (see `MetadataStore`)."""

    def create_pipeline(
        self, pipeline: PipelineRecord, version: VersionRecord | None = None
    ) -> PipelineRecord:
        """Record a named pipeline and, in the same transaction, its first version.

        Raises:
            ConflictError: Its namespace has a pipeline of that name.
        """

        def write(conn: Connection) -> None:
            conn.execute(insert(PIPELINES).values(**vars(pipeline)))
            if version is not None:
                conn.execute(insert(PIPELINE_VERSIONS).values(**vars(version)))

        try:
            self._db.transaction(write, write=True)
        except (IntegrityError, HeadwaterSystemError) as exc:
            raise ConflictError(
                f"namespace {pipeline.namespace!r} has a pipeline named "
                f"{pipeline.display_name!r} already: upload a new version of it instead"
            ) from exc
        return pipeline

    def get_pipeline(self, pipeline_id: str) -> PipelineRecord | None:
        """One named pipeline by id."""
        return self._pipeline(PIPELINES.c.pipeline_id == pipeline_id)

    def pipeline_named(self, name: str, namespace: str) -> PipelineRecord | None:
        """The namespace's pipeline `name`."""
        return self._pipeline(
            (PIPELINES.c.display_name == name) & (PIPELINES.c.namespace == namespace)
        )

    def delete_pipeline(self, pipeline_id: str, *, cascade: bool) -> None:
        """Delete a named pipeline and, with `cascade`, its versions.

        Raises:
            NotFoundError: No pipeline has this id.
            ConflictError: It has versions and `cascade` is false.
        """

        def write(conn: Connection) -> None:
            if conn.execute(_pipeline_exists(pipeline_id)).first() is None:
                raise NotFoundError(f"no pipeline with id {pipeline_id!r}")
            versions = list(
                conn.execute(
                    select(V.pipeline_version_id).where(V.pipeline_id == pipeline_id)
                ).scalars()
            )
            if versions and not cascade:
                raise ConflictError(
                    f"pipeline {pipeline_id} has {len(versions)} version(s): delete them "
                    "first, or pass cascade=true"
                )
            for version_id in versions:
                _take_off(conn, version_id)
            conn.execute(delete(PIPELINES).where(PIPELINES.c.pipeline_id == pipeline_id))

        self._db.transaction(write, write=True)

    def create_version(self, version: VersionRecord) -> VersionRecord:
        """Record an uploaded version; or, for one of no pipeline (`pipeline_id` None), the
        version no one uploaded of its IR, found by name and digest or added.

        Raises:
            NotFoundError: Its pipeline does not exist.
            ConflictError: The pipeline has a version of that display name.
        """
        if version.pipeline_id is None:

            def find_or_add(conn: Connection) -> str:
                return unuploaded_version(
                    conn, version.name, version.digest, version.ir, version.created_at
                )

            found = self.get_version(self._db.transaction(find_or_add, write=True))
            assert found is not None  # just found or added, in one transaction
            return found

        def write(conn: Connection) -> None:
            if conn.execute(_pipeline_exists(version.pipeline_id or "")).first() is None:
                raise NotFoundError(f"no pipeline with id {version.pipeline_id!r}")
            conn.execute(insert(PIPELINE_VERSIONS).values(**vars(version)))

        try:
            self._db.transaction(write, write=True)
        except (IntegrityError, HeadwaterSystemError) as exc:
            raise ConflictError(
                f"pipeline {version.pipeline_id} has a version named "
                f"{version.display_name!r} already: name the new one differently"
            ) from exc
        return version

    def get_version(self, pipeline_version_id: str) -> VersionRecord | None:
        """One pipeline version by id."""
        query = select(PIPELINE_VERSIONS).where(V.pipeline_version_id == pipeline_version_id)
        row = self._db.transaction(lambda conn: conn.execute(query).first())
        return None if row is None else version_record(row)

    def latest_version(self, pipeline_id: str) -> VersionRecord | None:
        """The newest version uploaded to a named pipeline."""
        query = (
            select(PIPELINE_VERSIONS)
            .where(V.pipeline_id == pipeline_id)
            .order_by(V.created_at.desc(), V.pipeline_version_id)
            .limit(1)
        )
        row = self._db.transaction(lambda conn: conn.execute(query).first())
        return None if row is None else version_record(row)

    def delete_version(self, pipeline_version_id: str) -> None:
        """Take an uploaded version off its pipeline (see the module docstring).

        Raises:
            NotFoundError: No uploaded version has this id.
        """

        def write(conn: Connection) -> None:
            uploaded = conn.execute(
                select(V.pipeline_version_id).where(
                    V.pipeline_version_id == pipeline_version_id, V.pipeline_id.is_not(None)
                )
            ).first()
            if uploaded is None:
                raise NotFoundError(f"no pipeline version with id {pipeline_version_id!r}")
            _take_off(conn, pipeline_version_id)

        self._db.transaction(write, write=True)

    def _pipeline(self, cond: Any) -> PipelineRecord | None:
        row = self._db.transaction(lambda conn: conn.execute(select(PIPELINES).where(cond)).first())
        return None if row is None else pipeline_record(row)


def _pipeline_exists(pipeline_id: str) -> Any:
    return select(PIPELINES.c.pipeline_id).where(PIPELINES.c.pipeline_id == pipeline_id)


def _take_off(conn: Connection, version_id: str) -> None:
    """Delete an uploaded version, or keep it unuploaded for the runs that point to it."""
    used = conn.execute(
        select(
            exists().where(RUNS.c.pipeline_version_id == version_id)
            | exists().where(RECURRING_RUNS.c.pipeline_version_id == version_id)
        )
    ).scalar()
    if not used:
        conn.execute(delete(PIPELINE_VERSIONS).where(V.pipeline_version_id == version_id))
        return
    name, digest = conn.execute(
        select(V.name, V.digest).where(V.pipeline_version_id == version_id)
    ).one()
    twin = conn.execute(
        select(func.min(V.pipeline_version_id)).where(
            V.name == name, V.digest == digest, V.pipeline_id.is_(None)
        )
    ).scalar()
    if twin is None:
        conn.execute(
            update(PIPELINE_VERSIONS)
            .where(V.pipeline_version_id == version_id)
            .values(pipeline_id=None, display_name="", description="")
        )
        return
    for table in (RUNS, RECURRING_RUNS):
        conn.execute(
            update(table)
            .where(table.c.pipeline_version_id == version_id)
            .values(pipeline_version_id=twin)
        )
    conn.execute(delete(PIPELINE_VERSIONS).where(V.pipeline_version_id == version_id))
