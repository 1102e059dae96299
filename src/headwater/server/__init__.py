"""`headwater server`: KFP's v2beta1 REST API, the web UI and a run queue on one port.

`kfp.Client(host="http://127.0.0.1:8888")` uploads pipelines, starts runs, waits for them and
lists them by experiment, as against Kubeflow Pipelines; the runs are ordinary Headwater runs
(`headwater runs list`, the UI and lineage see them), executed by worker processes that the
queue (`server.queue`, kept in the metadata store) starts. See docs/server.md.
"""

from __future__ import annotations

from typing import Any

__all__ = ["create_app"]


def __getattr__(name: str) -> Any:
    # Lazy, so that `python -m headwater.server.worker` (each run's worker process) does not
    # import the worker module through the app before running it as __main__.
    if name == "create_app":
        from headwater.server.app import create_app

        return create_app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
