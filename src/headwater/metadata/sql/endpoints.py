"""`SqlMetadataStore`'s endpoints: the model servers `deploy_model` started."""

from __future__ import annotations

import time
from typing import Any

from sqlalchemy import Connection, insert, select, update

from headwater.errors import InvalidArgumentError
from headwater.metadata.base import EndpointRecord
from headwater.metadata.schema import ENDPOINTS
from headwater.metadata.sql.base import SqlStoreBase


class EndpointRecords(SqlStoreBase):
    """The endpoint records of `SqlMetadataStore`."""

    def save_endpoint(self, endpoint: EndpointRecord) -> EndpointRecord:
        """Record `endpoint` under its name, replacing (and keeping the `created_at` of) the
        record there (see `MetadataStore.save_endpoint`).

        Raises:
            NotFoundError: Its run is not in the store.
        """
        if not endpoint.name:
            raise InvalidArgumentError("an endpoint needs a name")

        def write(conn: Connection) -> EndpointRecord:
            now = time.time()
            before = conn.execute(
                select(ENDPOINTS.c.created_at).where(ENDPOINTS.c.name == endpoint.name)
            ).scalar_one_or_none()
            values = {
                "url": endpoint.url,
                "host": endpoint.host,
                "pid": endpoint.pid,
                "started": endpoint.started,
                "models": endpoint.models,
                "config": endpoint.config,
                "state": endpoint.state,
                "log_path": endpoint.log_path,
                "run_id": endpoint.run_id,
                "task": endpoint.task,
                "updated_at": now,
            }
            if before is None:
                created = endpoint.created_at or now
                conn.execute(
                    insert(ENDPOINTS).values(name=endpoint.name, created_at=created, **values)
                )
            else:
                conn.execute(
                    update(ENDPOINTS).where(ENDPOINTS.c.name == endpoint.name).values(**values)
                )
            return _select_endpoints(conn, ENDPOINTS.c.name == endpoint.name)[0]

        refers = f"run {endpoint.run_id!r}" if endpoint.run_id is not None else ""
        return self._db.transaction(write, write=True, refers_to=refers)

    def list_endpoints(self) -> list[EndpointRecord]:
        """Every recorded endpoint, by name."""
        return self._db.transaction(lambda conn: _select_endpoints(conn))

    def get_endpoint(self, name: str) -> EndpointRecord | None:
        """The endpoint recorded under `name`, or None."""
        found = self._db.transaction(lambda conn: _select_endpoints(conn, ENDPOINTS.c.name == name))
        return found[0] if found else None


def _select_endpoints(conn: Connection, *where: Any) -> list[EndpointRecord]:
    query = select(ENDPOINTS).where(*where).order_by(ENDPOINTS.c.name)
    return [
        EndpointRecord(
            name=r.name,
            url=r.url,
            host=r.host,
            pid=r.pid,
            started=r.started,
            models=list(r.models or []),
            config=dict(r.config or {}),
            state=r.state,
            log_path=r.log_path,
            run_id=r.run_id,
            task=r.task,
            created_at=r.created_at,
            updated_at=r.updated_at,
        )
        for r in conn.execute(query)
    ]
