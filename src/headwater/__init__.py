"""Headwater: run Kubeflow Pipelines (KFP v2) pipelines anywhere.

This package is the Python API; the `headwater` command is a thin layer over it::

    import headwater

    run = headwater.run("pipeline.py", arguments={"n": 3})
    for info in headwater.list_runs(state="FAILED", limit=5):
        print(info.run_id, info.error)
    details = headwater.get_run(run.run_id)
    model_uri = details.tasks[-1].output_artifacts["model"][0]
    graph = headwater.lineage(model_uri, direction="upstream")
    headwater.register_model("churn", model_uri, run_id=run.run_id)

Every name below is loaded on first use, so `import headwater` imports neither KFP nor
SQLAlchemy. Functions that only read (`list_runs`, `get_run`, `get_artifact`, `lineage`)
never create, migrate or write the metadata store.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from headwater._version import __version__ as __version__

# Public name -> the module that defines it.
_EXPORTS = {
    "run": "headwater.api.running",
    "resume": "headwater.api.running",
    "Run": "headwater.engine.result",
    "RunOptions": "headwater.engine.options",
    "compile": "headwater.api.compiler",
    "list_runs": "headwater.api.runs",
    "get_run": "headwater.api.runs",
    "delete_run": "headwater.api.runs",
    "RunInfo": "headwater.api.runs",
    "RunDetails": "headwater.api.runs",
    "TaskDetails": "headwater.api.runs",
    "DeletedRun": "headwater.api.runs",
    "lineage": "headwater.api.lineage",
    "Lineage": "headwater.api.lineage",
    "get_artifact": "headwater.api.artifacts",
    "ArtifactInfo": "headwater.api.artifacts",
    "clear_cache": "headwater.api.cache",
    "register_model": "headwater.api.models",
    "list_models": "headwater.api.models",
    "get_model": "headwater.api.models",
    "promote_model": "headwater.api.models",
    "ModelInfo": "headwater.api.models",
    "Promotion": "headwater.api.models",
    "deploy_model": "headwater.endpoints",
    "list_endpoints": "headwater.endpoints",
    "stop_endpoint": "headwater.endpoints",
    "Deployment": "headwater.endpoints",
    "EndpointInfo": "headwater.endpoints",
    "log_step": "headwater.step_metrics",
    "get_step_metrics": "headwater.api.steps",
    "StepSeries": "headwater.api.steps",
    "log_series": "headwater.step_metrics",
}

__all__ = [
    "ArtifactInfo",
    "DeletedRun",
    "Deployment",
    "EndpointInfo",
    "Lineage",
    "ModelInfo",
    "Promotion",
    "Run",
    "RunDetails",
    "RunInfo",
    "RunOptions",
    "StepSeries",
    "TaskDetails",
    "__version__",
    "clear_cache",
    "compile",
    "delete_run",
    "deploy_model",
    "get_artifact",
    "get_model",
    "get_run",
    "get_step_metrics",
    "lineage",
    "list_endpoints",
    "list_models",
    "list_runs",
    "log_series",
    "log_step",
    "promote_model",
    "register_model",
    "resume",
    "run",
    "stop_endpoint",
]

if TYPE_CHECKING:
    from headwater.api.artifacts import ArtifactInfo, get_artifact
    from headwater.api.cache import clear_cache
    from headwater.api.compiler import compile
    from headwater.api.lineage import Lineage, lineage
    from headwater.api.models import (
        ModelInfo,
        Promotion,
        get_model,
        list_models,
        promote_model,
        register_model,
    )
    from headwater.api.running import resume, run
    from headwater.api.runs import (
        DeletedRun,
        RunDetails,
        RunInfo,
        TaskDetails,
        delete_run,
        get_run,
        list_runs,
    )
    from headwater.api.steps import StepSeries, get_step_metrics
    from headwater.endpoints import (
        Deployment,
        EndpointInfo,
        deploy_model,
        list_endpoints,
        stop_endpoint,
    )
    from headwater.engine.options import RunOptions
    from headwater.engine.result import Run
    from headwater.step_metrics import log_series, log_step


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'headwater' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})
