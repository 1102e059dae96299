"""The store's experiments, pipelines, versions, recurring runs and run queue on SQLite (the
same scenarios run on PostgreSQL in the integration tests)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from catalog_scenarios import SCENARIOS

from headwater.metadata.base import MetadataStore
from headwater.metadata.sql import SqlMetadataStore


@pytest.mark.parametrize("scenario", list(SCENARIOS.values()), ids=list(SCENARIOS))
def test_scenario(scenario: Callable[[MetadataStore], None], tmp_path: Path) -> None:
    with SqlMetadataStore(f"sqlite:///{tmp_path / 'md.db'}") as store:
        scenario(store)
