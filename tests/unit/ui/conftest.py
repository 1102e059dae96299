"""The `store` fixture: small pipelines run in this process in a temp HEADWATER_HOME."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from ui_harness import ENV, PIPELINE, Store

import headwater


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    home = tmp_path_factory.mktemp("ui") / "home"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HEADWATER_HOME", str(home))
        for name in ENV:
            mp.delenv(name, raising=False)
        first = headwater.run(PIPELINE, {"rows": 3, "threshold": 0.5})
        ok = headwater.run(PIPELINE, {"rows": 4, "threshold": 0.75})
        failed = headwater.run(PIPELINE, {"rows": 4, "threshold": 0.75, "broken": True})
        assert (first.state, ok.state, failed.state) == ("SUCCEEDED", "SUCCEEDED", "FAILED")
        yield Store(home, first.run_id, ok.run_id, failed.run_id)
