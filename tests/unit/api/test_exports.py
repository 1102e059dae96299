"""The `headwater` package is the API: every function is there, and importing it stays cheap."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

import headwater
from headwater import endpoints, step_metrics
from headwater.api import artifacts, cache, compiler, lineage, models, running, runs, steps
from headwater.engine import options, result

EXPORTED = {
    "run": running,
    "resume": running,
    "Run": result,
    "RunOptions": options,
    "compile": compiler,
    "list_runs": runs,
    "get_run": runs,
    "delete_run": runs,
    "RunInfo": runs,
    "RunDetails": runs,
    "TaskDetails": runs,
    "DeletedRun": runs,
    "lineage": lineage,
    "Lineage": lineage,
    "get_artifact": artifacts,
    "ArtifactInfo": artifacts,
    "clear_cache": cache,
    "register_model": models,
    "list_models": models,
    "get_model": models,
    "promote_model": models,
    "ModelInfo": models,
    "Promotion": models,
    "deploy_model": endpoints,
    "list_endpoints": endpoints,
    "stop_endpoint": endpoints,
    "Deployment": endpoints,
    "EndpointInfo": endpoints,
    "get_step_metrics": steps,
    "StepSeries": steps,
    "log_step": step_metrics,
    "log_series": step_metrics,
}


@pytest.mark.parametrize("name", sorted(EXPORTED))
def test_each_name_is_the_api_function(name: str) -> None:
    assert getattr(headwater, name) is getattr(EXPORTED[name], name)
    assert name in headwater.__all__
    assert name in dir(headwater)


def test_all_lists_only_what_exists() -> None:
    assert set(headwater.__all__) == {*EXPORTED, "__version__"}


def test_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no_such_thing"):
        headwater.no_such_thing  # noqa: B018


def test_import_headwater_loads_no_database_or_kfp(
    imported_after: Callable[..., list[str]],
) -> None:
    heavy = ("sqlalchemy", "kfp", "alembic", "headwater.api", "headwater.engine")
    assert imported_after("import headwater", heavy) == []


def test_reading_api_does_not_load_kfp(
    imported_after: Callable[..., list[str]], tmp_path: Path
) -> None:
    # list_runs needs SQLAlchemy but neither KFP nor the engine.
    env = {k: v for k, v in os.environ.items() if k != "HEADWATER_METADATA_URL"}
    env["HEADWATER_HOME"] = str(tmp_path)
    statement = "import headwater\nassert headwater.list_runs() == []"
    assert imported_after(statement, ("kfp", "headwater.engine"), env) == []
