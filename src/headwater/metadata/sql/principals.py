"""`SqlMetadataStore`'s principals (personal tokens, hashes only, and proxy users) and the
settings namespaces have of their own."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, Row, delete, insert, select
from sqlalchemy.exc import IntegrityError

from headwater.errors import ConflictError, HeadwaterSystemError, NotFoundError
from headwater.metadata.base import NamespaceRecord, PrincipalRecord
from headwater.metadata.schema import (
    EVENTS,
    EXECUTIONS,
    EXPERIMENTS,
    NAMESPACE_SETTINGS,
    PIPELINES,
    PRINCIPALS,
    RUNS,
)
from headwater.metadata.sql.base import SqlStoreBase

__all__ = ["PrincipalRecords"]


def _record(row: Row[Any]) -> PrincipalRecord:
    values = dict(row._mapping)
    values["namespaces"] = tuple(values["namespaces"] or ())
    return PrincipalRecord(**values)


class PrincipalRecords(SqlStoreBase):
    """Tokens and proxy users (see `MetadataStore`)."""

    def add_principal(self, principal: PrincipalRecord) -> None:
        """Raises ConflictError if a principal of its kind has its name."""
        values = {**vars(principal), "namespaces": list(principal.namespaces)}
        try:
            self._db.transaction(
                lambda conn: conn.execute(insert(PRINCIPALS).values(**values)), write=True
            )
        except (IntegrityError, HeadwaterSystemError) as exc:
            raise ConflictError(
                f"a {principal.kind} named {principal.name!r} exists already"
            ) from exc

    def principal_by_token(self, token_hash: str) -> PrincipalRecord | None:
        """The token with this hash (one indexed read: every authenticated request makes it)."""
        return self._principal(
            (PRINCIPALS.c.token_hash == token_hash) & (PRINCIPALS.c.kind == "token")
        )

    def get_principal(self, kind: str, name: str) -> PrincipalRecord | None:
        """The token or user of that name."""
        return self._principal((PRINCIPALS.c.kind == kind) & (PRINCIPALS.c.name == name))

    def list_principals(self, kind: str | None = None) -> list[PrincipalRecord]:
        """Tokens and users, by kind and name."""
        query = select(PRINCIPALS).order_by(PRINCIPALS.c.kind, PRINCIPALS.c.name)
        if kind is not None:
            query = query.where(PRINCIPALS.c.kind == kind)
        return self._db.transaction(lambda conn: [_record(r) for r in conn.execute(query)])

    def remove_principal(self, kind: str, name: str) -> None:
        """Raises NotFoundError if there is no such principal."""

        def write(conn: Connection) -> int:
            cond = (PRINCIPALS.c.kind == kind) & (PRINCIPALS.c.name == name)
            return conn.execute(delete(PRINCIPALS).where(cond)).rowcount

        if not self._db.transaction(write, write=True):
            raise NotFoundError(f"no {kind} named {name!r}")

    def artifact_namespaces(self, artifact_id: int) -> set[str]:
        """The namespaces of the runs whose tasks made or read the artifact."""
        query = (
            select(RUNS.c.namespace)
            .distinct()
            .select_from(EVENTS)
            .join(EXECUTIONS, EXECUTIONS.c.id == EVENTS.c.execution_id)
            .join(RUNS, RUNS.c.run_id == EXECUTIONS.c.run_id)
            .where(EVENTS.c.artifact_id == artifact_id)
        )
        return self._db.transaction(lambda conn: {r[0] for r in conn.execute(query)})

    def namespaces(self) -> list[str]:
        """Every namespace an experiment, a pipeline or a principal names, sorted."""

        def read(conn: Connection) -> list[str]:
            found = {r[0] for r in conn.execute(select(EXPERIMENTS.c.namespace).distinct())}
            found |= {r[0] for r in conn.execute(select(PIPELINES.c.namespace).distinct())}
            for r in conn.execute(select(PRINCIPALS.c.namespaces)):
                found.update(r[0] or ())
            return sorted(ns for ns in found if ns)

        return self._db.transaction(read)

    def has_principals(self) -> bool:
        """True if any token or user is recorded."""
        query = select(PRINCIPALS.c.name).limit(1)
        return self._db.transaction(lambda conn: conn.execute(query).first()) is not None

    def put_namespace(self, settings: NamespaceRecord) -> None:
        """Record or replace a namespace's settings."""
        values = vars(settings)

        def write(conn: Connection) -> None:
            cond = NAMESPACE_SETTINGS.c.name == settings.name
            conn.execute(delete(NAMESPACE_SETTINGS).where(cond))
            conn.execute(insert(NAMESPACE_SETTINGS).values(**values))

        self._db.transaction(write, write=True)

    def get_namespace(self, name: str) -> NamespaceRecord | None:
        """A namespace's settings, if it has any."""
        query = select(NAMESPACE_SETTINGS).where(NAMESPACE_SETTINGS.c.name == name)
        row = self._db.transaction(lambda conn: conn.execute(query).first())
        return None if row is None else NamespaceRecord(**dict(row._mapping))

    def list_namespace_settings(self) -> list[NamespaceRecord]:
        """Every namespace's settings, by name."""
        query = select(NAMESPACE_SETTINGS).order_by(NAMESPACE_SETTINGS.c.name)
        return self._db.transaction(
            lambda conn: [NamespaceRecord(**dict(r._mapping)) for r in conn.execute(query)]
        )

    def remove_namespace(self, name: str) -> None:
        """Raises NotFoundError if the namespace has no settings."""

        def write(conn: Connection) -> int:
            cond = NAMESPACE_SETTINGS.c.name == name
            return conn.execute(delete(NAMESPACE_SETTINGS).where(cond)).rowcount

        if not self._db.transaction(write, write=True):
            raise NotFoundError(f"namespace {name!r} has no settings of its own")

    def _principal(self, cond: Any) -> PrincipalRecord | None:
        query = select(PRINCIPALS).where(cond)
        row = self._db.transaction(lambda conn: conn.execute(query).first())
        return None if row is None else _record(row)
