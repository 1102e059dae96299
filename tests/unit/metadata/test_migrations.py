"""The Alembic revisions create exactly the tables the models describe, from code alone."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory

from headwater.errors import StorageError
from headwater.metadata import migrations, schema
from headwater.metadata.sql import SqlMetadataStore

TABLES = {
    "namespace_settings",
    "pipelines",
    "pipeline_versions",
    "runs",
    "executions",
    "artifacts",
    "events",
    "metrics",
    "step_metrics",
    "models",
    "endpoints",
    "experiments",
    "recurring_runs",
    "principals",
    "alembic_version",
}


def diffs(url: str, metadata: sa.MetaData) -> list[object]:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            context = MigrationContext.configure(conn, opts={"compare_type": True})
            return list(compare_metadata(context, metadata))
    finally:
        engine.dispose()


def test_head_constant_is_the_newest_revision() -> None:
    scripts = ScriptDirectory.from_config(migrations.alembic_config())
    assert scripts.get_heads() == [migrations.HEAD]


def test_migrated_database_matches_the_models(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'md.db'}"
    SqlMetadataStore(url).close()
    assert diffs(url, schema.METADATA) == []
    engine = sa.create_engine(url)
    assert set(sa.inspect(engine).get_table_names()) == TABLES
    engine.dispose()


def test_alembic_revisions_build_exactly_the_models(tmp_path: Path) -> None:
    # A new store is created from the models and stamped; an old one is migrated by the
    # revisions. Both paths must give the same schema.
    url = f"sqlite:///{tmp_path / 'md.db'}"
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        command.upgrade(migrations.alembic_config(conn), "head")
    engine.dispose()
    assert diffs(url, schema.METADATA) == []


def test_a_new_store_is_stamped_at_head_without_alembic(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'md.db'}"
    SqlMetadataStore(url).close()
    engine = sa.create_engine(url)
    with engine.connect() as conn:
        assert migrations.current_revision(conn) == migrations.HEAD
    engine.dispose()


def test_the_parity_check_sees_a_difference(tmp_path: Path) -> None:
    # Guard against a check that can never fail: a model with one more column differs.
    url = f"sqlite:///{tmp_path / 'md.db'}"
    SqlMetadataStore(url).close()
    changed = sa.MetaData()
    for table in schema.METADATA.tables.values():
        table.to_metadata(changed)
    changed.tables["runs"].append_column(sa.Column("extra", sa.String()))
    assert [d[0] for d in diffs(url, changed)] == ["add_column"]  # type: ignore[index]


def test_upgrade_is_idempotent_and_downgrade_removes_everything(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'md.db'}"
    engine = sa.create_engine(url)
    migrations.upgrade(engine)
    migrations.upgrade(engine)
    with engine.connect() as conn:
        assert migrations.current_revision(conn) == migrations.HEAD
    with engine.begin() as conn:
        command.downgrade(migrations.alembic_config(conn), "base")
    assert set(sa.inspect(engine).get_table_names()) == {"alembic_version"}
    engine.dispose()


def test_a_newer_schema_is_refused(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'md.db'}"
    SqlMetadataStore(url).close()
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        conn.execute(sa.text("UPDATE alembic_version SET version_num = '9999_future'"))
    engine.dispose()
    with pytest.raises(StorageError, match=r"newer than this Headwater knows.*upgrade headwater"):
        SqlMetadataStore(url)
