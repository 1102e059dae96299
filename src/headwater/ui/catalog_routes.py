"""Experiments, pipelines (with their versions) and recurring runs: their pages, and their JSON
under `/api/v1` (`api`). Archiving an experiment and enabling or disabling a recurring run are
the same operations as through KFP's API."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse

from headwater.api import catalog as api_catalog
from headwater.ui import catalog
from headwater.ui.access import list_namespaces
from headwater.ui.app_state import metadata_of
from headwater.ui.page_routes import render

pages = APIRouter(include_in_schema=False)
api = APIRouter(tags=["api"])

_LIMIT = Query(50, ge=1, le=500)
_OFFSET = Query(0, ge=0)
_NAMESPACE = Query("", description="only this namespace (default: every one you hold)")


def _queued(request: Request) -> bool:
    return bool(request.app.state.runs.queued)


# -- pages ------------------------------------------------------------------------------------


@pages.get("/experiments", response_class=HTMLResponse)
def experiments_page(
    request: Request, limit: int = _LIMIT, offset: int = _OFFSET, namespace: str = _NAMESPACE
) -> str:
    view = catalog.experiments_view(
        metadata=metadata_of(request),
        limit=limit,
        offset=offset,
        namespaces=list_namespaces(request, namespace),
    )
    return render("experiments.html", view=view, title="Experiments")


@pages.get("/experiments/{experiment_id}", response_class=HTMLResponse)
def experiment_page(
    request: Request, experiment_id: str, limit: int = _LIMIT, offset: int = _OFFSET
) -> str:
    from headwater.ui.page_routes import RUN_COLUMNS

    view = catalog.experiment_view(
        experiment_id, metadata=metadata_of(request), limit=limit, offset=offset
    )
    return render(
        "experiment.html", view=view, optional=RUN_COLUMNS, queued=_queued(request),
        title=f"Experiment {view['experiment']['display_name']}",
    )  # fmt: skip


@pages.get("/pipelines", response_class=HTMLResponse)
def pipelines_page(
    request: Request, limit: int = _LIMIT, offset: int = _OFFSET, namespace: str = _NAMESPACE
) -> str:
    view = catalog.pipelines_view(
        metadata=metadata_of(request),
        limit=limit,
        offset=offset,
        namespaces=list_namespaces(request, namespace, shared=True),
    )
    return render("pipelines.html", view=view, title="Pipelines")


@pages.get("/pipelines/{pipeline_id}", response_class=HTMLResponse)
def pipeline_page(request: Request, pipeline_id: str) -> str:
    view = catalog.pipeline_view(pipeline_id, metadata=metadata_of(request))
    return render(
        "pipeline.html", view=view, queued=_queued(request),
        title=f"Pipeline {view['pipeline']['display_name']}",
    )  # fmt: skip


@pages.get("/pipelines/{pipeline_id}/versions/{version_id}", response_class=HTMLResponse)
def version_page(request: Request, pipeline_id: str, version_id: str) -> str:
    view = catalog.version_view(pipeline_id, version_id, metadata=metadata_of(request))
    title = f"{view['pipeline']['display_name']} {view['version']['display_name']}"
    return render("version.html", view=view, queued=_queued(request), title=title)


@pages.get("/recurring-runs", response_class=HTMLResponse)
def recurring_runs_page(
    request: Request, limit: int = _LIMIT, offset: int = _OFFSET, namespace: str = _NAMESPACE
) -> str:
    view = catalog.recurring_runs_view(
        metadata=metadata_of(request),
        limit=limit,
        offset=offset,
        namespaces=list_namespaces(request, namespace),
    )
    return render("recurring_runs.html", view=view, queued=_queued(request), title="Recurring runs")


@pages.get("/recurring-runs/{recurring_run_id}", response_class=HTMLResponse)
def recurring_run_page(
    request: Request, recurring_run_id: str, limit: int = _LIMIT, offset: int = _OFFSET
) -> str:
    from headwater.ui.page_routes import RUN_COLUMNS

    view = catalog.recurring_run_view(
        recurring_run_id, metadata=metadata_of(request), limit=limit, offset=offset
    )
    return render(
        "recurring_run.html", view=view, optional=RUN_COLUMNS, queued=_queued(request),
        title=f"Recurring run {view['recurring_run']['display_name']}",
    )  # fmt: skip


# -- JSON -------------------------------------------------------------------------------------


@api.get("/experiments", summary="Experiments, newest first")
def list_experiments(
    request: Request, limit: int = _LIMIT, offset: int = _OFFSET, namespace: str = _NAMESPACE
) -> Any:
    """`{"items", "total", "limit", "offset", "next_offset"}`; each experiment with `runs`
    (how many), `last_state` and `last_created_at` (of its newest run)."""
    return catalog.experiments_view(
        metadata=metadata_of(request),
        limit=limit,
        offset=offset,
        namespaces=list_namespaces(request, namespace),
    )


@api.get("/experiments/{experiment_id}", summary="An experiment with a page of its runs")
def get_experiment(
    request: Request, experiment_id: str, limit: int = _LIMIT, offset: int = _OFFSET
) -> Any:
    """`{"experiment", "runs" (as GET /runs answers), "recurring_runs"}`."""
    return catalog.experiment_view(
        experiment_id, metadata=metadata_of(request), limit=limit, offset=offset
    )


@api.post("/experiments/{experiment_id}/archive", summary="Archive an experiment and its runs")
def archive_experiment(request: Request, experiment_id: str) -> Any:
    """The experiment, ARCHIVED, with every run in it."""
    found = api_catalog.archive_experiment(experiment_id, True, metadata=metadata_of(request))
    return api_catalog.record_json(found)


@api.post("/experiments/{experiment_id}/unarchive", summary="Unarchive an experiment")
def unarchive_experiment(request: Request, experiment_id: str) -> Any:
    """The experiment, AVAILABLE (its runs stay archived, as KFP leaves them)."""
    found = api_catalog.archive_experiment(experiment_id, False, metadata=metadata_of(request))
    return api_catalog.record_json(found)


@api.get("/pipelines", summary="Uploaded pipelines, newest first")
def list_pipelines(
    request: Request, limit: int = _LIMIT, offset: int = _OFFSET, namespace: str = _NAMESPACE
) -> Any:
    """`{"items", "total", ...}`; each pipeline with `versions` (how many) and `latest`."""
    return catalog.pipelines_view(
        metadata=metadata_of(request),
        limit=limit,
        offset=offset,
        namespaces=list_namespaces(request, namespace, shared=True),
    )


@api.get("/pipelines/{pipeline_id}", summary="A pipeline and its versions")
def get_pipeline(request: Request, pipeline_id: str) -> Any:
    """`{"pipeline", "versions"}`, newest version first."""
    return catalog.pipeline_view(pipeline_id, metadata=metadata_of(request))


@api.get("/pipelines/{pipeline_id}/versions/{version_id}", summary="A version and its graph")
def get_version(request: Request, pipeline_id: str, version_id: str) -> Any:
    """`{"pipeline", "version", "parameters", "graph"}`: the graph drawn from the version's
    spec (every task PENDING), `state` and `tasks` as a run's page reads them."""
    view = catalog.version_view(pipeline_id, version_id, metadata=metadata_of(request))
    return {**view, "state": "", "tasks": []}


@api.get("/recurring-runs", summary="Recurring runs, newest first")
def list_recurring_runs(
    request: Request, limit: int = _LIMIT, offset: int = _OFFSET, namespace: str = _NAMESPACE
) -> Any:
    """`{"items", "total", ...}`: trigger (and `trigger_text`), `next_fire_at`, `status`,
    `max_concurrency`."""
    return catalog.recurring_runs_view(
        metadata=metadata_of(request),
        limit=limit,
        offset=offset,
        namespaces=list_namespaces(request, namespace),
    )


@api.get("/recurring-runs/{recurring_run_id}", summary="A recurring run and its runs")
def get_recurring_run(
    request: Request, recurring_run_id: str, limit: int = _LIMIT, offset: int = _OFFSET
) -> Any:
    """`{"recurring_run", "runs" (as GET /runs answers)}`."""
    return catalog.recurring_run_view(
        recurring_run_id, metadata=metadata_of(request), limit=limit, offset=offset
    )


@api.post("/recurring-runs/{recurring_run_id}/enable", summary="Enable a recurring run")
def enable_recurring_run(request: Request, recurring_run_id: str) -> Any:
    """It next fires at its trigger's next time from now (`headwater server` only)."""
    request.app.state.runs.enable_recurring_run(recurring_run_id, True)
    view = catalog.recurring_run_view(recurring_run_id, metadata=metadata_of(request))
    return view["recurring_run"]


@api.post("/recurring-runs/{recurring_run_id}/disable", summary="Disable a recurring run")
def disable_recurring_run(request: Request, recurring_run_id: str) -> Any:
    """It fires no more until enabled."""
    request.app.state.runs.enable_recurring_run(recurring_run_id, False)
    view = catalog.recurring_run_view(recurring_run_id, metadata=metadata_of(request))
    return view["recurring_run"]
