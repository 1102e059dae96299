"""The data functions run on Dask's synchronous scheduler here: no cluster, no warnings."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

dask = pytest.importorskip("dask")


@pytest.fixture(autouse=True)
def synchronous() -> Iterator[None]:
    with dask.config.set(scheduler="synchronous"):
        yield


@pytest.fixture(scope="session")
def higgs_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """30k Higgs rows in 1 MB parts (4 files), made once for the session."""
    from headwater.components.data.higgs import generate_higgs

    path = tmp_path_factory.mktemp("higgs") / "raw"
    with dask.config.set(scheduler="synchronous"):
        generate_higgs(str(path), 30_000, seed=3, partition_size_mb=1)
    return path
