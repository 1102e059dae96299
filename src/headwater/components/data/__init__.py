"""Data components: synthetic Higgs data, ingest, preprocess, groupby summary, on Polars, pandas
or cuDF.

`from headwater.components.data import generate_higgs, ingest, preprocess, groupby_summary`
gives the KFP components (for pipelines). The plain functions they call, usable in scripts
and notebooks, live in the modules `higgs`, `ingestion`, `preprocessing` and `summary`. With no
cluster named they compute on Polars in this process; on a Dask cluster (`client=`, or the run's
under `--executor dask`) with pandas on its workers, or cuDF when every worker has a GPU
(`_backend.plan`, ADR 70).
"""

from __future__ import annotations

from typing import Any

__all__ = ["generate_higgs", "groupby_summary", "ingest", "preprocess"]


def __getattr__(name: str) -> Any:
    # The components import kfp.dsl (half a second); the plain functions do not need it.
    if name in __all__:
        from headwater.components.data import components

        return getattr(components, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
