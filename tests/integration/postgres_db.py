"""A database of its own for each PostgreSQL test, on the server HEADWATER_TEST_POSTGRES_URL names.

The URL names a role with CREATEDB (not a superuser), e.g.
`postgresql+psycopg://headwater:headwater@127.0.0.1:5432/headwater_test`; `.ci/run` creates it.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import sqlalchemy as sa

BASE_URL = os.environ.get("HEADWATER_TEST_POSTGRES_URL", "")
NEEDS_POSTGRES = pytest.mark.skipif(
    not BASE_URL,
    reason="set HEADWATER_TEST_POSTGRES_URL to a PostgreSQL URL whose role may CREATE DATABASE "
    "(e.g. postgresql+psycopg://headwater:headwater@127.0.0.1:5432/headwater_test)",
)

# How long a drop waits for the last sessions on the database to end: a SIGKILLed server's
# backends end once PostgreSQL notices the closed socket.
_DROP_WAIT_S = 30.0


@contextmanager
def fresh_database() -> Iterator[str]:
    """Create an empty database, yield its URL, and drop it afterwards."""
    base = sa.make_url(BASE_URL)
    if base.drivername == "postgresql":
        base = base.set(drivername="postgresql+psycopg")
    name = f"hw_{uuid.uuid4().hex[:16]}"
    admin = sa.create_engine(base, isolation_level="AUTOCOMMIT", poolclass=sa.NullPool)
    try:
        with admin.connect() as conn:
            conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
        yield base.set(database=name).render_as_string(hide_password=False)
    finally:
        _drop(admin, name)
        admin.dispose()


def _drop(admin: sa.Engine, name: str) -> None:
    # Not `WITH (FORCE)`: that needs the right to signal every session on the database, and an
    # autovacuum worker there belongs to no role, so a role that is not a superuser is refused.
    # A plain drop stops autovacuum itself and fails only while another session is connected.
    deadline = time.monotonic() + _DROP_WAIT_S
    while True:
        try:
            with admin.connect() as conn:
                conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}"'))
            return
        except sa.exc.OperationalError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.25)


@pytest.fixture
def database_url() -> Iterator[str]:
    """A fresh, empty PostgreSQL database for one test (skipped without a server to make it on)."""
    if not BASE_URL:
        pytest.skip(NEEDS_POSTGRES.kwargs["reason"])
    with fresh_database() as url:
        yield url
