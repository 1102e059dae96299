"""`headwater server` on PostgreSQL: the store's catalog and queue scenarios, and a run through
the queue.

Needs `HEADWATER_TEST_POSTGRES_URL` (see test_metadata_postgres.py); every test gets a
database of its own.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest
from postgres_db import NEEDS_POSTGRES
from server_harness import adder, kfp_client, running_server

from headwater.metadata.base import MetadataStore
from headwater.metadata.sql import SqlMetadataStore

pytestmark = [
    pytest.mark.integration,
    NEEDS_POSTGRES,
]


def _scenarios() -> ModuleType:
    """The scenarios shared with the SQLite unit tests."""
    if "catalog_scenarios" in sys.modules:
        return sys.modules["catalog_scenarios"]
    path = Path(__file__).resolve().parents[1] / "unit" / "metadata" / "catalog_scenarios.py"
    spec = importlib.util.spec_from_file_location("catalog_scenarios", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["catalog_scenarios"] = module
    spec.loader.exec_module(module)
    return module


scenarios = _scenarios()


@pytest.mark.parametrize(
    "scenario", list(scenarios.SCENARIOS.values()), ids=list(scenarios.SCENARIOS)
)
def test_scenario(scenario: Callable[[MetadataStore], None], database_url: str) -> None:
    with SqlMetadataStore(database_url) as store:
        scenario(store)


def test_a_run_through_the_queue_on_postgresql(database_url: str, tmp_path: Path) -> None:
    with running_server(tmp_path / "home", "--metadata-url", database_url) as base:
        client = kfp_client(base)
        result = client.create_run_from_pipeline_func(adder, arguments={"x": 3})
        run = client.wait_for_run_completion(result.run_id, timeout=60, sleep_duration=0.1)
        assert run.state == "SUCCEEDED"
        assert {t.display_name for t in run.run_details.task_details} == {"add", "add-2"}
        assert client.list_runs().total_size == 1
