"""`SqlMetadataStore` on PostgreSQL: the shared scenarios, migrations and concurrent opens.

Needs `HEADWATER_TEST_POSTGRES_URL`, a SQLAlchemy URL for a role with CREATEDB, e.g.
`postgresql+psycopg://headwater:headwater@127.0.0.1:5432/headwater_test`. Every test gets a
database of its own (created from that one, dropped afterwards), so tests run in parallel.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType

import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from postgres_db import NEEDS_POSTGRES

from headwater.errors import StorageError
from headwater.metadata import MetadataStore, schema
from headwater.metadata.sql import SqlMetadataStore

pytestmark = [
    pytest.mark.integration,
    NEEDS_POSTGRES,
]


def _scenarios() -> ModuleType:
    """The backend-independent scenarios, shared with the SQLite unit tests."""
    if "store_scenarios" in sys.modules:
        return sys.modules["store_scenarios"]
    path = Path(__file__).resolve().parents[1] / "unit" / "metadata" / "store_scenarios.py"
    spec = importlib.util.spec_from_file_location("store_scenarios", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["store_scenarios"] = module
    spec.loader.exec_module(module)
    return module


scenarios = _scenarios()


@pytest.fixture
def make_store(database_url: str) -> Iterator[Callable[[], SqlMetadataStore]]:
    opened: list[SqlMetadataStore] = []

    def make() -> SqlMetadataStore:
        opened.append(SqlMetadataStore(database_url))
        return opened[-1]

    yield make
    for store in opened:
        store.close()


@pytest.mark.parametrize(
    "scenario", list(scenarios.SCENARIOS.values()), ids=list(scenarios.SCENARIOS)
)
def test_scenario(
    scenario: Callable[[MetadataStore], object], make_store: Callable[[], SqlMetadataStore]
) -> None:
    scenario(make_store())


def test_migrated_database_matches_the_models(
    database_url: str, make_store: Callable[[], SqlMetadataStore]
) -> None:
    make_store()
    engine = sa.create_engine(database_url)
    try:
        with engine.connect() as conn:
            context = MigrationContext.configure(conn, opts={"compare_type": True})
            assert compare_metadata(context, schema.METADATA) == []
    finally:
        engine.dispose()


def test_reopening_keeps_the_data(make_store: Callable[[], SqlMetadataStore]) -> None:
    scenarios.add_run(make_store(), "r1")
    assert make_store().get_run("r1") is not None


def test_plain_postgresql_urls_use_psycopg(database_url: str) -> None:
    url = sa.make_url(database_url).set(drivername="postgresql")
    with SqlMetadataStore(url.render_as_string(hide_password=False)) as store:
        assert store._engine.dialect.driver == "psycopg"


def test_wrong_password_is_a_one_line_storage_error(database_url: str) -> None:
    url = sa.make_url(database_url).set(password="definitely-wrong")
    with pytest.raises(StorageError) as caught:
        SqlMetadataStore(url.render_as_string(hide_password=False))
    assert "definitely-wrong" not in str(caught.value)
    assert "\n" not in str(caught.value)
    assert "***" in str(caught.value)


@pytest.mark.slow
def test_four_processes_open_one_new_database_at_once(
    database_url: str, tmp_path: Path, make_store: Callable[[], SqlMetadataStore]
) -> None:
    ids = scenarios.run_writers(database_url, 4, tmp_path)
    assert len(set(ids)) == 200
    store = make_store()
    assert sorted(r.run_id for r in store.list_runs()) == [f"run-{n}" for n in range(4)]


@pytest.mark.slow
def test_six_processes_claim_one_run_and_exactly_one_gets_it(
    database_url: str, tmp_path: Path, make_store: Callable[[], SqlMetadataStore]
) -> None:
    store = make_store()
    scenarios.add_run(store, "r")
    store.mark_interrupted("r", finished_at=1.0)
    said = scenarios.run_claimers(database_url, "r", 6, tmp_path)
    scenarios.exactly_one_claims(said, store, "r")


def test_runs_of_one_new_pipeline_recorded_at_once_share_one_version(
    make_store: Callable[[], SqlMetadataStore],
) -> None:
    """Engines that record a new IR at the same moment (a server's workers) get one version
    of it (PostgreSQL's READ COMMITTED let each insert its own)."""
    import threading

    stores = [make_store() for _ in range(4)]
    barrier = threading.Barrier(len(stores))

    def record(k: int) -> None:
        barrier.wait()
        for n in range(20):
            scenarios.add_run(stores[k], f"r{k}-{n}", version=f"ir-{n}")

    threads = [threading.Thread(target=record, args=(k,)) for k in range(len(stores))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    runs = stores[0].list_runs(limit=200)
    assert len(runs) == 80
    by_ir: dict[str, set[str]] = {}
    for run in runs:
        by_ir.setdefault(run.pipeline_version, set()).add(run.pipeline_version_id or "")
    assert len(by_ir) == 20 and all(len(ids) == 1 for ids in by_ir.values()), by_ir


def test_a_0007_store_is_upgraded_with_every_record(database_url: str) -> None:
    path = Path(__file__).resolve().parents[1] / "unit" / "metadata" / "upgrade_0007.py"
    spec = importlib.util.spec_from_file_location("upgrade_0007", path)
    assert spec is not None and spec.loader is not None
    upgrade = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(upgrade)
    rows = upgrade.write_0007_store(database_url)
    upgrade.check_upgraded(database_url, rows)


def test_references_a_0007_store_left_dangling_are_dropped(database_url: str) -> None:
    path = Path(__file__).resolve().parents[1] / "unit" / "metadata" / "upgrade_0007.py"
    spec = importlib.util.spec_from_file_location("upgrade_0007", path)
    assert spec is not None and spec.loader is not None
    upgrade = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(upgrade)
    rows = upgrade.write_0007_store(database_url, deleted=True)
    upgrade.check_deleted_references_dropped(database_url, rows)
