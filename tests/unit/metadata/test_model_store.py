"""The model registry in `SqlMetadataStore` on SQLite: scenarios, concurrency, migration."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa
from alembic import command
from model_scenarios import SCENARIOS, add_run, registrations_are_distinct, run_registrars

from headwater.metadata import MetadataStore, ModelRecord, migrations
from headwater.metadata.sql import SqlMetadataStore


@pytest.fixture(params=["file", "memory"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SqlMetadataStore]:
    url = f"sqlite:///{tmp_path / 'md.db'}" if request.param == "file" else "sqlite://"
    with SqlMetadataStore(url) as opened:
        yield opened


@pytest.mark.parametrize("scenario", list(SCENARIOS.values()), ids=list(SCENARIOS))
def test_scenario(scenario: Callable[[MetadataStore], object], store: SqlMetadataStore) -> None:
    scenario(store)


@pytest.mark.slow
def test_four_processes_registering_one_name_get_distinct_versions(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'models.db'}"
    SqlMetadataStore(url).close()
    versions = run_registrars(url, processes=4, each=10, tmp_path=tmp_path)
    with SqlMetadataStore(url) as store:
        registrations_are_distinct(store, versions)


def test_a_store_at_0003_is_upgraded_keeping_its_runs(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'md.db'}"
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        command.upgrade(migrations.alembic_config(conn), "0003_execution_worker")
    engine.dispose()
    with SqlMetadataStore(url) as store:  # opening migrates to the head
        add_run(store, "r1")
        model, _ = store.register_model(ModelRecord("a", "/m/a", run_id="r1"))
        assert (model.version, model.run_id) == (1, "r1")
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        assert migrations.current_revision(conn) == migrations.HEAD
        command.downgrade(migrations.alembic_config(conn), "0003_execution_worker")
    assert "models" not in sa.inspect(engine).get_table_names()
    assert "runs" in sa.inspect(engine).get_table_names()
    engine.dispose()
