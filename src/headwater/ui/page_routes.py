"""The HTML pages: Runs, Start a run, Run, Artifact, Compare, Models (the catalog's pages,
Experiments, Pipelines and Recurring runs, are `ui.catalog_routes`). Server-rendered with
Jinja2 (autoescaped). `static/app.js` adds deleting, the task panel and live updates;
`static/launch.js` posts the Start a run form; `static/runs.js` chooses the runs table's
columns; `static/models.js` changes a model version's stage."""

from __future__ import annotations

import functools
from typing import Any
from urllib.parse import quote

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse

from headwater.metadata.base import RUN_STATES
from headwater.ui import data
from headwater.ui.access import list_namespaces
from headwater.ui.app_state import metadata_of
from headwater.ui.groups import ITERATIONS_SHOWN
from headwater.ui.tables import format_number

router = APIRouter(include_in_schema=False)

STATES = RUN_STATES
#: The runs table's columns besides its metrics that the reader may hide: (key, heading).
RUN_COLUMNS = (
    ("experiment", "Experiment"),
    ("created", "Created"),
    ("duration", "Duration"),
    ("executor", "Executor"),
)


@functools.cache
def _env() -> Any:
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.PackageLoader("headwater.ui", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
    )
    env.filters["q"] = lambda s: quote(str(s), safe="")
    env.filters["num"] = _num
    env.filters["metric"] = format_number
    return env


def _num(value: Any) -> str:
    """A cell of any table: floats as `format_number` writes them, anything else as is (an
    integer column of years or ids keeps its digits ungrouped)."""
    if isinstance(value, float):
        return format_number(value)
    return "" if value is None else str(value)


def render(template: str, **context: Any) -> str:
    """The page `template` filled with `context`."""
    return str(_env().get_template(template).render(**context))


@router.get("/", response_class=HTMLResponse)
def runs_page(
    request: Request,
    limit: int = Query(50, ge=1, le=500),
    offset: int = Query(0, ge=0),
    pipeline: str = "",
    state: str = "",
    q: str = "",
    experiment: str = "",
    namespace: str = "",
) -> str:
    """The runs table, filtered (to `namespace`, else those the principal holds). An unknown
    `experiment` is a 404, as an unknown run's or experiment's page is (the API's list answers
    no runs instead): the page is headed by the experiment it lists, and a link to one deleted
    since should say so, not show nothing."""
    from headwater.api.catalog import get_experiment, list_experiments
    from headwater.errors import NotFoundError

    store = metadata_of(request)
    try:
        chosen = get_experiment(experiment, metadata=store) if experiment else None
    except NotFoundError as exc:
        raise NotFoundError(
            f"no experiment with id {experiment!r}: pick one under Experiments, or list every "
            "run under Runs"
        ) from exc
    held = list_namespaces(request, namespace)
    page = data.runs_page(
        metadata=store, limit=limit, offset=offset, pipeline=pipeline, state=state, q=q,
        experiment_id=experiment, namespaces=held,
    )  # fmt: skip
    base = {"limit": limit, "pipeline": pipeline, "state": state, "q": q, "experiment": experiment}
    if namespace:
        base["namespace"] = namespace
    experiments, _ = list_experiments(limit=500, namespaces=held, metadata=store)
    return render(
        "runs.html", page=page, states=STATES, filters=base, optional=RUN_COLUMNS, title="Runs",
        experiments=experiments, queued=request.app.state.runs.queued,
        experiment=chosen,
    )  # fmt: skip


@router.get("/runs/new", response_class=HTMLResponse)
def new_run_page(
    request: Request, path: str = "", pipeline_name: str = "", version: str = "",
    experiment: str = "",
) -> str:  # fmt: skip
    """Choose a pipeline (a file, or with `headwater server` an uploaded version); once
    chosen, a form typed from its parameters (`static/launch.js` posts it to
    `POST /api/v1/runs`), with the run's name and experiment when runs are queued."""
    from headwater.api.catalog import get_version, list_experiments, list_pipelines
    from headwater.errors import UserError
    from headwater.spec.ir import parse_pipeline
    from headwater.ui.launch import form_of, pipeline_form

    store = metadata_of(request)
    queued = request.app.state.runs.queued
    form, error, chosen = None, "", None
    try:
        if version:
            chosen = get_version(version, metadata=store)
            form = {"path": "", **form_of(parse_pipeline(chosen.ir))}
        elif path:
            form = pipeline_form(path, pipeline_name=pipeline_name or None)
    except UserError as exc:
        error = str(exc)
    held = list_namespaces(request)
    shared = None if held is None else ["", *held]
    pipelines = list_pipelines(limit=500, namespaces=shared, metadata=store)[0] if queued else []
    experiments = list_experiments(limit=500, namespaces=held, metadata=store)[0] if queued else []
    return render(
        "new_run.html", path=path, pipeline_name=pipeline_name, form=form, error=error,
        version=chosen, pipelines=pipelines, experiments=experiments, experiment=experiment,
        queued=queued, title="Start a run", namespaces=held or [],
    )  # fmt: skip


@router.get("/runs/{run_id}", response_class=HTMLResponse)
def run_page(
    request: Request, run_id: str, iterations: int = Query(ITERATIONS_SHOWN, ge=1, le=1000)
) -> str:
    run = data.run_view(run_id, metadata=metadata_of(request), iterations=iterations)
    title = run["display_name"] or f"Run {run['run_id'][:8]}"
    return render(
        "run.html", run=run, iterations=iterations, title=title,
        queued=request.app.state.runs.queued,
        **_steps_and_trials(run["run_id"], metadata_of(request)),
    )  # fmt: skip


def _steps_and_trials(run_id: str, metadata: str | None) -> dict[str, Any]:
    """What `run_steps.html` draws: `steps` (`data.steps_view` with each chart's SVG),
    `trials` (`data.trials_of`, or None) and `trials_chart` (SVG)."""
    from headwater.ui.charts import trials_chart_svg

    trials = data.trials_of(run_id, metadata=metadata)
    return {
        "steps": _charted(data.steps_view([run_id], metadata=metadata)),
        "trials": trials,
        "trials_chart": trials_chart_svg(trials) if trials else "",
    }


def _charted(steps: dict[str, Any]) -> dict[str, Any]:
    """`steps` with an `svg` in each chart (`charts.line_chart_svg`)."""
    from headwater.ui.charts import line_chart_svg

    for chart in steps["charts"]:
        lines = [(line["label"], [tuple(p) for p in line["points"]]) for line in chart["lines"]]
        chart["svg"] = line_chart_svg(chart["name"], lines)
    return steps


@router.get("/artifacts/{ref:path}", response_class=HTMLResponse)
def artifact_page(request: Request, ref: str) -> str:
    from headwater.ui.graph import lineage_layout

    art = data.artifact_view(ref, metadata=metadata_of(request))
    preview = art["preview"]
    plots = []
    if preview["kind"] == "classification":
        if preview["confusion_matrix"] or preview["roc"]:
            plots.append(_plots("", art["name"], preview))
        plots += [_plots(s["name"], f"{art['name']} {s['name']}", s) for s in preview["slices"]]

    lineage = data.lineage_view(str(art["id"]), metadata=metadata_of(request), hops=2, limit=60)
    lineage["layout"] = lineage_layout(lineage)
    return render(
        "artifact.html", art=art, preview=preview, plots=plots, lineage=lineage,
        title=f"Artifact {art['name']}",
    )  # fmt: skip


def _plots(title: str, name: str, metrics: dict[str, Any]) -> dict[str, str]:
    """One panel of a ClassificationMetrics preview: `title` (a slice's name, or empty),
    `confusion` and `roc` (SVG, or empty when that part was not logged)."""
    from headwater.ui.svg import confusion_matrix_svg, roc_svg

    matrix = metrics["confusion_matrix"]
    return {
        "title": title,
        "confusion": confusion_matrix_svg(matrix["labels"], matrix["rows"]) if matrix else "",
        "roc": roc_svg([(name, metrics["roc"])]) if metrics["roc"] else "",
    }


@router.get("/compare", response_class=HTMLResponse)
def compare_page(request: Request, runs: str = "") -> str:
    from headwater.ui.svg import roc_svg

    ids = [r for r in runs.split(",") if r.strip()]
    view = data.compare_view(ids, metadata=metadata_of(request))
    roc = roc_svg([(c["name"], c["points"]) for c in view["roc"]]) if view["roc"] else ""
    steps = _charted(view["steps"])
    return render("compare.html", view=view, roc=roc, steps=steps, title="Compare")


@router.get("/models", response_class=HTMLResponse)
def models_page(request: Request, name: str = "") -> str:
    view = data.models_view(metadata=metadata_of(request), name=name)
    from headwater.metadata.base import MODEL_STAGES

    return render("models.html", view=view, name=name, stages=MODEL_STAGES, title="Models")
