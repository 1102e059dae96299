"""Data components: synthetic Higgs data, ingest, preprocess, groupby summary, on pandas or cuDF.

`from headwater.components.data import generate_higgs, ingest, preprocess, groupby_summary`
gives the KFP components (for pipelines). The plain functions they call, usable in scripts
and notebooks, live in the modules `higgs`, `ingestion`, `preprocessing` and `summary`; they compute
on `headwater.compute.get_client()` and choose cuDF when every worker has a GPU.
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
