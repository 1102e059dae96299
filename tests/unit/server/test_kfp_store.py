"""`KfpStore` on SQLite (the same scenarios run on PostgreSQL in the integration tests)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from kfp_store_scenarios import SCENARIOS

from headwater.server.store import KfpStore


@pytest.mark.parametrize("scenario", list(SCENARIOS.values()), ids=list(SCENARIOS))
def test_scenario(scenario: Callable[[KfpStore], None], tmp_path: Path) -> None:
    scenario(KfpStore(f"sqlite:///{tmp_path / 'md.db'}"))
