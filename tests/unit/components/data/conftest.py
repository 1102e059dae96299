"""Every data test runs on both engines of one machine: Polars in this process (what the
functions choose with no cluster named) and pandas on Dask's synchronous scheduler (what a
cluster runs, without starting one)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

dask = pytest.importorskip("dask")
pytest.importorskip("polars")


@pytest.fixture(autouse=True, params=["polars", "pandas"])
def engine(request: pytest.FixtureRequest) -> Iterator[str]:
    """The engine the test's data functions choose by themselves (`_backend.plan`)."""
    if request.param == "polars":
        from headwater.components.data import _backend

        if not _backend._one_machine():  # a GPU with cuDF here: the functions choose cuDF
            pytest.skip("the functions choose cuDF on this machine, not Polars")
        yield "polars"
        return
    with dask.config.set(scheduler="synchronous"):
        yield "pandas"


@pytest.fixture(scope="session")
def higgs_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """30k Higgs rows in 1 MB parts (4 files), made once for the session."""
    from headwater.components.data.higgs import generate_higgs

    path = tmp_path_factory.mktemp("higgs") / "raw"
    with dask.config.set(scheduler="synchronous"):
        generate_higgs(str(path), 30_000, seed=3, partition_size_mb=1)
    return path
