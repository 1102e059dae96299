"""`headwater server`: KFP's v2beta1 REST API, the web UI and a run queue on one port.

`kfp.Client(host="http://127.0.0.1:8888")` uploads pipelines, starts runs, waits for them and
lists them by experiment, as against Kubeflow Pipelines; the runs are ordinary Headwater runs
(`headwater runs list`, the UI and lineage see them), executed by worker processes that the
queue (`server.queue`, kept in the metadata store) starts. See docs/server.md.
"""

from __future__ import annotations

from headwater.server.app import create_app

__all__ = ["create_app"]
