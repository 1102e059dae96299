"""The model registry on PostgreSQL: the shared scenarios and concurrent registrations.

Needs `HEADWATER_TEST_POSTGRES_URL` (see `test_metadata_postgres.py`, whose per-test
database fixture this uses).
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest
from postgres_db import NEEDS_POSTGRES
from test_metadata_postgres import make_store  # noqa: F401

from headwater.metadata import MetadataStore
from headwater.metadata.sql import SqlMetadataStore

pytestmark = [
    pytest.mark.integration,
    NEEDS_POSTGRES,
]


def _scenarios() -> ModuleType:
    """The backend-independent registry scenarios, shared with the SQLite unit tests."""
    if "model_scenarios" in sys.modules:
        return sys.modules["model_scenarios"]
    path = Path(__file__).resolve().parents[1] / "unit" / "metadata" / "model_scenarios.py"
    spec = importlib.util.spec_from_file_location("model_scenarios", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["model_scenarios"] = module
    spec.loader.exec_module(module)
    return module


scenarios = _scenarios()


@pytest.mark.parametrize(
    "scenario", list(scenarios.SCENARIOS.values()), ids=list(scenarios.SCENARIOS)
)
def test_scenario(
    scenario: Callable[[MetadataStore], object],
    make_store: Callable[[], SqlMetadataStore],  # noqa: F811
) -> None:
    scenario(make_store())


@pytest.mark.slow
def test_six_processes_registering_one_name_get_distinct_versions(
    database_url: str,
    tmp_path: Path,
    make_store: Callable[[], SqlMetadataStore],  # noqa: F811
) -> None:
    store = make_store()  # the schema exists before the registrars race on the name
    versions = scenarios.run_registrars(database_url, processes=6, each=10, tmp_path=tmp_path)
    scenarios.registrations_are_distinct(store, versions)
